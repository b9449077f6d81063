//! `cairn serve`: commands give the same output through it, the HTTP API answers bad input
//! with 4xx and changes nothing, objects are verified, peers of another uid are refused,
//! and it stops cleanly.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cairn_client::{Client, Object, ObjectRef, WireObjectKind as ObjectKind};
use camino::Utf8PathBuf;

use crate::support::{Env, Server, stderr, stdout};

/// `cairn` with a store lock timeout of zero: a command that did not go through the server
/// would fail at once on the store the server holds.
pub(crate) fn cairn(env: &Env, args: &[&str]) -> std::process::Output {
    let mut cmd = env.command();
    cmd.env("CAIRN_LOCK_TIMEOUT", "0")
        .arg("--store")
        .arg(env.store().as_str())
        .args(args);
    cmd.output().unwrap()
}

/// Onboards a generated tree of `files` files in `dirs` directories, each line repeated
/// `lines` times; returns onboard's JSON.
fn onboard_many(env: &Env, files: usize, dirs: usize, lines: usize) -> serde_json::Value {
    let src = env.path().join("big");
    for i in 0..files {
        let p = src.join(format!("d{}/f{i}.txt", i % dirs));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("file {i}\n").repeat(lines)).unwrap();
    }
    let out = cairn(env, &["--json", "onboard", src.as_str()]);
    serde_json::from_slice(&out.stdout).unwrap()
}

fn setup(env: &Env) -> (Utf8PathBuf, String, String) {
    let wt = env.path().join("wt");
    std::fs::create_dir_all(wt.join("src")).unwrap();
    std::fs::write(wt.join("src/lib.rs"), "fn a() {}\n").unwrap();
    std::fs::write(wt.join("README"), "hello\n").unwrap();
    let out = cairn(
        env,
        &["--json", "checkpoint", wt.as_str(), "--name", "start"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let first: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    std::fs::write(wt.join("src/lib.rs"), "fn a() { changed }\n").unwrap();
    let out = cairn(env, &["--json", "snapshot", wt.as_str()]);
    let second: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    (
        wt,
        first["snapshot"].as_str().unwrap().to_owned(),
        second["snapshot"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn commands_print_the_same_through_the_server_and_change_the_store_there() {
    let env = Env::new();
    let (wt, a, b) = setup(&env);
    let questions: Vec<Vec<String>> = vec![
        vec!["log".into(), wt.to_string()],
        vec!["--json".into(), "log".into(), wt.to_string()],
        vec!["diff".into(), a.clone(), b.clone()],
        vec!["diff".into(), "--stat".into(), "start".into(), b.clone()],
        vec!["show".into(), format!("{b}:src/lib.rs")],
        vec!["status".into(), "--short".into(), wt.to_string()],
        vec!["--json".into(), "op".into(), "log".into(), wt.to_string()],
        vec!["--json".into(), "show".into(), "nope-not-a-snapshot".into()],
        vec!["checkout".into(), "ffffff".into(), "x".into()],
        vec!["--json".into(), "fsck".into()],
        // An error of each status the server gives: the CLI's answer is the same.
        vec![
            "--json".into(),
            "checkout".into(),
            b.clone(),
            wt.to_string(),
        ],
        vec!["checkout".into(), b.clone(), wt.to_string()],
        vec!["--json".into(), "status".into(), "/nonexistent/dir".into()],
        vec![
            "--json".into(),
            "push".into(),
            "--remote".into(),
            "nowhere".into(),
            b.clone(),
        ],
        vec![
            "rewind".into(),
            wt.to_string(),
            "--to".into(),
            "no-such-checkpoint".into(),
        ],
        vec![
            "--json".into(),
            "log".into(),
            wt.to_string(),
            "--max-count".into(),
            u64::MAX.to_string(),
        ],
        vec![
            "log".into(),
            wt.to_string(),
            "--max-count".into(),
            u64::MAX.to_string(),
        ],
    ];
    let ask = |q: &Vec<String>| {
        let args: Vec<&str> = q.iter().map(String::as_str).collect();
        let out = cairn(&env, &args);
        (out.status.code(), stdout(&out), stderr(&out))
    };
    let direct: Vec<_> = questions.iter().map(ask).collect();

    let server = Server::start(&env);
    let served: Vec<_> = questions.iter().map(ask).collect();
    for ((q, d), s) in questions.iter().zip(&direct).zip(&served) {
        assert_eq!(d, s, "`cairn {}` differs through the server", q.join(" "));
    }

    // Mutations through the server: results, refusals and exit codes as without it.
    std::fs::write(wt.join("new.txt"), "new\n").unwrap();
    let out = cairn(&env, &["--json", "snapshot", wt.as_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let snap: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(snap["added"], 1);
    std::fs::write(wt.join("new.txt"), "edited since\n").unwrap();
    let out = cairn(&env, &["--json", "undo", wt.as_str()]);
    assert_eq!(out.status.code(), Some(1));
    let refused: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(refused["refused"][0]["reason"], "hash mismatch");
    std::fs::write(wt.join("new.txt"), "new\n").unwrap();
    let out = cairn(&env, &["undo", wt.as_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!wt.join("new.txt").exists());
    let dest = env.path().join("verifier");
    let out = cairn(&env, &["--json", "checkout", &b, dest.as_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(dest.join("src/lib.rs")).unwrap(),
        "fn a() { changed }\n"
    );
    for _ in 0..3 {
        let _ = cairn(&env, &["undo", dest.as_str()]);
    }
    let out = cairn(&env, &["undo", dest.as_str()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "No edits have been applied to any file with this session.\n"
    );
    let out = cairn(&env, &["gc"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "gc through the server: {}",
        stderr(&out)
    );
    // Past CAIRN_STORE_BUDGET: the calling process says so once; the server's gc under
    // a budget answers with what is retained.
    let out = env
        .command()
        .env("CAIRN_LOCK_TIMEOUT", "0")
        .env("CAIRN_STORE_BUDGET", "1")
        .args([
            "--store",
            env.store().as_str(),
            "--json",
            "gc",
            "--max-size",
            "1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let budgeted: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        budgeted["retained"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["reason"] == "named checkpoint" && r["name"] == "start"),
        "{budgeted}"
    );
    let said = stderr(&out);
    assert_eq!(said.matches("CAIRN_STORE_BUDGET=1;").count(), 1, "{said}");
    assert!(said.contains("--max-size 1"), "{said}");

    // The same through the per-verb HTTP API.
    let client = server.client();
    let (status, v) = client
        .call(
            "gc",
            &serde_json::json!({ "dry_run": true, "keep_within": 30, "max_size": 1 }),
        )
        .unwrap();
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (v["dry_run"].as_bool(), v["ops_pruned"].as_u64()),
        (Some(true), Some(0)),
        "{v}"
    );
    let (status, v) = client
        .call("gc", &serde_json::json!({ "max_size": "1" }))
        .unwrap();
    assert_eq!(status, 400, "bytes are a number: {v}");
    let (status, v) = client
        .call("status", &serde_json::json!({ "worktree": wt.as_str() }))
        .unwrap();
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["stats"]["files"], 0);
    let (status, v) = client
        .call(
            "rewind",
            &serde_json::json!({ "dir": wt.as_str(), "to": "start" }),
        )
        .unwrap();
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        std::fs::read_to_string(wt.join("src/lib.rs")).unwrap(),
        "fn a() {}\n"
    );
    let (status, v) = client
        .call("undo", &serde_json::json!({ "worktree": dest.as_str() }))
        .unwrap();
    assert_eq!(status, 409, "a refusal is a conflict: {v}");
    assert_eq!(
        v["message"],
        "No edits have been applied to any file with this session."
    );
    let (status, v) = client
        .call(
            "checkout",
            &serde_json::json!({ "snapshot": "nope", "dest": "/tmp/x" }),
        )
        .unwrap();
    assert_eq!(status, 404, "an unknown snapshot is not found: {v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("nope"));
    let (status, _) = client.call("fsck", &serde_json::json!({})).unwrap();
    assert_eq!(status, 200);

    // A second server on the same store is refused, clearly.
    let out = cairn(&env, &["serve"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("held by another process"),
        "{}",
        stderr(&out)
    );

    let socket = server.socket.clone();
    assert!(server.stop().success(), "SIGTERM stops it cleanly");
    assert!(!socket.exists(), "the socket is removed");
    // Without a server, commands open the store themselves again.
    let out = cairn(&env, &["--json", "fsck"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// The command line was the transport: a path after `--` that is not UTF-8 could not be
/// sent to the server (exit 2), and `diff`'s note about paths nothing changed under was
/// printed on the server's stderr instead of the caller's. Requests carry path bytes and
/// outcomes carry the note, so both come out as without a server.
#[test]
fn paths_that_are_not_utf8_and_notes_come_out_the_same_through_the_server() {
    use std::os::unix::ffi::OsStrExt;
    let env = Env::new();
    let (_, a, b) = setup(&env);
    let ask = || {
        let mut cmd = env.command();
        cmd.env("CAIRN_LOCK_TIMEOUT", "0")
            .args(["--store", env.store().as_str(), "diff", &a, &b, "--"])
            .arg(std::ffi::OsStr::from_bytes(b"caf\xe9"))
            .arg("src");
        let out = cmd.output().unwrap();
        (out.status.code(), stdout(&out), stderr(&out))
    };
    let direct = ask();
    assert_eq!(direct.0, Some(0), "{direct:?}");
    assert!(
        direct.2.contains("no changes under \"caf\\351\""),
        "{direct:?}"
    );
    assert!(direct.1.contains("src/lib.rs"), "{direct:?}");
    let _server = Server::start(&env);
    assert_eq!(ask(), direct, "through the server");
}

#[test]
fn bad_requests_get_4xx_and_leave_the_store_unchanged() {
    let env = Env::new();
    let (_, _, b) = setup(&env);
    let server = Server::start(&env);
    let http = reqwest::blocking::Client::builder()
        .unix_socket(server.socket.as_std_path())
        .build()
        .unwrap();
    let post = |path: &str, body: Vec<u8>| {
        let r = http
            .post(format!("http://cairn{path}"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .unwrap();
        (r.status().as_u16(), r.text().unwrap())
    };
    let (status, body) = post("/v1/snapshot", b"{\"worktree\": ".to_vec());
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("invalid_json"), "{body}");
    let (status, _) = post("/v1/call", b"[1, 2".to_vec());
    assert_eq!(status, 400);
    let (status, body) = post(
        "/v1/snapshot",
        br#"{"worktree": "/w", "bogus": 1}"#.to_vec(),
    );
    assert_eq!(status, 400, "{body}");
    let (status, _) = post("/v1/no-such-verb", b"{}".to_vec());
    assert_eq!(status, 404);
    let oversize = vec![b' '; 65 << 20];
    let (status, _) = post("/v1/objects/put", oversize);
    assert_eq!(status, 413);

    let client = server.client();
    let blob = b"bytes sent by a remote agent\n".to_vec();
    let blob_id = blake3::hash(&blob).to_hex().to_string();
    let wrong = Object {
        kind: ObjectKind::Blob,
        id: blake3::hash(b"something else").to_hex().to_string(),
        data: blob.clone(),
    };
    let err = client.put_objects(&[wrong]).unwrap_err().to_string();
    assert!(
        err.contains("422") && err.contains("hash_mismatch"),
        "{err}"
    );
    let bad_tree = Object {
        kind: ObjectKind::Tree,
        id: blob_id.clone(),
        data: b"not a tree".to_vec(),
    };
    let err = client.put_objects(&[bad_tree]).unwrap_err().to_string();
    assert!(
        err.contains("422") && err.contains("invalid_object"),
        "{err}"
    );
    let blob_ref = ObjectRef {
        kind: ObjectKind::Blob,
        id: blob_id.clone(),
    };
    assert_eq!(
        client
            .find_missing(std::slice::from_ref(&blob_ref))
            .unwrap(),
        vec![blob_ref.clone()],
        "nothing was stored"
    );

    // A snapshot the store has: its tree and a blob come back, verified by the client too.
    let (status, snap) = client
        .call("show", &serde_json::json!({ "object": b }))
        .unwrap();
    assert_eq!(status, 200, "{snap}");
    let snap_ref = ObjectRef {
        kind: ObjectKind::Snapshot,
        id: b.clone(),
    };
    let (found, missing) = client
        .get_objects(&[snap_ref.clone(), blob_ref.clone()])
        .unwrap();
    assert_eq!(missing, vec![blob_ref.clone()]);
    assert_eq!(found.len(), 1);
    // Round trip: the store takes back what it gave (nothing new), and a new blob.
    assert_eq!(client.put_objects(&found).unwrap(), 0);
    let good = Object {
        kind: ObjectKind::Blob,
        id: blob_id,
        data: blob,
    };
    assert_eq!(client.put_objects(&[good]).unwrap(), 1);
    assert!(
        client
            .find_missing(&[blob_ref, snap_ref])
            .unwrap()
            .is_empty()
    );
    let (status, fsck) = client.call("fsck", &serde_json::json!({})).unwrap();
    assert_eq!(status, 200, "{fsck}");
}

/// Requests schemathesis generated from `docs/openapi.yaml` that the server answered with a
/// 5xx or with what the file does not say: each now gets its documented answer.
#[test]
fn requests_the_contract_fuzzer_found_get_their_documented_answers() {
    let env = Env::new();
    let (wt, _, _) = setup(&env);
    let server = Server::start(&env);
    let client = server.client();
    let cwd = env.path();
    let call = |verb: &str, args: serde_json::Value| client.call(verb, &args).unwrap();
    let code = |v: &serde_json::Value| v["error"]["code"].as_str().unwrap_or_default().to_owned();

    // A NUL byte is bad input (no command line can hold one), not an I/O failure: a
    // well-formed request the command cannot carry out.
    let (status, v) = call(
        "checkout",
        serde_json::json!({ "snapshot": "start", "dest": "x\u{0}", "cwd": cwd }),
    );
    assert_eq!((status, code(&v)), (422, "invalid_input".into()), "{v}");
    let (status, v) = call(
        "status",
        serde_json::json!({ "worktree": "a\u{0}b", "cwd": cwd }),
    );
    assert_eq!((status, code(&v)), (422, "invalid_input".into()), "{v}");
    let (_, out) = client
        .post_json(
            "/v1/call",
            &serde_json::json!({
                "cwd": wt,
                "request": { "verb": "status", "args": { "worktree": "\u{0}" } },
            }),
        )
        .unwrap();
    assert_eq!(out["error"]["exit"], 2, "{out:?}");

    // A registered worktree whose directory is gone: 422 naming it, not 500.
    let gone = env.path().join("gone");
    std::fs::create_dir(&gone).unwrap();
    std::fs::write(gone.join("f"), "x\n").unwrap();
    let (status, v) = call("checkpoint", serde_json::json!({ "dir": gone }));
    assert_eq!(status, 200, "{v}");
    std::fs::remove_dir_all(&gone).unwrap();
    for verb in ["snapshot", "status"] {
        let (status, v) = call(verb, serde_json::json!({ "worktree": gone }));
        assert_eq!(
            (status, code(&v)),
            (422, "invalid_path".into()),
            "{verb}: {v}"
        );
    }

    // Arguments are checked as the file types them.
    for bad in [
        serde_json::json!({ "target": wt, "max_count": 0 }),
        serde_json::json!({ "target": wt, "max_count": -1 }),
        serde_json::json!({ "target": wt, "max_count": "3" }),
    ] {
        let (status, v) = call("log", bad.clone());
        assert_eq!(
            (status, code(&v)),
            (400, "invalid_arguments".into()),
            "{bad}: {v}"
        );
    }
    let (status, v) = call(
        "snapshot",
        serde_json::json!({ "worktree": wt, "message": 7 }),
    );
    assert_eq!((status, code(&v)), (400, "invalid_arguments".into()), "{v}");
    // A count past its limit is refused naming it (one past u64 was taken as "all"); a
    // message may start with '-'.
    let (status, v) = call(
        "log",
        serde_json::json!({ "target": wt, "max_count": 1e30 }),
    );
    assert_eq!((status, code(&v)), (400, "invalid_arguments".into()), "{v}");
    let (status, v) = call(
        "log",
        serde_json::json!({ "target": wt, "max_count": u64::MAX }),
    );
    assert_eq!((status, code(&v)), (422, "too_large".into()), "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_count"),
        "{v}"
    );
    std::fs::write(wt.join("README"), "changed again\n").unwrap();
    let (status, v) = call(
        "snapshot",
        serde_json::json!({ "worktree": wt, "message": "-m looks like a flag" }),
    );
    assert_eq!(status, 200, "{v}");
    let (_, log) = call("log", serde_json::json!({ "target": wt, "max_count": 1 }));
    assert_eq!(
        log["snapshots"][0]["message"], "-m looks like a flag",
        "{log}"
    );
}

/// A verb whose directory defaults to the caller's: with no `cwd` and no directory, the
/// request is refused, never run on `/` (a `checkpoint {}` once onboarded the whole file
/// system until the server ran out of memory).
#[test]
fn a_verb_without_a_directory_is_refused_not_run_on_the_root() {
    let env = Env::new();
    let (wt, _, _) = setup(&env);
    let server = Server::start(&env);
    let client = server.client();
    let before = cairn(&env, &["--json", "worktree", "list"]);
    for verb in [
        "checkpoint",
        "status",
        "undo",
        "redo",
        "rewind",
        "review",
        "log",
    ] {
        let (status, v) = client.call(verb, &serde_json::json!({})).unwrap();
        assert_eq!(status, 400, "{verb}: {v}");
        assert_eq!(v["error"]["code"], "missing_argument", "{verb}: {v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains("cwd"),
            "{verb}: {v}"
        );
    }
    // With the directory, or a cwd to take it from, the same verbs run.
    let (status, v) = client
        .call("status", &serde_json::json!({ "worktree": wt }))
        .unwrap();
    assert_eq!(status, 200, "{v}");
    let (status, v) = client
        .call("status", &serde_json::json!({ "cwd": wt }))
        .unwrap();
    assert_eq!(status, 200, "{v}");
    let after = cairn(&env, &["--json", "worktree", "list"]);
    assert_eq!(before.stdout, after.stdout, "no worktree was registered");
}

#[test]
fn peers_of_another_uid_are_refused() {
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .unwrap()
        .stdout
        .starts_with(b"0\n");
    if !is_root {
        eprintln!("skipped: needs root to connect as another uid");
        return;
    }
    let env = Env::new();
    let _ = setup(&env);
    let server = Server::start(&env);
    // Even with the socket file open to everyone, the peer check refuses other users.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&server.socket, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::set_permissions(env.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(env.store(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "curl"])
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--unix-socket",
        ])
        .arg(server.socket.as_str())
        .arg("http://cairn/v1/health")
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "000", "no HTTP answer for uid 65534");
    // Our own uid gets one.
    assert!(Client::connect(&server.socket).is_ok());
}

#[test]
fn run_does_its_store_work_through_the_server() {
    let env = Env::new();
    let w = env.path().join("w");
    std::fs::create_dir_all(&w).unwrap();
    std::fs::write(w.join("a.txt"), "before\n").unwrap();
    std::fs::write(w.join(".env"), "TOKEN=mine\n").unwrap();
    let out = cairn(&env, &["onboard", w.as_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let _server = Server::start(&env);
    let out = cairn(
        &env,
        &[
            "--json",
            "run",
            w.as_str(),
            "--",
            "sh",
            "-c",
            "echo after > a.txt; echo TOKEN=stolen > .env",
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} {}", stdout(&out), stderr(&out)));
    assert_eq!(out.status.code(), Some(1), "{v}");
    assert_eq!(v["violations"][0]["path"], ".env", "{v}");
    assert_eq!(
        std::fs::read_to_string(w.join(".env")).unwrap(),
        "TOKEN=mine\n"
    );
    let snap = v["snapshot"].as_str().unwrap();
    let shown = cairn(&env, &["show", &format!("{snap}:a.txt")]);
    assert_eq!(shown.stdout, b"after\n");
}

/// The grants a run applies and the next-run grant it spends go through the server too
/// (the store is the server's: a command that opened it itself would fail at once).
#[test]
fn run_applies_and_spends_grants_through_the_server() {
    let env = Env::new();
    let w = env.path().join("w");
    let out_dir = env.path().join("out");
    std::fs::create_dir_all(&w).unwrap();
    std::fs::create_dir_all(&out_dir).unwrap();
    let out_dir = std::fs::canonicalize(&out_dir).unwrap();
    let out_dir = out_dir.to_str().unwrap();
    assert!(cairn(&env, &["onboard", w.as_str()]).status.success());
    let _server = Server::start(&env);
    let allowed = cairn(
        &env,
        &[
            "policy",
            "allow",
            w.as_str(),
            "--write",
            out_dir,
            "--once",
            "--yes",
        ],
    );
    assert!(allowed.status.success(), "{}", stderr(&allowed));
    let script = format!("echo once >> {out_dir}/f");
    let run = |env: &Env| {
        cairn(
            env,
            &["--json", "run", w.as_str(), "--", "sh", "-c", &script],
        )
    };
    let first = run(&env);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let second = run(&env);
    assert_ne!(second.status.code(), Some(0), "the grant was spent");
    assert_eq!(
        std::fs::read_to_string(format!("{out_dir}/f")).unwrap(),
        "once\n"
    );
    let log = cairn(&env, &["op", "log", w.as_str()]);
    assert!(stdout(&log).contains("policy_spent"), "{}", stdout(&log));
}

#[test]
fn long_commands_stream_progress_as_ndjson() {
    let env = Env::new();
    let snap = onboard_many(&env, 600, 20, 50);
    let server = Server::start(&env);
    let dest = env.path().join("co");
    let request = serde_json::json!({
        "snapshot": snap["snapshot"],
        "dest": dest,
        "cwd": env.path(),
    });
    let mut events = Vec::new();
    let (status, v) = server
        .client()
        .post_json_streaming("/v1/checkout", &request, |e| events.push(e.clone()))
        .unwrap();
    assert_eq!(status, 200, "{v}");
    let first = events.first().expect("progress before the output");
    assert_eq!((first.what.as_str(), first.total_files), ("checkout", 600));
    let last = events.last().unwrap();
    assert!(last.done && last.files == 600, "{last:?}");
    assert_eq!(v["files"], 600);
}

#[test]
fn a_socket_elsewhere_is_found_through_the_store_folder() {
    let env = Env::new();
    let (wt, _, _) = setup(&env);
    let socket = env.path().join("elsewhere.sock");
    let mut child = env
        .command()
        .arg("--store")
        .arg(env.store().as_str())
        .args(["serve", "--socket", socket.as_str()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while Client::connect(&Client::socket_of(&env.store())).is_err() {
        assert!(started.elapsed() < Duration::from_secs(20), "no server");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(socket.exists());
    // The store is held by the server, and the lock timeout is zero: this went through it.
    let out = cairn(&env, &["--json", "status", wt.as_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let pid = child.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(child.wait().unwrap().success());
    assert!(!socket.exists() && !Client::socket_of(&env.store()).exists());
}

#[test]
fn requests_use_the_callers_terminal_settings_and_never_prompt_on_the_server() {
    let env = Env::new();
    let (wt, a, b) = setup(&env);
    let server = Server::start(&env);
    let client = server.client();
    // The server answers with the typed outcome; colour is drawn by the caller.
    let (status, reply) = client
        .post_json(
            "/v1/call",
            &serde_json::json!({
                "cwd": env.path(),
                "request": { "verb": "diff", "args": { "a": a, "b": b, "detail": "contents" } },
            }),
        )
        .unwrap();
    assert_eq!(status, 200, "{reply}");
    assert!(
        !reply.to_string().contains('\u{1b}'),
        "no colour from the server"
    );
    assert_eq!(reply["outcome"]["outcome"]["stats"]["files"], 1, "{reply}");
    // Through the server (CAIRN_LOCK_TIMEOUT=0: the store is the server's), a terminal
    // still gets colour and a pipe none.
    let diff_on = |tty: bool| {
        let line = format!(
            "{} --store {} diff {a} {b}",
            env!("CARGO_BIN_EXE_cairn"),
            env.store()
        );
        let mut cmd = if tty {
            let mut c = std::process::Command::new("script");
            c.args(["-qec", &line, "/dev/null"]);
            c
        } else {
            let mut c = std::process::Command::new("sh");
            c.args(["-c", &line]);
            c
        };
        let out = cmd
            .env("CAIRN_LOCK_TIMEOUT", "0")
            .env_remove("NO_COLOR")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        out.stdout
    };
    let coloured = String::from_utf8_lossy(&diff_on(true)).into_owned();
    assert!(
        coloured.contains("\x1b[32m+fn a() { changed }"),
        "{coloured:?}"
    );
    assert!(!diff_on(false).contains(&0x1b), "none when piped");

    let (status, reply) = client
        .post_json(
            "/v1/call",
            &serde_json::json!({
                "cwd": env.path(),
                "request": { "verb": "discard", "args": { "dir": wt } },
            }),
        )
        .unwrap();
    assert_eq!(status, 409, "{reply}");
    assert_eq!(reply["error"]["code"], "confirmation_needed", "{reply}");
    assert_eq!(reply["error"]["exit"], 2, "{reply}");

    // The same store reached through a symlink is the server's store.
    let link = env.path().join("store-link");
    std::os::unix::fs::symlink(env.store(), &link).unwrap();
    let mut cmd = env.command();
    cmd.env("CAIRN_LOCK_TIMEOUT", "0").args([
        "--store",
        link.as_str(),
        "--json",
        "status",
        wt.as_str(),
    ]);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn a_long_checkout_does_not_hold_up_a_snapshot_of_another_worktree() {
    let env = Env::new();
    let (wt, _, _) = setup(&env);
    let snap = onboard_many(&env, 4000, 40, 200);
    let server = Server::start(&env);
    let request = serde_json::json!({
        "snapshot": snap["snapshot"],
        "dest": env.path().join("co"),
        "cwd": env.path(),
    });
    std::fs::write(wt.join("during.txt"), "written while the checkout runs\n").unwrap();
    let mut side = None;
    let client = server.client();
    let (status, out) = client
        .post_json_streaming("/v1/checkout", &request, |_| {
            if side.is_none() {
                let (store, wt) = (env.store(), wt.clone());
                let mut cmd = env.command();
                side = Some(std::thread::spawn(move || {
                    cmd.env("CAIRN_LOCK_TIMEOUT", "0").args([
                        "--store",
                        store.as_str(),
                        "--json",
                        "snapshot",
                        wt.as_str(),
                    ]);
                    let out = cmd.output().unwrap();
                    (Instant::now(), out)
                }));
            }
        })
        .unwrap();
    let checkout_done = Instant::now();
    assert_eq!(status, 200, "{out}");
    let (when, snap_out) = side
        .expect("the snapshot ran during the checkout")
        .join()
        .unwrap();
    assert_eq!(snap_out.status.code(), Some(0), "{}", stderr(&snap_out));
    assert!(
        when < checkout_done,
        "the snapshot of another worktree finished {:?} after the checkout",
        when - checkout_done
    );
}

/// A Rust program drives the server with typed requests and gets typed outcomes, the same
/// as an engine in its own process would give, errors included.
#[test]
fn the_rust_client_calls_the_servers_engine_with_typed_requests() {
    use cairn_engine::{Outcome, Request, SnapshotOptions, StatusOptions};

    let env = Env::new();
    let (wt, _, second) = setup(&env);
    let server = Server::start(&env);
    let client = server.client();

    std::fs::write(wt.join("README"), "hello, typed\n").unwrap();
    let status = client
        .run(&wt, Request::Status(StatusOptions::default()), None)
        .unwrap()
        .unwrap();
    let Outcome::Status(status) = status.0 else {
        panic!("a status outcome: {status:?}");
    };
    assert_eq!(status.changes.modified.len(), 1, "{status:?}");

    let mut events = Vec::new();
    let mut on_progress = |e: &cairn_client::ProgressEvent| events.push(e.what.clone());
    let (outcome, exit) = client
        .run(
            env.path(),
            Request::Snapshot(SnapshotOptions::new(wt.clone()).message("typed")),
            Some(&mut on_progress),
        )
        .unwrap()
        .unwrap();
    assert_eq!(exit, 0);
    let Outcome::Snapshot(snap) = outcome else {
        panic!("a snapshot outcome: {outcome:?}");
    };
    assert!(snap.changed);
    assert_eq!(snap.parent.map(|p| p.to_hex()), Some(second));
    assert_eq!(snap.modified, 1);
    let log = cairn(&env, &["--json", "log", "-n", "1", wt.as_str()]);
    let log: serde_json::Value = serde_json::from_slice(&log.stdout).unwrap();
    assert_eq!(log["snapshots"][0]["id"], snap.snapshot.to_hex());
    assert_eq!(log["snapshots"][0]["message"], "typed");

    // The engine's own error comes back typed, with its code and exit status.
    let err = client
        .run(
            env.path(),
            Request::Snapshot(SnapshotOptions::new(env.path().join("nowhere"))),
            None,
        )
        .unwrap()
        .unwrap_err();
    assert_eq!(err.exit(), 2, "{err}");
    assert!(err.to_string().contains("nowhere"), "{err}");
    drop(events);
    assert!(server.stop().success());
}

#[test]
fn a_push_streams_its_progress_in_objects_and_bytes() {
    let env = Env::new();
    let snap = onboard_many(&env, 300, 10, 40);
    let remote = format!("file://{}", env.path().join("remote"));
    let added = cairn(&env, &["remote", "add", "origin", &remote]);
    assert!(added.status.success(), "{}", stderr(&added));
    let server = Server::start(&env);
    let mut events = Vec::new();
    let request = serde_json::json!({ "snapshots": [snap["snapshot"]], "cwd": env.path() });
    let (status, v) = server
        .client()
        .post_json_streaming("/v1/push", &request, |e| events.push(e.clone()))
        .unwrap();
    assert_eq!(status, 200, "{v}");
    let first = events.first().expect("progress before the output");
    assert_eq!(first.what, "push");
    assert!(
        first.total_files >= 300,
        "every file's blob, the trees, the snapshot: {first:?}"
    );
    let last = events.last().unwrap();
    assert!(last.done && last.files == first.total_files, "{last:?}");
    assert!(last.bytes > 0 && last.bytes == last.total_bytes, "{last:?}");
    assert_eq!(v["objects_sent"].as_u64(), Some(first.total_files), "{v}");
}
