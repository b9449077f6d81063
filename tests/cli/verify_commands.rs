//! `cairn verify` and `cairn checks` with real commands under the real sandbox: exit codes
//! and JSON, the cache by tree, the view's confinement and removal, timeouts, the output
//! cap, signatures against the real `ssh-keygen`, and what `fsck` and `gc` do with
//! attestations.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use camino::{Utf8Path, Utf8PathBuf};

use crate::mcp_client::Mcp;
use crate::support::{Env, Server, mounts_under, pids_in, stdout, still_running};

/// A small Python project whose test passes, onboarded: its folder and snapshot.
fn project(env: &Env, name: &str) -> (Utf8PathBuf, String) {
    let dir = env.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("calc.py"), "def add(a, b):\n    return a + b\n").unwrap();
    std::fs::write(
        dir.join("test_calc.py"),
        "import calc\nassert calc.add(2, 2) == 4, 'add is broken'\nprint('1 passed')\n",
    )
    .unwrap();
    let (code, v) = env.json(&["onboard", dir.as_str()]);
    assert_eq!(code, 0, "{v}");
    (dir, v["snapshot"].as_str().unwrap().to_owned())
}

/// `cairn --json verify ARGS…` with `TMPDIR` at `tmp`, so its views are seen there.
fn verify_in(env: &Env, tmp: &Utf8Path, args: &[&str]) -> (i32, serde_json::Value) {
    verify_in_with(env, tmp, &[], args)
}

/// FUSE turned off: the command line with no server checks out, and starts none.
pub(crate) const NO_FUSE: &[(&str, &str)] = &[("CAIRN_NO_FUSE", "1")];

/// [`verify_in`] with `vars` in its environment too.
pub(crate) fn verify_in_with(
    env: &Env,
    tmp: &Utf8Path,
    vars: &[(&str, &str)],
    args: &[&str],
) -> (i32, serde_json::Value) {
    std::fs::create_dir_all(tmp).unwrap();
    let out = env
        .command()
        .envs(vars.iter().copied())
        .env("TMPDIR", tmp.as_str())
        .arg("--store")
        .arg(env.store().as_str())
        .arg("--json")
        .arg("verify")
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let value = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("not one JSON object ({e}): {text:?}"));
    (out.status.code().unwrap(), value)
}

pub(crate) fn verify(env: &Env, args: &[&str]) -> (i32, serde_json::Value) {
    verify_in(env, &env.path().join("tmp"), args)
}

/// What is left in the folder the views are made in.
fn views_left(tmp: &Utf8Path) -> Vec<String> {
    use std::os::unix::fs::MetadataExt as _;
    // This process's user: it made `tmp`.
    let uid = std::fs::metadata(tmp).unwrap().uid();
    match std::fs::read_dir(tmp.join(format!("cairn-verify-{uid}"))) {
        Ok(entries) => entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn checks(env: &Env, snapshot: &str) -> Vec<serde_json::Value> {
    let (code, v) = env.json(&["checks", snapshot]);
    assert_eq!(code, 0, "{v}");
    v["checks"].as_array().unwrap().clone()
}

#[test]
fn a_passing_check_exits_0_and_a_failing_one_1_each_recorded() {
    let env = Env::new();
    let (dir, snap) = project(&env, "p");
    let (code, v) = verify(
        &env,
        &[&snap, "--check", "tests", "--", "python3", "test_calc.py"],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["passed"], true);
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["cached"], false);
    assert_eq!(v["signed"], false);
    assert_eq!(v["check"], "tests");
    assert_eq!(v["snapshot"], snap.as_str());
    let (_, log) = env.json(&["log", dir.as_str(), "-n", "1"]);
    assert_eq!(v["tree"], log["snapshots"][0]["tree"]);
    assert!(v["attestation"].as_str().unwrap().len() == 64);

    // A broken attempt: its check fails, exit 1 with the result object and a message.
    std::fs::write(dir.join("calc.py"), "def add(a, b):\n    return a - b\n").unwrap();
    let (_, s) = env.json(&["snapshot", dir.as_str()]);
    let broken = s["snapshot"].as_str().unwrap();
    let (code, v) = verify(
        &env,
        &[broken, "--check", "tests", "--", "python3", "test_calc.py"],
    );
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["passed"], false);
    assert_eq!(v["exit_code"], 1);
    assert!(v["message"].as_str().unwrap().contains("tests"), "{v}");
    let (code, out) = env.json(&["checks", broken, "--log", "tests"]);
    assert_eq!(code, 0);
    assert!(
        out["log"]["stderr"]
            .as_str()
            .unwrap()
            .contains("add is broken"),
        "{out}"
    );
    // Human: the output as it was, stdout then stderr.
    let human = env.cairn(&["checks", broken, "--log", "tests"]);
    assert!(stdout(&human).contains("add is broken"));
    let listed = checks(&env, broken);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["passed"], false);
    assert_eq!(
        listed[0]["command"],
        serde_json::json!(["python3", "test_calc.py"])
    );
    assert!(listed[0]["signed_by"].is_null());
    assert!(!listed[0]["host"].as_str().unwrap().is_empty());
}

#[test]
fn an_equal_tree_answers_from_the_record_and_other_commands_or_env_do_not() {
    let env = Env::new();
    let (_, first) = project(&env, "a");
    let (_, second) = project(&env, "b");
    assert_ne!(first, second, "two onboards, two snapshots");
    let args = |snap: &str| -> Vec<String> {
        [snap, "--env", "SEED=1", "--", "python3", "test_calc.py"]
            .map(str::to_owned)
            .to_vec()
    };
    let run = |args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        verify(&env, &args)
    };
    let (code, one) = run(args(&first));
    assert_eq!(
        (code, &one["cached"]),
        (0, &serde_json::json!(false)),
        "{one}"
    );
    let (code, two) = run(args(&second));
    assert_eq!(code, 0, "{two}");
    assert_eq!(two["cached"], true, "{two}");
    assert_eq!(two["attestation"], one["attestation"]);
    assert_eq!(two["snapshot"], second.as_str());
    assert_eq!(two["tree"], one["tree"]);
    // Another env value, another command: other checks, run and recorded.
    let (_, env2) = run(
        [&second, "--env", "SEED=2", "--", "python3", "test_calc.py"]
            .map(|s| s.to_string())
            .to_vec(),
    );
    assert_eq!(env2["cached"], false, "{env2}");
    let (_, other) = run([
        &second,
        "--env",
        "SEED=1",
        "--",
        "python3",
        "-B",
        "test_calc.py",
    ]
    .map(|s| s.to_string())
    .to_vec());
    assert_eq!(other["cached"], false, "{other}");
    // The command sees the value it is recorded with.
    let (_, seen) = run([
        &second,
        "--env",
        "SEED=7",
        "--",
        "sh",
        "-c",
        "test \"$SEED\" = 7",
    ]
    .map(|s| s.to_string())
    .to_vec());
    assert_eq!(seen["passed"], true, "{seen}");
    assert_eq!(checks(&env, &first).len(), 4);

    // --rerun runs anyway and records another.
    let mut again = args(&first);
    again.insert(1, "--rerun".into());
    let (code, three) = run(again);
    assert_eq!(code, 0);
    assert_eq!(three["cached"], false);
    assert_ne!(three["attestation"], one["attestation"]);
    let listed = checks(&env, &first);
    assert_eq!(listed.len(), 5);
    // Newest first.
    assert_eq!(listed[0]["attestation"], three["attestation"]);
}

#[test]
fn a_write_outside_the_view_is_refused_and_the_view_is_gone_afterwards() {
    let env = Env::new();
    let (dir, snap) = project(&env, "p");
    let outside = env.path().join("outside.txt");
    let tmp = env.path().join("tmp");
    let script =
        format!("echo changed > calc.py && echo pwned > {outside}; s=$?; pwd > where; echo $s");
    let (code, v) = verify_in(&env, &tmp, &[&snap, "--", "sh", "-c", &script]);
    assert_eq!(code, 0, "the shell's last status is echo's: {v}");
    assert!(
        !outside.exists(),
        "the sandbox let the check write outside its view"
    );
    let (_, log) = env.json(&["checks", &snap, "--log", "sh"]);
    assert_ne!(log["log"]["stdout"].as_str().unwrap().trim(), "0", "{log}");
    // The check wrote in its view, not in the worktree.
    assert_eq!(
        std::fs::read_to_string(dir.join("calc.py")).unwrap(),
        "def add(a, b):\n    return a + b\n"
    );
    assert!(!dir.join("where").exists());
    assert_eq!(views_left(&tmp), Vec::<String>::new());
}

#[test]
fn a_check_past_its_timeout_is_killed_and_recorded_as_timed_out() {
    let env = Env::new();
    let (_, snap) = project(&env, "p");
    let tmp = env.path().join("tmp");
    let started = Instant::now();
    // Through a shell: its child is killed too, else it would hold the output open.
    let (code, v) = verify_in(
        &env,
        &tmp,
        &[
            &snap,
            "--timeout",
            "1",
            "--",
            "sh",
            "-c",
            "sleep 30; echo never",
        ],
    );
    let took = started.elapsed();
    assert_eq!(code, 1, "{v}");
    assert!(took < Duration::from_secs(15), "took {took:?}");
    assert_eq!(v["passed"], false);
    assert_eq!(v["timed_out"], true);
    assert!(v["duration_ms"].as_u64().unwrap() >= 1000);
    assert_eq!(views_left(&tmp), Vec::<String>::new());
    let listed = checks(&env, &snap);
    assert_eq!(listed[0]["timed_out"], true);
    assert_eq!(listed[0]["passed"], false);
    // A timeout of 0 is bad usage.
    let (code, v) = verify(&env, &[&snap, "--timeout", "0", "--", "true"]);
    assert_eq!(code, 2, "{v}");
}

#[test]
fn output_past_16_mib_is_cut_and_marked() {
    let env = Env::new();
    let (_, snap) = project(&env, "p");
    let (code, v) = verify(
        &env,
        &[
            &snap,
            "--check",
            "loud",
            "--",
            "sh",
            "-c",
            "yes | head -c 17000000; echo done >&2",
        ],
    );
    assert_eq!(code, 0, "{v}");
    let (_, log) = env.json(&["checks", &snap, "--log", "loud"]);
    let log = &log["log"];
    assert_eq!(log["stdout_cut"], true);
    assert_eq!(log["stdout"].as_str().unwrap().len(), 16 << 20);
    assert_eq!(log["stderr_cut"], false);
    assert_eq!(log["stderr"], "done\n");
}

/// An ed25519 key pair `ssh-keygen` makes in `dir`: the private key's path and its public
/// line.
pub(crate) fn ssh_key(dir: &Utf8Path) -> (Utf8PathBuf, String) {
    let key = dir.join("verifier");
    let made = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "ci",
            "-f",
            key.as_str(),
        ])
        .status()
        .expect("ssh-keygen runs (Debian's openssh-client)");
    assert!(made.success());
    let public = std::fs::read_to_string(format!("{key}.pub")).unwrap();
    (key, public.trim().to_owned())
}

/// `ssh-keygen -Y verify` of `signature` over `message`, by `public`'s key.
fn ssh_keygen_accepts(dir: &Utf8Path, public: &str, message: &[u8], signature: &[u8]) -> bool {
    let signers = dir.join("allowed_signers");
    std::fs::write(&signers, format!("ci@example {public}\n")).unwrap();
    let sig = dir.join("attestation.sig");
    std::fs::write(&sig, signature).unwrap();
    let mut child = Command::new("ssh-keygen")
        .args(["-Y", "verify", "-f", signers.as_str(), "-I", "ci@example"])
        .args(["-n", "cairn-attestation", "-s", sig.as_str()])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(message).unwrap();
    child.wait().unwrap().success()
}

/// The stored bytes of attestation `id` of `tree`, and its signatures.
pub(crate) fn stored(env: &Env, tree: &str, id: &str) -> (Vec<u8>, Vec<(String, Vec<u8>)>) {
    let store = cas::Store::open(&env.store(), &cas::OpenOptions::default()).unwrap();
    let reader = store.reader().unwrap();
    let id: cas::AttestationId = id.parse().unwrap();
    let bytes = reader
        .side_get(cas::ATTESTATIONS, tree, id.as_bytes())
        .unwrap()
        .expect("the attestation is filed under its tree");
    let signatures = reader.attestation_signatures(id).unwrap();
    (bytes, signatures)
}

#[test]
fn a_signed_attestation_checks_with_ssh_keygen_and_altered_bytes_do_not() {
    let env = Env::new();
    let (_, snap) = project(&env, "p");
    let keys = env.path().join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let (key, public) = ssh_key(&keys);
    let (code, v) = verify(
        &env,
        &[
            &snap,
            "--sign",
            key.as_str(),
            "--",
            "python3",
            "test_calc.py",
        ],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["signed"], true);
    let (bytes, signatures) = stored(
        &env,
        v["tree"].as_str().unwrap(),
        v["attestation"].as_str().unwrap(),
    );
    assert_eq!(signatures.len(), 1);
    let (fingerprint, signature) = &signatures[0];
    assert!(ssh_keygen_accepts(&keys, &public, &bytes, signature));
    let mut altered = bytes.clone();
    // The check's name.
    altered[36] ^= 1;
    assert!(!ssh_keygen_accepts(&keys, &public, &altered, signature));
    // `checks` names the key, as `ssh-keygen -l` does.
    let listed = checks(&env, &snap);
    assert_eq!(listed[0]["signed_by"], fingerprint.as_str());
    let printed = Command::new("ssh-keygen")
        .args(["-l", "-f", &format!("{key}.pub")])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&printed.stdout).contains(fingerprint.as_str()));
    // A cached answer signed by the key already is signed.
    let (code, again) = verify(&env, &[&snap, "--", "python3", "test_calc.py"]);
    assert_eq!(
        (code, &again["cached"], &again["signed"]),
        (0, &true.into(), &true.into())
    );
    assert_eq!(env.json(&["fsck"]).0, 0);
}

#[test]
fn fsck_reports_a_signature_that_does_not_match_its_attestation() {
    let env = Env::new();
    let (dir, snap) = project(&env, "p");
    let keys = env.path().join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let (key, _) = ssh_key(&keys);
    let (_, signed) = verify(&env, &[&snap, "--sign", key.as_str(), "--", "true"]);
    let (_, plain) = verify(&env, &[&snap, "--", "false"]);
    let (_, signatures) = stored(
        &env,
        signed["tree"].as_str().unwrap(),
        signed["attestation"].as_str().unwrap(),
    );
    let (code, v) = env.json(&["fsck"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        v["checked"]["attestations"], 3,
        "two records, one signature: {v}"
    );
    // The signature of one filed as the other's.
    {
        let store = cas::Store::open(&env.store(), &cas::OpenOptions::default()).unwrap();
        let mut batch = cas::WriteBatch::new();
        let (fingerprint, signature) = signatures[0].clone();
        batch.add_attestation_signature(
            plain["attestation"].as_str().unwrap().parse().unwrap(),
            &fingerprint,
            signature,
        );
        store.write(&batch).unwrap();
    }
    let (code, v) = env.json(&["fsck"]);
    assert_eq!(code, 1, "{v}");
    let problems = v["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{v}");
    assert_eq!(problems[0]["kind"], "signature");
    assert!(
        problems[0]["name"]
            .as_str()
            .unwrap()
            .starts_with(plain["attestation"].as_str().unwrap())
    );
    let listed = checks(&env, &snap);
    let of_plain = listed
        .iter()
        .find(|c| c["attestation"] == plain["attestation"])
        .unwrap();
    assert!(
        of_plain["signed_by"].is_null(),
        "a signature of other bytes counts for nothing"
    );
    drop(dir);
}

#[test]
fn gc_keeps_attestations_while_a_snapshot_has_their_tree_and_then_drops_them() {
    let env = Env::new();
    let (dir, snap) = project(&env, "p");
    let (_, v) = verify(&env, &[&snap, "--", "sh", "-c", "echo kept output"]);
    let attestation = v["attestation"].as_str().unwrap().to_owned();
    let (code, gc) = env.json(&["gc"]);
    assert_eq!(code, 0, "{gc}");
    let removed = gc["removed"].as_array().unwrap();
    assert!(removed.is_empty(), "{gc}");
    let (_, log) = env.json(&["checks", &snap, "--log", "sh"]);
    assert_eq!(log["log"]["stdout"], "kept output\n");
    assert_eq!(env.json(&["fsck"]).0, 0);

    // The last snapshot with the tree goes: so does its attestation, and its output.
    let out = env.cairn(&["worktree", "remove", dir.as_str()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, gc) = env.json(&["gc", "--keep-within", "0"]);
    assert_eq!(code, 0, "{gc}");
    let removed = gc["removed"].as_array().unwrap();
    assert!(
        removed
            .iter()
            .any(|r| r["kind"] == "attestation" && r["id"] == attestation.as_str()),
        "{gc}"
    );
    let output = cas::BlobId::of(b"kept output\n").to_hex();
    assert!(removed.iter().any(|r| r["id"] == output.as_str()), "{gc}");
    let (code, v) = env.json(&["fsck"]);
    assert_eq!(code, 0, "{v}");
    assert!(v["checked"]["attestations"].is_null(), "none left: {v}");
}

#[test]
fn a_killed_verify_leaves_no_view_that_a_later_one_trips_on() {
    let env = Env::new();
    let (_, snap) = project(&env, "p");
    let tmp = env.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut child = env
        .command()
        .env("CAIRN_NO_FUSE", "1")
        .env("TMPDIR", tmp.as_str())
        .args([
            "--store",
            env.store().as_str(),
            "verify",
            &snap,
            "--check",
            "slow",
        ])
        .args(["--", "sleep", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while views_left(&tmp).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no view appeared"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let left = views_left(&tmp);
    // Killed while its check runs (the check itself, its own process group, ends alone).
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(views_left(&tmp), left, "the killed verify left its view");
    let (code, v) = verify_in_with(
        &env,
        &tmp,
        NO_FUSE,
        &[&snap, "--check", "slow", "--", "true"],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["cached"], false, "the killed run recorded nothing: {v}");
    assert_eq!(
        views_left(&tmp),
        Vec::<String>::new(),
        "the next verify removed it"
    );
    assert_eq!(checks(&env, &snap).len(), 1);
    // Wait the orphaned check out, so no process of this test outlives it.
    std::thread::sleep(Duration::from_secs(3).saturating_sub(started.elapsed()));
}

#[test]
fn verify_through_a_server_answers_from_the_record() {
    let env = Env::new();
    let (_, snap) = project(&env, "p");
    let server = Server::start(&env);
    let (code, one) = verify(&env, &[&snap, "--", "python3", "test_calc.py"]);
    assert_eq!(code, 0, "{one}");
    let (code, two) = verify(&env, &[&snap, "--", "python3", "test_calc.py"]);
    assert_eq!(code, 0, "{two}");
    assert_eq!(two["cached"], true);
    assert_eq!(two["attestation"], one["attestation"]);
    assert!(server.stop().success());
}

/// `network` and `sign` are the command line's, by `run`'s rule: a server route, the typed
/// `/v1/call` from another program and an MCP tool refuse them naming them, and the check
/// never runs (else an agent could have a machine's key sign `-- true` named `tests`).
/// The route and the tool run checks like the command line.
#[test]
fn routes_and_tools_verify_but_take_neither_network_nor_sign() {
    let env = Env::new();
    let (_, snap) = project(&env, "p");
    let keys = env.path().join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let (key, _) = ssh_key(&keys);
    let args = |extra: Option<(&str, serde_json::Value)>| {
        let mut args = serde_json::json!({
            "snapshot": snap, "check": "tests", "command": ["python3", "test_calc.py"],
        });
        if let Some((k, v)) = extra {
            args[k] = v;
        }
        args
    };
    let refused = [
        ("network", serde_json::json!(true)),
        ("sign", serde_json::json!(key)),
    ];
    {
        let server = Server::start(&env);
        let client = server.client();
        for (k, v) in &refused {
            let (status, answer) = client.call("verify", &args(Some((k, v.clone())))).unwrap();
            assert_eq!(status, 400, "{k}: {answer}");
            assert!(answer.to_string().contains(k), "{k}: {answer}");
        }
        assert!(
            checks(&env, &snap).is_empty(),
            "a refused request ran its check"
        );
        // The typed request takes them, and the engine refuses them, by `run`'s rule.
        for (k, v) in &refused {
            let (status, answer) = client
                .post_json(
                    "/v1/call",
                    &serde_json::json!({
                        "cwd": env.path(),
                        "request": { "verb": "verify", "args": args(Some((k, v.clone()))) },
                    }),
                )
                .unwrap();
            assert_eq!(status, 403, "{k}: {answer}");
            assert_eq!(answer["error"]["code"], "not_permitted", "{k}: {answer}");
            let message = answer["error"]["message"].as_str().unwrap();
            assert!(
                message.contains(&format!("--{k}")) && message.contains(snap.as_str()),
                "{answer}"
            );
        }
        assert!(
            checks(&env, &snap).is_empty(),
            "a refused request ran its check or signed"
        );
        let (status, answer) = client.call("verify", &args(None)).unwrap();
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["passed"], true, "{answer}");
        // The command line is a person's terminal, through the server too.
        let (code, v) = verify(
            &env,
            &[
                &snap,
                "--check",
                "tests",
                "--sign",
                key.as_str(),
                "--",
                "python3",
                "test_calc.py",
            ],
        );
        assert_eq!((code, &v["signed"]), (0, &true.into()), "{v}");
        assert!(server.stop().success());
    }
    let mut mcp = Mcp::start(&env, &[]);
    for (id, (k, v)) in (1..).zip(&refused) {
        mcp.call(id, "verify", args(Some((k, v.clone()))));
        let (is_error, answer) = mcp.tool_answer(id, Duration::from_secs(60));
        assert!(is_error, "{k}: {answer}");
        assert!(answer.to_string().contains(k), "{k}: {answer}");
    }
    mcp.call(9, "verify", args(None));
    let (is_error, answer) = mcp.tool_answer(9, Duration::from_secs(60));
    assert!(!is_error, "{answer}");
    assert_eq!(
        answer["cached"], true,
        "the route's record answers the tool: {answer}"
    );
    mcp.call(10, "checks", serde_json::json!({ "snapshot": snap }));
    let (is_error, answer) = mcp.tool_answer(10, Duration::from_secs(60));
    assert!(!is_error, "{answer}");
    assert_eq!(answer["checks"].as_array().unwrap().len(), 1, "{answer}");
}

/// `--env NAME` without a value is the caller's: the command line sends its own value, also
/// through a server; a request that gives only NAME (a route, `/v1/call`, an MCP tool) is
/// refused naming it, never answered with the server's own value.
#[test]
fn env_without_a_value_is_the_callers_never_the_servers() {
    let env = Env::new();
    let (_, snap) = project(&env, "p");
    let server = Server::start_with(&env, &[("CAIRN_SEED", "server's")]);
    let cli = |value: Option<&str>| {
        let mut cmd = env.command();
        match value {
            Some(v) => cmd.env("CAIRN_SEED", v),
            None => cmd.env_remove("CAIRN_SEED"),
        };
        let out = cmd
            .args(["--store", env.store().as_str(), "--json", "verify", &snap])
            .args(["--env", "CAIRN_SEED", "--", "sh", "-c"])
            .arg("test \"$CAIRN_SEED\" = \"caller's\"")
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.code().unwrap(), v)
    };
    let (code, v) = cli(Some("caller's"));
    assert_eq!(code, 0, "the command line's value: {v}");
    let (code, v) = cli(None);
    assert_eq!(code, 2, "{v}");
    assert_eq!(v["error"]["code"], "invalid_env", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("CAIRN_SEED"),
        "{v}"
    );
    let args = serde_json::json!({
        "snapshot": snap, "env": ["CAIRN_SEED"], "command": ["true"],
    });
    let client = server.client();
    let (status, answer) = client.call("verify", &args).unwrap();
    assert_eq!(status, 422, "{answer}");
    assert_eq!(answer["error"]["code"], "invalid_env", "{answer}");
    assert!(answer.to_string().contains("CAIRN_SEED"), "{answer}");
    let (status, answer) = client
        .post_json(
            "/v1/call",
            &serde_json::json!({
                "cwd": env.path(),
                "request": { "verb": "verify", "args": args },
            }),
        )
        .unwrap();
    assert_eq!(status, 422, "{answer}");
    assert_eq!(answer["error"]["code"], "invalid_env", "{answer}");
    assert!(server.stop().success());
    let mut mcp = Mcp::start(&env, &[("CAIRN_SEED", "server's")]);
    mcp.call(1, "verify", args.clone());
    let (is_error, answer) = mcp.tool_answer(1, Duration::from_secs(60));
    assert!(is_error, "{answer}");
    assert!(answer.to_string().contains("CAIRN_SEED"), "{answer}");
    // The one check recorded is the command line's, with its value.
    let listed = checks(&env, &snap);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["env"]["CAIRN_SEED"], "caller's");
}

/// `log` marks each snapshot with its checks (the newest run of each name), `show` a whole
/// snapshot's listing; a snapshot without checks has no `checks` field at all.
#[test]
fn log_and_show_mark_each_snapshot_with_its_checks() {
    let env = Env::new();
    let (dir, first) = project(&env, "p");
    std::fs::write(dir.join("more.txt"), "more\n").unwrap();
    let (_, s) = env.json(&["snapshot", dir.as_str()]);
    let second = s["snapshot"].as_str().unwrap().to_owned();
    let (code, tests) = verify(&env, &[&second, "--check", "tests", "--", "true"]);
    assert_eq!(code, 0, "{tests}");
    let (code, _) = verify(&env, &[&second, "--check", "lint", "--", "false"]);
    assert_eq!(code, 1);
    // A newer run of lint that passes is the one marked.
    let (code, lint) = verify(&env, &[&second, "--check", "lint", "--", "true", "again"]);
    assert_eq!(code, 0, "{lint}");

    let (code, log) = env.json(&["log", &second]);
    assert_eq!(code, 0, "{log}");
    assert_eq!(
        log["snapshots"][0]["checks"],
        serde_json::json!([
            {"check": "lint", "passed": true, "attestation": lint["attestation"]},
            {"check": "tests", "passed": true, "attestation": tests["attestation"]},
        ]),
        "{log}"
    );
    assert_eq!(log["snapshots"][1]["id"], first.as_str());
    assert!(log["snapshots"][1].get("checks").is_none(), "{log}");
    let human = stdout(&env.cairn(&["log", &second]));
    assert!(
        human.contains(&format!("snapshot {second}  ✓lint ✓tests\n")),
        "{human}"
    );
    assert!(human.contains(&format!("snapshot {first}\n")), "{human}");

    // A failing newest run is marked failed.
    let (code, _) = verify(&env, &[&first, "--check", "tests", "--", "false"]);
    assert_eq!(code, 1);
    let human = stdout(&env.cairn(&["log", &first]));
    assert!(
        human.contains(&format!("snapshot {first}  ✗tests\n")),
        "{human}"
    );

    let (code, shown) = env.json(&["show", &second]);
    assert_eq!(code, 0, "{shown}");
    assert_eq!(shown["checks"], log["snapshots"][0]["checks"], "{shown}");
    let human = stdout(&env.cairn(&["show", &second]));
    assert!(human.starts_with("checks: ✓lint ✓tests\n"), "{human}");
    // Below the root, a listing has no checks of its own.
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/x"), "x").unwrap();
    let (_, s) = env.json(&["snapshot", dir.as_str()]);
    let third = s["snapshot"].as_str().unwrap().to_owned();
    verify(&env, &[&third, "--check", "tests", "--", "true"]);
    let (_, sub) = env.json(&["show", &format!("{third}:sub")]);
    assert!(sub.get("checks").is_none(), "{sub}");
}

/// `verify --push` whose push fails: an error saying the attestation is recorded here (its
/// id) but not pushed; the record stays, and answers the next `verify`. With a remote, a
/// route and an MCP tool push as the command line does.
#[test]
fn a_failed_push_after_verify_says_the_attestation_is_recorded_here() {
    let env = Env::new();
    let (_, snap) = project(&env, "p");
    let (code, v) = verify(&env, &[&snap, "--check", "tests", "--push", "--", "true"]);
    assert_eq!(code, 2, "no remote origin: {v}");
    assert_eq!(v["error"]["code"], "unknown_remote", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    let listed = checks(&env, &snap);
    assert_eq!(listed.len(), 1, "recorded all the same: {listed:?}");
    let id = listed[0]["attestation"].as_str().unwrap();
    assert!(
        message.contains(&format!("attestation {id} is recorded")) && message.contains("origin"),
        "{v}"
    );
    let (code, v) = verify(&env, &[&snap, "--check", "tests", "--", "true"]);
    assert_eq!((code, &v["cached"]), (0, &true.into()), "{v}");
    assert!(v.get("pushed").is_none(), "{v}");

    // With a remote, a route and an MCP tool push too: `push` is no widening.
    let remote = env.path().join("remote");
    let (code, v) = env.json(&["remote", "add", "origin", &format!("file://{remote}")]);
    assert_eq!(code, 0, "{v}");
    let args = serde_json::json!({
        "snapshot": snap, "check": "tests", "command": ["true"], "push": true,
    });
    let server = Server::start(&env);
    let (status, answer) = server.client().call("verify", &args).unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["cached"], true, "{answer}");
    assert_eq!(answer["pushed"]["remote"], "origin", "{answer}");
    assert_eq!(answer["pushed"]["attestations_sent"], 1, "{answer}");
    assert!(server.stop().success());
    let mut mcp = Mcp::start(&env, &[]);
    mcp.call(1, "verify", args);
    let (is_error, answer) = mcp.tool_answer(1, Duration::from_secs(60));
    assert!(!is_error, "{answer}");
    assert_eq!(
        answer["pushed"]["attestations_sent"], 0,
        "sent already: {answer}"
    );
    let trees = std::fs::read_dir(remote.join("attestations"))
        .unwrap()
        .count();
    assert_eq!(trees, 1, "the snapshot's tree's folder");
}

#[test]
fn a_check_ended_by_a_signal_fails_and_names_it() {
    let env = Env::new();
    let (_, snap) = project(&env, "p");
    let (code, v) = verify(&env, &[&snap, "--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["exit_code"], 143, "{v}");
    assert_eq!(v["signal"], 15, "{v}");
    assert_eq!(v["timed_out"], false, "{v}");
    assert!(v["message"].as_str().unwrap().contains("signal 15"), "{v}");
}

/// `cairn serve` of `env`'s store with `TMPDIR` at `tmp` (where its views are made), FUSE
/// turned off if `no_fuse`.
fn serve_in(env: &Env, tmp: &Utf8Path, no_fuse: bool) -> Server {
    std::fs::create_dir_all(tmp).unwrap();
    crate::support::wait_for_no_server(env);
    let mut command = env.command();
    command
        .env("TMPDIR", tmp.as_str())
        .args(["--store", env.store().as_str(), "serve"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if no_fuse {
        command.env("CAIRN_NO_FUSE", "1");
    }
    let child = command.spawn().unwrap();
    let socket = cairn_client::Client::socket_of(&env.store());
    let started = Instant::now();
    while cairn_client::Client::connect(&socket).is_err() {
        assert!(started.elapsed() < Duration::from_secs(20), "no server");
        std::thread::sleep(Duration::from_millis(20));
    }
    Server { child, socket }
}

/// The one view folder in `tmp` once one is there: its `view/` is the check's directory.
fn the_view(tmp: &Utf8Path) -> Utf8PathBuf {
    use std::os::unix::fs::MetadataExt as _;
    let started = Instant::now();
    loop {
        if let [one] = views_left(tmp).as_slice() {
            let uid = std::fs::metadata(tmp).unwrap().uid();
            return tmp
                .join(format!("cairn-verify-{uid}"))
                .join(one)
                .join("view");
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no view appeared"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A project with what a listing tells apart: nested folders, an executable, a symlink, an
/// empty file.
fn rich_project(env: &Env) -> String {
    use std::os::unix::fs::PermissionsExt as _;
    let (dir, _) = project(env, "rich");
    std::fs::create_dir_all(dir.join("src/deep/er")).unwrap();
    std::fs::write(dir.join("src/deep/er/leaf.txt"), "leaf\n").unwrap();
    std::fs::write(dir.join("src/empty"), "").unwrap();
    std::fs::write(dir.join("run.sh"), "#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(dir.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("src/deep/er/leaf.txt", dir.join("link")).unwrap();
    let (code, v) = env.json(&["snapshot", dir.as_str()]);
    assert_eq!(code, 0, "{v}");
    v["snapshot"].as_str().unwrap().to_owned()
}

/// Lists the view: each path's kind, mode and link target, then each file's hash.
const LISTING: &str = "find . -printf '%p %y %m %l\\n' | LC_ALL=C sort && find . -type f | LC_ALL=C sort | xargs sha256sum";

/// A check through a server runs in a FUSE mount of the snapshot: it sees exactly the
/// files a checkout shows (same listing and bytes), its writes stay out of the store and
/// the worktree, a write outside the view is refused by Landlock on the mount, and the
/// mount and its folder are gone afterwards. With FUSE turned off the server checks out.
#[test]
fn through_a_server_the_view_is_a_mount_that_shows_what_a_checkout_shows() {
    let env = Env::new();
    let snap = rich_project(&env);
    let tmp = env.path().join("tmp");
    let outside = env.path().join("outside.txt");

    // The command line with no server and FUSE turned off: a checkout.
    let (code, checkout) = verify_in_with(
        &env,
        &tmp,
        NO_FUSE,
        &[
            &snap,
            "--check",
            "listed-checkout",
            "--",
            "sh",
            "-c",
            LISTING,
        ],
    );
    assert_eq!(code, 0, "{checkout}");
    assert_eq!(checkout["view"], "checkout", "{checkout}");

    let server = serve_in(&env, &tmp, false);
    let (code, mounted) = verify_in(
        &env,
        &tmp,
        &[&snap, "--check", "listed-mount", "--", "sh", "-c", LISTING],
    );
    assert_eq!(code, 0, "{mounted}");
    assert_eq!(mounted["view"], "mount", "{mounted}");
    let log = |name: &str| {
        let (code, v) = env.json(&["checks", &snap, "--log", name]);
        assert_eq!(code, 0, "{v}");
        v["log"]["stdout"].as_str().unwrap().to_owned()
    };
    let listed = log("listed-mount");
    assert!(
        listed.contains("./src/deep/er/leaf.txt f 644 \n"),
        "{listed}"
    );
    assert!(listed.contains("./link l 777"), "{listed}");
    let human = env.cairn(&["verify", &snap, "--check", "human", "--", "true"]);
    assert!(
        stdout(&human).contains("ms, in a mount): attestation"),
        "{}",
        stdout(&human)
    );
    assert_eq!(
        listed,
        log("listed-checkout"),
        "the mount shows what a checkout shows"
    );

    // Writes go to the view's layer; outside it they are refused.
    let script = format!(
        "echo changed > calc.py && mkdir -p new/dir && echo x > new/dir/f && cat calc.py new/dir/f; echo pwned > {outside}; echo $?"
    );
    let (code, v) = verify_in(
        &env,
        &tmp,
        &[&snap, "--check", "writes", "--", "sh", "-c", &script],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["view"], "mount", "{v}");
    let written = log("writes");
    assert!(written.starts_with("changed\nx\n"), "{written}");
    assert_ne!(written.lines().last(), Some("0"), "{written}");
    assert!(!outside.exists(), "the check wrote outside its mount");
    let shown = env.cairn(&["show", &format!("{snap}:calc.py")]);
    assert_eq!(shown.stdout, b"def add(a, b):\n    return a + b\n");
    assert_eq!(views_left(&tmp), Vec::<String>::new());
    assert_eq!(mounts_under(&tmp), Vec::<String>::new());
    assert!(server.stop().success());

    let server = serve_in(&env, &tmp, true);
    let (code, v) = verify_in(&env, &tmp, &[&snap, "--check", "no-fuse", "--", "true"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["view"], "checkout", "{v}");
    assert!(server.stop().success());
    let (code, v) = env.json(&["fsck"]);
    assert_eq!(code, 0, "{v}");
}

/// Many checks at once through one server, each in a mount of its own, all gone after.
#[test]
fn many_checks_at_once_through_a_server_each_get_a_mount() {
    let env = Env::new();
    let (_, snap) = project(&env, "p");
    let tmp = env.path().join("tmp");
    let server = serve_in(&env, &tmp, false);
    let started: Vec<_> = (0..6)
        .map(|i| {
            env.command()
                .args(["--store", env.store().as_str(), "--json", "verify", &snap])
                .args(["--check", &format!("c{i}"), "--", "sh", "-c"])
                .arg(format!(
                    "python3 test_calc.py && echo {i} > mine && sleep 1 && cat mine"
                ))
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, child) in started.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(out.status.code(), Some(0), "{v}");
        assert_eq!(v["view"], "mount", "{v}");
        let (_, log) = env.json(&["checks", &snap, "--log", &format!("c{i}")]);
        assert_eq!(
            log["log"]["stdout"].as_str().unwrap(),
            format!("1 passed\n{i}\n"),
            "each check saw its own writes alone"
        );
    }
    assert_eq!(views_left(&tmp), Vec::<String>::new());
    assert_eq!(mounts_under(&tmp), Vec::<String>::new());
    assert!(server.stop().success());
}

/// Writes the shell's pid and two children's into `pids` in the view, then waits.
const TWO_SLEEPS: &str =
    "sleep 300 & echo $! >> pids; sleep 300 & echo $! >> pids; echo $$ >> pids; wait";

/// kill -9 of a `cairn verify` while its check runs leaves nothing: the check's processes
/// die with it, nothing is recorded, and the next verify removes the view.
#[test]
fn a_verify_killed_while_its_check_runs_leaves_nothing_running_or_recorded() {
    let env = Env::new();
    let (_, snap) = project(&env, "p");
    let tmp = env.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut child = env
        .command()
        .env("TMPDIR", tmp.as_str())
        .args(["--store", env.store().as_str(), "verify", &snap])
        .args(["--check", "slow", "--", "sh", "-c", TWO_SLEEPS])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pids = pids_in(&the_view(&tmp).join("pids"), 3);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        still_running(&pids),
        Vec::<u32>::new(),
        "the check outlived its killed verify"
    );
    assert!(checks(&env, &snap).is_empty(), "nothing was recorded");
    let (code, v) = verify_in(&env, &tmp, &[&snap, "--check", "next", "--", "true"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        views_left(&tmp),
        Vec::<String>::new(),
        "the next verify removed it"
    );
    assert_eq!(tmp_left(&tmp), Vec::<String>::new());
    assert_eq!(checks(&env, &snap).len(), 1);
    let (code, v) = env.json(&["fsck"]);
    assert_eq!(code, 0, "{v}");
}

/// kill -9 of the server whose mount is a check's view: the check's processes die with it,
/// nothing is recorded, and the next verify (or a `recover`) detaches the mount left and
/// removes its folder.
#[test]
fn a_killed_server_leaves_no_check_running_and_its_mount_is_cleared_next_time() {
    let env = Env::new();
    let (dir, snap) = project(&env, "p");
    let tmp = env.path().join("tmp");
    for clear_by_recover in [false, true] {
        let mut server = serve_in(&env, &tmp, false);
        let client = env
            .command()
            .args(["--store", env.store().as_str(), "verify", &snap])
            .args(["--check", "slow", "--", "sh", "-c", TWO_SLEEPS])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let view = the_view(&tmp);
        let pids = pids_in(&view.join("pids"), 3);
        assert_eq!(mounts_under(&tmp), vec![view.to_string()]);
        server.child.kill().unwrap();
        server.child.wait().unwrap();
        let _ = client.wait_with_output();
        assert_eq!(
            still_running(&pids),
            Vec::<u32>::new(),
            "the check outlived the process serving its view"
        );
        assert!(
            checks(&env, &snap).iter().all(|c| c["check"] != "slow"),
            "nothing was recorded"
        );
        if clear_by_recover {
            let out = env
                .command()
                .env("TMPDIR", tmp.as_str())
                .args(["--store", env.store().as_str(), "recover", dir.as_str()])
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", crate::support::stderr(&out));
        } else {
            // No server now: the command line starts one for its view, which clears what
            // the dead one left, and stops once the check is done.
            let (code, v) = verify_in(&env, &tmp, &[&snap, "--check", "next", "--", "true"]);
            assert_eq!(code, 0, "{v}");
            assert_eq!(v["view"], "mount", "{v}");
            assert!(
                no_server_left(&env),
                "the server started for the view stopped"
            );
        }
        assert_eq!(
            mounts_under(&tmp),
            Vec::<String>::new(),
            "the stale mount was detached"
        );
        assert_eq!(
            views_left(&tmp),
            Vec::<String>::new(),
            "and its folder removed"
        );
        let (code, v) = env.json(&["fsck"]);
        assert_eq!(code, 0, "{v}");
    }
}

/// What `run`s left in `tmp`: private folders of processes that are gone, or the temporary
/// folders and files an older `run` made (`cairn-run-tmp-*`, `.tmp*`).
fn tmp_left(tmp: &Utf8Path) -> Vec<String> {
    crate::run_commands::tmp_left(tmp)
}

/// What a check starts in a session of its own (`setsid`, out of its process group) runs
/// on, as it would beside a checkout, but does not hold the verify: the mount of its view
/// is detached, and the verify answers.
#[test]
fn what_a_check_starts_outside_its_process_group_does_not_hold_the_verify() {
    let env = Env::new();
    let (_, snap) = project(&env, "p");
    let tmp = env.path().join("tmp");
    let server = serve_in(&env, &tmp, false);
    let script = "setsid sleep 60 </dev/null >/dev/null 2>&1 & echo $! > pid; cat pid";
    let started = Instant::now();
    let (code, v) = verify_in(&env, &tmp, &[&snap, "--", "sh", "-c", script]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["view"], "mount", "{v}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the verify waited for what its check left running"
    );
    assert_eq!(mounts_under(&tmp), Vec::<String>::new());
    assert_eq!(views_left(&tmp), Vec::<String>::new());
    let (_, log) = env.json(&["checks", &snap, "--log", "sh"]);
    let pid = log["log"]["stdout"].as_str().unwrap().trim();
    Command::new("kill").args(["-KILL", pid]).status().unwrap();
    assert!(server.stop().success());
}

/// kill -9 of a `cairn verify` while its view is being checked out: nothing ran, nothing is
/// recorded, and the next verify removes the half-written view.
#[test]
fn a_verify_killed_while_its_view_is_made_leaves_nothing() {
    let env = Env::new();
    let (dir, _) = project(&env, "p");
    for d in 0..40 {
        let sub = dir.join(format!("d{d}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..50 {
            std::fs::write(sub.join(format!("f{f}")), format!("{d} {f}\n").repeat(50)).unwrap();
        }
    }
    let (code, v) = env.json(&["snapshot", dir.as_str()]);
    assert_eq!(code, 0, "{v}");
    let snap = v["snapshot"].as_str().unwrap().to_owned();
    let tmp = env.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut child = env
        .command()
        .env("CAIRN_NO_FUSE", "1")
        .env("TMPDIR", tmp.as_str())
        .args(["--store", env.store().as_str(), "verify", &snap])
        .args(["--check", "slow", "--", "sh", "-c", "echo ran > ran"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while views_left(&tmp).is_empty() {
        assert!(started.elapsed() < Duration::from_secs(20), "no view");
        std::thread::sleep(Duration::from_millis(1));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let view = the_view(&tmp);
    assert!(!view.join("ran").exists(), "killed before its check ran");
    assert!(checks(&env, &snap).is_empty(), "nothing was recorded");
    let (code, v) = verify_in_with(
        &env,
        &tmp,
        NO_FUSE,
        &[&snap, "--check", "next", "--", "true"],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        views_left(&tmp),
        Vec::<String>::new(),
        "the next verify removed it"
    );
    assert_eq!(mounts_under(&tmp), Vec::<String>::new());
    assert_eq!(checks(&env, &snap).len(), 1);
    let (code, v) = env.json(&["fsck"]);
    assert_eq!(code, 0, "{v}");
}

/// A check has no network unless `--network`: its connection to a listener on this host
/// fails the check; with `--network` the same connection succeeds.
#[test]
fn a_check_reaches_the_network_only_with_network() {
    let env = Env::new();
    let (_, snap) = project(&env, "p");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepting = std::thread::spawn(move || listener.accept().map(|_| ()));
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port}");
    let (code, v) = verify(
        &env,
        &[&snap, "--check", "offline", "--", "bash", "-c", &connect],
    );
    assert_eq!(code, 1, "no network without --network: {v}");
    assert_eq!(v["passed"], false, "{v}");
    let (code, v) = verify(
        &env,
        &[
            &snap,
            "--check",
            "online",
            "--network",
            "--",
            "bash",
            "-c",
            &connect,
        ],
    );
    assert_eq!(code, 0, "--network lets it connect: {v}");
    accepting.join().unwrap().unwrap();
}

/// Checks sent to one server run at the same time: each of four waits for a word that the
/// test sends only once all four are connected, so run one after another the first would
/// wait until its timeout and fail.
#[test]
fn checks_through_one_server_run_at_the_same_time() {
    use std::io::Write as _;
    const CHECKS: usize = 4;
    let env = Env::new();
    let (_, snap) = project(&env, "p");
    let server = Server::start(&env);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let barrier = std::thread::spawn(move || {
        let mut waiting = Vec::new();
        for _ in 0..CHECKS {
            waiting.push(listener.accept().unwrap().0);
        }
        for mut stream in waiting {
            stream.write_all(b"go\n").unwrap();
        }
    });
    let wait_for_all =
        format!("exec 3<>/dev/tcp/127.0.0.1/{port}; read -r word <&3; test \"$word\" = go");
    let runs: Vec<_> = (0..CHECKS)
        .map(|i| {
            let name = format!("barrier-{i}");
            env.command()
                .arg("--store")
                .arg(env.store().as_str())
                .arg("--json")
                .args(["verify", &snap, "--check", &name, "--network"])
                .args(["--timeout", "30", "--", "bash", "-c", &wait_for_all])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for run in runs {
        let out = run.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}{}",
            stdout(&out),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    barrier.join().unwrap();
    assert_eq!(checks(&env, &snap).len(), CHECKS);
    assert!(server.stop().success());
}

/// The processes whose command line is exactly `args`, once there is one (waits up to 20
/// seconds).
fn processes_of(args: &[&str]) -> Vec<u32> {
    let wanted: Vec<u8> = args
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    let started = Instant::now();
    loop {
        let found: Vec<u32> = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .filter(|pid: &u32| {
                std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted)
            })
            .collect();
        if !found.is_empty() {
            return found;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no process {args:?} appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A `sleep` argument no other test's check has: its process is found by it.
fn unique_sleep() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("300.{}{nanos:09}", std::process::id())
}

/// Polls up to 10 seconds for `tmp` to hold no mount and no view, then says what is left.
fn left_after_cancel(tmp: &Utf8Path) -> (Vec<String>, Vec<String>) {
    let started = Instant::now();
    loop {
        let left = (mounts_under(tmp), views_left(tmp));
        if (left.0.is_empty() && left.1.is_empty()) || started.elapsed() > Duration::from_secs(10) {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A server's client that goes away while its check runs (kill -9 of `cairn verify`, or an
/// HTTP client of `/v1/verify` closing its connection) cancels it: the check is killed,
/// its view unmounted and removed, nothing recorded; and the server serves on.
#[test]
fn a_servers_client_gone_while_its_check_runs_stops_it_and_nothing_is_recorded() {
    use std::io::Write as _;
    let env = Env::new();
    let (dir, snap) = project(&env, "p");
    let tmp = env.path().join("tmp");
    let server = serve_in(&env, &tmp, false);
    for via_route in [false, true] {
        let seconds = unique_sleep();
        let mut client = None;
        let mut connection = None;
        if via_route {
            let body = serde_json::json!({
                "snapshot": snap, "check": "slow", "command": ["sleep", seconds],
                "cwd": dir.as_str(),
            })
            .to_string();
            let mut stream = std::os::unix::net::UnixStream::connect(&server.socket).unwrap();
            write!(
                stream,
                "POST /v1/verify HTTP/1.1\r\nHost: cairn\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            connection = Some(stream);
        } else {
            let spawned = env
                .command()
                .args(["--store", env.store().as_str(), "verify", &snap])
                .args(["--check", "slow", "--", "sleep", &seconds])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            client = Some(spawned);
        }
        let view = the_view(&tmp);
        let pids = processes_of(&["sleep", &seconds]);
        assert_eq!(mounts_under(&tmp), vec![view.to_string()]);
        if let Some(mut client) = client {
            client.kill().unwrap();
            client.wait().unwrap();
        }
        drop(connection);
        assert_eq!(
            still_running(&pids),
            Vec::<u32>::new(),
            "the check outlived its caller (route: {via_route})"
        );
        assert_eq!(
            left_after_cancel(&tmp),
            (Vec::new(), Vec::new()),
            "the view's mount and folder are gone (route: {via_route})"
        );
        assert!(checks(&env, &snap).is_empty(), "nothing was recorded");
    }
    let (code, v) = verify_in(&env, &tmp, &[&snap, "--check", "next", "--", "true"]);
    assert_eq!(code, 0, "the server serves on: {v}");
    assert_eq!(v["view"], "mount", "{v}");
    assert_eq!(checks(&env, &snap).len(), 1);
    assert!(server.stop().success());
}

/// Whether, within 10 seconds, no server of `env`'s store is left: its socket gone and no
/// `cairn serve --for-mounts` of it running.
fn no_server_left(env: &Env) -> bool {
    let socket = cairn_client::Client::socket_of(&env.store());
    let store = env.store();
    let serving = || {
        std::fs::read_dir("/proc").unwrap().any(|e| {
            let Some(pid) = e
                .ok()
                .and_then(|e| e.file_name().to_str()?.parse::<u32>().ok())
            else {
                return false;
            };
            let line = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = line.split(|&b| b == 0).collect();
            crate::support::alive(pid)
                && args.contains(&b"--for-mounts".as_slice())
                && args.contains(&store.as_str().as_bytes())
        })
    };
    let started = Instant::now();
    while socket.exists() || serving() {
        if started.elapsed() > Duration::from_secs(10) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

/// The command line with no server running starts one for its check, so that the view is
/// a mount; it stops once the check is done. A kill -9 of that command line while its
/// check runs leaves nothing: no check running, no mount, no view, nothing recorded, no
/// server. With FUSE turned off it checks out, and starts none.
#[test]
fn with_no_server_the_command_line_starts_one_for_a_mounted_view_that_then_stops() {
    let env = Env::new();
    let (_, snap) = project(&env, "p");
    let tmp = env.path().join("tmp");
    let (code, v) = verify_in(&env, &tmp, &[&snap, "--check", "first", "--", "true"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["view"], "mount", "{v}");
    assert!(
        no_server_left(&env),
        "the server started for the check stopped"
    );

    let seconds = unique_sleep();
    let mut client = env
        .command()
        .env("TMPDIR", tmp.as_str())
        .args(["--store", env.store().as_str(), "verify", &snap])
        .args(["--check", "slow", "--", "sleep", &seconds])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let view = the_view(&tmp);
    let pids = processes_of(&["sleep", &seconds]);
    assert_eq!(mounts_under(&tmp), vec![view.to_string()]);
    client.kill().unwrap();
    client.wait().unwrap();
    assert_eq!(
        still_running(&pids),
        Vec::<u32>::new(),
        "the check outlived its caller"
    );
    assert_eq!(
        left_after_cancel(&tmp),
        (Vec::new(), Vec::new()),
        "the view's mount and folder are gone"
    );
    assert!(
        no_server_left(&env),
        "the server started for the check stopped"
    );
    let recorded: Vec<_> = checks(&env, &snap)
        .iter()
        .map(|c| c["check"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(recorded, ["first"], "nothing more was recorded");

    let (code, v) = verify_in_with(
        &env,
        &tmp,
        NO_FUSE,
        &[&snap, "--check", "no-fuse", "--", "true"],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["view"], "checkout", "{v}");
    assert!(no_server_left(&env));
    let (code, v) = env.json(&["fsck"]);
    assert_eq!(code, 0, "{v}");
}

/// A running check reports its seconds as progress: a server streams `check NAME` events,
/// one item a second out of its timeout's, the last one done.
#[test]
fn a_long_check_streams_its_seconds_as_progress() {
    let env = Env::new();
    let (_, snap) = project(&env, "p");
    let server = Server::start(&env);
    let request = serde_json::json!({
        "snapshot": snap, "check": "slow", "command": ["sleep", "3"], "timeout": 60,
    });
    let mut events = Vec::new();
    let (status, v) = server
        .client()
        .post_json_streaming("/v1/verify", &request, |e| events.push(e.clone()))
        .unwrap();
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["passed"], true, "{v}");
    let check: Vec<_> = events.iter().filter(|e| e.what == "check slow").collect();
    let first = check
        .first()
        .unwrap_or_else(|| panic!("no check progress: {events:?}"));
    assert_eq!((first.files, first.total_files), (0, 60), "{events:?}");
    let last = check.last().unwrap();
    assert!(last.done && last.files >= 2, "{events:?}");
    assert!(server.stop().success());
}
