//! `cairn merge --require NAME… [--signed-by FILE]` with real checks (`cairn verify` under
//! the real sandbox), real `ssh-keygen` keys and the git CLI: each unproven check refused
//! naming why with the repository byte for byte as it was, and the `Cairn-Verified`
//! trailers of a merge that is proven.

use std::time::Duration;

use camino::{Utf8Path, Utf8PathBuf};

use crate::mcp_client::Mcp;
use crate::merge_commands::{every_byte_below, setup, snapshot, text};
use crate::support::{Env, Server, git, stderr};
use crate::verify_commands::{ssh_key, stored, verify};

/// Everything of the repository a refused merge must leave alone, a line each: every file
/// below it (objects included) with a hash of its bytes and mode, the index's modification
/// time, and what git reports of refs, HEAD, index and status (read with
/// `GIT_OPTIONAL_LOCKS=0`, so `git status` does not refresh the index itself).
fn untouched(repo: &Utf8Path) -> Vec<String> {
    let mut lines: Vec<String> = every_byte_below(repo)
        .into_iter()
        .map(|(path, bytes)| format!("{path} {}", blake3::hash(&bytes)))
        .collect();
    let index = std::fs::metadata(repo.join(".git/index")).unwrap();
    lines.push(format!("index mtime {:?}", index.modified().unwrap()));
    let git_says = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(repo)
            .env("GIT_OPTIONAL_LOCKS", "0")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}");
        format!("git {args:?}: {}", String::from_utf8_lossy(&out.stdout))
    };
    for args in [
        &["for-each-ref"][..],
        &["rev-parse", "HEAD"],
        &["symbolic-ref", "HEAD"],
        &["ls-files", "-s"],
        &["status", "--porcelain"],
    ] {
        lines.push(git_says(args));
    }
    lines
}

/// Fails naming each line of [`untouched`] that differs.
fn assert_untouched(repo: &Utf8Path, before: &[String], what: &str) {
    let now = untouched(repo);
    let changed: Vec<_> = now.iter().filter(|l| !before.contains(l)).collect();
    let gone: Vec<_> = before.iter().filter(|l| !now.contains(l)).collect();
    assert!(
        changed.is_empty() && gone.is_empty(),
        "{what}: the repository changed: now {changed:#?}, before {gone:#?}"
    );
}

/// A recorded check of `snap` named `name`: `command`, signed with `key` if given. Its
/// attestation and tree.
fn check(
    env: &Env,
    snap: &str,
    name: &str,
    key: Option<&Utf8Path>,
    command: &[&str],
) -> (String, String) {
    let mut args = vec![snap, "--check", name];
    if let Some(key) = key {
        args.extend(["--sign", key.as_str()]);
    }
    args.push("--");
    args.extend_from_slice(command);
    let (_, v) = verify(env, &args);
    assert!(v["attestation"].is_string(), "{v}");
    (
        v["attestation"].as_str().unwrap().to_owned(),
        v["tree"].as_str().unwrap().to_owned(),
    )
}

/// The agent's snapshot, a listed and an unlisted key, the allowed-signers file listing
/// the first, and these attestations of the snapshot's tree: `lint` failed, `tests`
/// passed unsigned, `wrong` passed signed by the unlisted key, `altered` passed signed by
/// the listed key with its stored signature replaced by that key's signature of other
/// bytes, `good` passed signed by the listed key.
struct Proofs {
    repo: Utf8PathBuf,
    snap: String,
    signers: Utf8PathBuf,
    tests: String,
    good: String,
}

fn proofs(env: &Env) -> Proofs {
    let (repo, agent, _) = setup(env);
    std::fs::write(agent.join("src/new.rs"), "fn new() {}\n").unwrap();
    let snap = snapshot(env, &agent, "agent: add new.rs");
    let keys = env.path().join("keys");
    let other = env.path().join("other-keys");
    std::fs::create_dir_all(&keys).unwrap();
    std::fs::create_dir_all(&other).unwrap();
    let (listed, public) = ssh_key(&keys);
    let (unlisted, _) = ssh_key(&other);
    let signers = env.path().join("allowed_signers");
    std::fs::write(&signers, format!("# CI\nci@example {public}\n")).unwrap();

    check(env, &snap, "lint", None, &["sh", "-c", "exit 3"]);
    let (tests, _) = check(env, &snap, "tests", None, &["test", "-f", "src/new.rs"]);
    check(env, &snap, "wrong", Some(&unlisted), &["true"]);
    let (altered, tree) = check(env, &snap, "altered", Some(&listed), &["true", "altered"]);
    let (good, _) = check(env, &snap, "good", Some(&listed), &["true"]);
    // `altered`'s signature replaced by the same key's signature of `good`'s bytes.
    let (_, of_good) = stored(env, &tree, &good);
    {
        let store = cas::Store::open(&env.store(), &cas::OpenOptions::default()).unwrap();
        let mut batch = cas::WriteBatch::new();
        let (fingerprint, signature) = of_good[0].clone();
        batch.add_attestation_signature(altered.parse().unwrap(), &fingerprint, signature);
        store.write(&batch).unwrap();
    }
    Proofs {
        repo,
        snap,
        signers,
        tests,
        good,
    }
}

/// `merge SNAP --into REPO ARGS…`: exit status and JSON.
fn merge(env: &Env, p: &Proofs, args: &[&str]) -> (i32, serde_json::Value) {
    let mut all = vec!["merge", p.snap.as_str(), "--into", p.repo.as_str()];
    all.extend_from_slice(args);
    env.json(&all)
}

#[test]
fn each_unproven_check_refuses_naming_why_and_the_repository_is_untouched() {
    let env = Env::new();
    let p = proofs(&env);
    let signed_by = ["--signed-by", p.signers.as_str()];
    // Each required check alone, and the reason it does not count.
    let cases: [(&str, bool, &str); 6] = [
        ("missing", false, "no attestation"),
        ("lint", false, "failed (exit 3"),
        ("tests", true, "not signed"),
        ("wrong", true, "a key the allowed signers do not list"),
        ("altered", true, "does not match the attestation's bytes"),
        ("missing", true, "no attestation"),
    ];
    let before = untouched(&p.repo);
    for (name, signed, reason) in cases {
        let mut args = vec!["--require", name];
        if signed {
            args.extend(signed_by);
        }
        let (code, v) = merge(&env, &p, &args);
        assert_eq!(code, 1, "{name}: {v}");
        assert_eq!(v["merged"], false, "{name}: {v}");
        let unverified = v["unverified"].as_array().unwrap();
        assert_eq!(unverified.len(), 1, "{name}: {v}");
        assert_eq!(unverified[0]["check"], name, "{v}");
        let why = unverified[0]["reason"].as_str().unwrap();
        assert!(
            why.contains(reason),
            "{name}: {why:?} does not say {reason:?}"
        );
        assert!(v["message"].as_str().unwrap().contains(name), "{v}");
        assert_untouched(&p.repo, &before, name);
    }
    // All at once: every one named, in order, a proven one among them changing nothing.
    let (code, v) = merge(
        &env,
        &p,
        &[
            "--require",
            "good",
            "--require",
            "tests",
            "--require",
            "wrong",
            "--require",
            "altered",
            "--require",
            "missing",
            "--require",
            "lint",
            "--signed-by",
            p.signers.as_str(),
        ],
    );
    assert_eq!(code, 1, "{v}");
    let named: Vec<&str> = v["unverified"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["check"].as_str().unwrap())
        .collect();
    assert_eq!(
        named,
        ["tests", "wrong", "altered", "missing", "lint"],
        "{v}"
    );
    assert_untouched(&p.repo, &before, "refused");
    // The human form names each too, and exits 1.
    let out = env.cairn(&[
        "merge",
        &p.snap,
        "--into",
        p.repo.as_str(),
        "--require",
        "lint",
        "--require",
        "missing",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("unverified: lint: failed (exit 3"),
        "{shown}"
    );
    assert!(
        shown.contains("unverified: missing: no attestation"),
        "{shown}"
    );
    assert_untouched(&p.repo, &before, "refused");
}

#[test]
fn a_proven_merge_carries_a_cairn_verified_trailer_per_check() {
    let env = Env::new();
    let p = proofs(&env);
    // Unsigned counts without --signed-by.
    let (code, v) = merge(
        &env,
        &p,
        &[
            "--require",
            "tests",
            "--require",
            "good",
            "--require",
            "tests",
        ],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["merged"], true, "{v}");
    assert_eq!(v["unverified"], serde_json::json!([]));
    let trailers = text(git(
        &p.repo,
        &[
            "log",
            "-1",
            "--format=%(trailers)",
            v["branch"].as_str().unwrap(),
        ],
    ));
    assert_eq!(
        trailers,
        format!(
            "Cairn-Snapshot: {}\nCairn-Verified: tests {}\nCairn-Verified: good {}",
            p.snap, p.tests, p.good
        )
    );
    // Signed by a listed key.
    let (code, v) = merge(
        &env,
        &p,
        &[
            "--require",
            "good",
            "--signed-by",
            p.signers.as_str(),
            "--branch",
            "proven",
        ],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["verified"][0]["attestation"], p.good.as_str(), "{v}");
    assert!(
        v["verified"][0]["signed_by"]
            .as_str()
            .unwrap()
            .starts_with("SHA256:")
    );
    let only = text(git(
        &p.repo,
        &[
            "log",
            "-1",
            "--format=%(trailers:key=Cairn-Verified)",
            "proven",
        ],
    ));
    assert_eq!(only, format!("Cairn-Verified: good {}", p.good));
}

#[test]
fn with_checkout_an_unproven_merge_changes_nothing_and_a_proven_one_commits_to_head() {
    let env = Env::new();
    let p = proofs(&env);
    let before = untouched(&p.repo);
    let ops = |env: &Env| env.json(&["op", "log", p.repo.as_str()]).1;
    let ops_before = ops(&env);
    let (code, v) = merge(
        &env,
        &p,
        &[
            "--checkout",
            "--require",
            "altered",
            "--signed-by",
            p.signers.as_str(),
        ],
    );
    assert_eq!(code, 1, "{v}");
    assert_untouched(&p.repo, &before, "refused");
    assert_eq!(ops(&env), ops_before, "nothing was captured or recorded");
    let (code, v) = merge(
        &env,
        &p,
        &[
            "--checkout",
            "--require",
            "good",
            "--signed-by",
            p.signers.as_str(),
        ],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        std::fs::read_to_string(p.repo.join("src/new.rs")).unwrap(),
        "fn new() {}\n"
    );
    let trailer = text(git(
        &p.repo,
        &[
            "log",
            "-1",
            "--format=%(trailers:key=Cairn-Verified)",
            "HEAD",
        ],
    ));
    assert_eq!(trailer, format!("Cairn-Verified: good {}", p.good));
}

#[test]
fn a_signers_file_that_cannot_be_used_is_a_usage_error_naming_it() {
    let env = Env::new();
    let p = proofs(&env);
    let before = untouched(&p.repo);
    let missing = env.path().join("no-such-file");
    let malformed = env.path().join("malformed");
    std::fs::write(
        &malformed,
        "# fine\nci@example ssh-ed25519 not-base64-at-all\n",
    )
    .unwrap();
    for (file, says) in [
        (&missing, format!("{missing}")),
        (&malformed, format!("{malformed}: line 2")),
    ] {
        let out = env.cairn(&[
            "merge",
            &p.snap,
            "--into",
            p.repo.as_str(),
            "--require",
            "good",
            "--signed-by",
            file.as_str(),
        ]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains(&says), "{}", stderr(&out));
    }
    // --signed-by alone requires nothing: refused, not ignored.
    let out = env.cairn(&[
        "merge",
        &p.snap,
        "--into",
        p.repo.as_str(),
        "--signed-by",
        p.signers.as_str(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--require"), "{}", stderr(&out));
    assert_untouched(&p.repo, &before, "refused");
}

/// The route and the tool are generated from the same verb: they take `require` and
/// `signed_by` and refuse alike.
#[test]
fn routes_and_tools_require_proof_too() {
    let env = Env::new();
    let p = proofs(&env);
    let before = untouched(&p.repo);
    let args = |require: &str| {
        serde_json::json!({
            "snapshot": p.snap, "into": p.repo, "require": [require],
            "signed_by": p.signers,
        })
    };
    {
        let server = Server::start(&env);
        let client = server.client();
        let (status, answer) = client.call("merge", &args("wrong")).unwrap();
        assert_eq!(status, 409, "{answer}");
        assert_eq!(answer["unverified"][0]["check"], "wrong", "{answer}");
        assert!(server.stop().success());
    }
    assert_untouched(&p.repo, &before, "refused");
    let mut mcp = Mcp::start(&env, &[]);
    mcp.call(1, "merge", args("tests"));
    let (is_error, answer) = mcp.tool_answer(1, Duration::from_secs(60));
    assert!(is_error, "{answer}");
    assert!(answer.to_string().contains("not signed"), "{answer}");
    assert_untouched(&p.repo, &before, "refused");
    mcp.call(2, "merge", args("good"));
    let (is_error, answer) = mcp.tool_answer(2, Duration::from_secs(60));
    assert!(!is_error, "{answer}");
    assert_eq!(answer["merged"], true, "{answer}");
}
