//! `cairn run` under real Landlock.

use crate::support::{Env, pids_in, stderr, stdout, still_running};

fn setup(env: &Env) -> camino::Utf8PathBuf {
    let w = env.path().join("w");
    std::fs::create_dir_all(&w).unwrap();
    std::fs::write(w.join("a.txt"), "before\n").unwrap();
    std::fs::write(w.join(".env"), "TOKEN=mine\n").unwrap();
    std::fs::write(w.join("old.key"), "KEY\n").unwrap();
    std::fs::write(env.path().join("outside.txt"), "canary\n").unwrap();
    assert_eq!(env.json(&["onboard", w.as_str()]).0, 0);
    w
}

fn run(env: &Env, args: &[&str]) -> (i32, serde_json::Value) {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    env.json(&all)
}

#[test]
fn writes_outside_the_worktree_fail_and_change_nothing() {
    let env = Env::new();
    let w = setup(&env);
    let outside = env.path().join("outside.txt");
    let script = format!("echo inside > a.txt && echo pwned > {outside}");
    let (code, v) = run(&env, &[w.as_str(), "--", "sh", "-c", &script]);
    assert_ne!(code, 0, "{v}");
    assert_eq!(
        v["exit_code"], code,
        "cairn exits with the command's status: {v}"
    );
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "canary\n");
    assert_eq!(
        std::fs::read_to_string(w.join("a.txt")).unwrap(),
        "inside\n"
    );
    // What it did inside was snapshotted.
    let snap = v["snapshot"].as_str().unwrap();
    let shown = env.cairn(&["show", &format!("{snap}:a.txt")]);
    assert_eq!(shown.stdout, b"inside\n");
}

#[test]
fn secrets_the_command_touches_are_put_back_and_reported() {
    let env = Env::new();
    let w = setup(&env);
    let (code, v) = run(
        &env,
        &[
            w.as_str(),
            "--",
            "sh",
            "-c",
            "echo TOKEN=stolen > .env; echo new > made.pem; rm old.key; env",
        ],
    );
    assert_eq!(code, 1, "{v}");
    let mut got: Vec<(String, String)> = v["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["path"].as_str().unwrap().to_owned(),
                x["change"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            (".env".into(), "modified".into()),
            ("made.pem".into(), "created".into()),
            ("old.key".into(), "deleted".into())
        ]
    );
    assert_eq!(
        std::fs::read_to_string(w.join(".env")).unwrap(),
        "TOKEN=mine\n"
    );
    assert!(!w.join("made.pem").exists());
    assert_eq!(std::fs::read_to_string(w.join("old.key")).unwrap(), "KEY\n");
    assert!(v["message"].as_str().unwrap().contains("denied"));
}

#[test]
fn the_environment_says_it_is_sandboxed_and_read_only_means_read_only() {
    let env = Env::new();
    let w = setup(&env);
    let out = env.cairn(&[
        "run",
        w.as_str(),
        "--",
        "sh",
        "-c",
        "echo \"$CAIRN_SANDBOX $CAIRN_SANDBOX_NETWORK_DISABLED\"",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "workspace-write 1\n",
        "{}",
        stderr(&out)
    );
    let (code, _) = run(
        &env,
        &[
            w.as_str(),
            "--read-only",
            "--",
            "sh",
            "-c",
            "echo x > a.txt",
        ],
    );
    assert_ne!(code, 0);
    assert_eq!(
        std::fs::read_to_string(w.join("a.txt")).unwrap(),
        "before\n"
    );
    let (code, v) = run(
        &env,
        &[
            w.as_str(),
            "--read-only",
            "--",
            "sh",
            "-c",
            "echo scratch > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"",
        ],
    );
    assert_eq!(code, 0, "the private temp dir is writable: {v}");
    let extra = env.path().join("extra");
    std::fs::create_dir_all(&extra).unwrap();
    let script = format!("echo allowed > {extra}/f");
    let (code, v) = run(
        &env,
        &[
            w.as_str(),
            "--allow-write",
            extra.as_str(),
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        std::fs::read_to_string(extra.join("f")).unwrap(),
        "allowed\n"
    );
}

#[test]
fn loopback_connections_need_network() {
    let env = Env::new();
    let w = setup(&env);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accept = std::thread::spawn(move || {
        // Accept whatever arrives; the test ends after the second run.
        listener.set_nonblocking(false).unwrap();
        let _ = listener.accept();
    });
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port}");
    let (code, _) = run(&env, &[w.as_str(), "--", "bash", "-c", &connect]);
    assert_ne!(code, 0, "no network without --network");
    let (code, v) = run(
        &env,
        &[w.as_str(), "--network", "--", "bash", "-c", &connect],
    );
    assert_eq!(code, 0, "{v}");
    accept.join().unwrap();
}

#[test]
fn git_stays_read_only_while_the_worktree_is_writable() {
    let env = Env::new();
    let w = setup(&env);
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(w.as_str())
            .args(args)
            .output()
            .unwrap()
    };
    assert!(git(&["init", "-q"]).status.success());
    let head = std::fs::read(w.join(".git/HEAD")).unwrap();
    let (code, v) = run(
        &env,
        &[
            w.as_str(),
            "--",
            "sh",
            "-c",
            "echo evil > .git/HEAD; echo $? > status; echo new > brand-new.txt",
        ],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        std::fs::read(w.join(".git/HEAD")).unwrap(),
        head,
        ".git is read-only"
    );
    assert_ne!(
        std::fs::read_to_string(w.join("status")).unwrap().trim(),
        "0",
        "the write to .git failed"
    );
    assert_eq!(
        std::fs::read_to_string(w.join("brand-new.txt")).unwrap(),
        "new\n",
        "new files anywhere else are fine"
    );
}

/// The put-back runs unconfined after the command: a symlink the command planted where a
/// secret's directory was must not lead it outside the worktree.
#[test]
fn the_put_back_never_follows_a_planted_symlink() {
    let env = Env::new();
    let w = env.path().join("wt");
    let out = env.path().join("out");
    std::fs::create_dir_all(w.join("config")).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(w.join("config/.env"), "S=1\n").unwrap();
    std::fs::write(w.join(".env"), "T=1\n").unwrap();
    std::fs::write(out.join("canary"), "c\n").unwrap();
    assert_eq!(env.json(&["onboard", w.as_str()]).0, 0);
    let script = format!(
        "rm -rf config && ln -s {out} config && rm .env && ln -s {out}/canary .env",
        out = out
    );
    let (code, v) = run(&env, &[w.as_str(), "--", "sh", "-c", &script]);
    assert_eq!(code, 1, "{v}");
    // Nothing outside was written or changed.
    let names: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["canary"], "{v}");
    assert_eq!(std::fs::read_to_string(out.join("canary")).unwrap(), "c\n");
    // The secret beside the root is back as a file; the one behind the link is kept aside.
    assert_eq!(std::fs::read_to_string(w.join(".env")).unwrap(), "T=1\n");
    let violations = v["violations"].as_array().unwrap();
    let blocked = violations
        .iter()
        .find(|x| x["path"] == "config/.env")
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(blocked["change"], "deleted");
    let kept = blocked["kept"].as_str().unwrap_or_else(|| panic!("{v}"));
    assert_eq!(std::fs::read_to_string(kept).unwrap(), "S=1\n");
    assert!(v["message"].as_str().unwrap().contains(kept), "{v}");
    std::fs::remove_dir_all(std::path::Path::new(kept).parent().unwrap()).unwrap();
}

/// A directory outside the worktree, canonical (as a grant must be).
fn outside_dir(env: &Env, name: &str) -> String {
    let dir = env.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::canonicalize(&dir)
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned()
}

fn policy(env: &Env, args: &[&str]) -> (i32, serde_json::Value) {
    let mut all = vec!["policy"];
    all.extend_from_slice(args);
    env.json(&all)
}

#[test]
fn a_granted_path_stays_writable_for_every_run_until_revoked() {
    let env = Env::new();
    let w = setup(&env);
    let out = outside_dir(&env, "out");
    let script = format!("echo made > {out}/f");
    let write_out = [w.as_str(), "--", "sh", "-c", script.as_str()];
    let (code, v) = run(&env, &write_out);
    assert_ne!(code, 0, "denied before the grant: {v}");
    assert!(!std::path::Path::new(&out).join("f").exists());

    let (code, v) = policy(&env, &["allow", w.as_str(), "--write", &out, "--yes"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["policy"]["writable"][0], out.as_str(), "{v}");
    for _ in 0..2 {
        let (code, v) = run(&env, &write_out);
        assert_eq!(code, 0, "the grant is remembered: {v}");
        assert_eq!(
            std::fs::read_to_string(format!("{out}/f")).unwrap(),
            "made\n"
        );
        let roots = v["policy"]["writable_roots"].as_array().unwrap();
        assert!(roots.iter().any(|r| r == out.as_str()), "{v}");
        std::fs::remove_file(format!("{out}/f")).unwrap();
    }

    let (code, v) = policy(&env, &["revoke", w.as_str(), "--write", &out]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["policy"]["writable"], serde_json::json!([]), "{v}");
    let (code, v) = run(&env, &write_out);
    assert_ne!(code, 0, "denied again after the revoke: {v}");
    assert!(!std::path::Path::new(&out).join("f").exists());

    // The op log says who granted what, and when.
    let (_, log) = env.json(&["op", "log", w.as_str()]);
    let ops = log["ops"].as_array().unwrap();
    let allow = ops.iter().find(|o| o["op"] == "policy_allow").unwrap();
    assert_eq!(allow["detail"], format!("--write {out}"), "{log}");
    assert!(
        allow["by"].is_string() && allow["time"].is_string(),
        "{log}"
    );
    assert!(ops.iter().any(|o| o["op"] == "policy_revoke"), "{log}");
    let human = stdout(&env.cairn(&["op", "log", w.as_str()]));
    assert!(
        human.contains(&format!("policy_allow - -> - --write {out} (by ")),
        "{human}"
    );
}

#[test]
fn a_once_grant_serves_the_next_run_only() {
    let env = Env::new();
    let w = setup(&env);
    let out = outside_dir(&env, "out");
    let script = format!("echo once >> {out}/f");
    let write_out = [w.as_str(), "--", "sh", "-c", script.as_str()];
    let (code, v) = policy(
        &env,
        &["allow", w.as_str(), "--write", &out, "--once", "--yes"],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["policy"]["once"]["writable"][0], out.as_str(), "{v}");
    assert_eq!(v["policy"]["writable"], serde_json::json!([]), "{v}");
    let (code, v) = run(&env, &write_out);
    assert_eq!(code, 0, "{v}");
    let (_, v) = policy(&env, &[w.as_str()]);
    assert_eq!(
        v["policy"]["once"]["writable"],
        serde_json::json!([]),
        "spent: {v}"
    );
    let (code, v) = run(&env, &write_out);
    assert_ne!(code, 0, "the second run is denied: {v}");
    assert_eq!(
        std::fs::read_to_string(format!("{out}/f")).unwrap(),
        "once\n"
    );
    let (_, log) = env.json(&["op", "log", w.as_str()]);
    let spent = log["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["op"] == "policy_spent")
        .unwrap_or_else(|| panic!("{log}"));
    assert_eq!(spent["detail"], format!("--write {out} --once"), "{log}");
}

#[test]
fn a_network_grant_lets_the_command_connect() {
    let env = Env::new();
    let w = setup(&env);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accept = std::thread::spawn(move || {
        let _ = listener.accept();
    });
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port}");
    let args = [w.as_str(), "--", "bash", "-c", connect.as_str()];
    let (code, _) = run(&env, &args);
    assert_ne!(code, 0, "no network without a grant");
    let (code, v) = policy(&env, &["allow", w.as_str(), "--network", "--yes"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["policy"]["network"], true, "{v}");
    let (code, v) = run(&env, &args);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["policy"]["network"], true, "{v}");
    accept.join().unwrap();
}

#[test]
fn two_worktrees_in_one_run_are_both_writable_snapshotted_and_their_secrets_put_back() {
    let env = Env::new();
    let w = setup(&env);
    let w2 = env.path().join("w2");
    std::fs::create_dir_all(&w2).unwrap();
    std::fs::write(w2.join("b.txt"), "b\n").unwrap();
    std::fs::write(w2.join(".env"), "SECOND=mine\n").unwrap();
    assert_eq!(env.json(&["onboard", w2.as_str()]).0, 0);
    let script = format!(
        "echo one > a.txt && echo two > {w2}/b.txt && echo stolen > .env && echo stolen > {w2}/.env"
    );
    let (code, v) = run(
        &env,
        &[w.as_str(), "--also", w2.as_str(), "--", "sh", "-c", &script],
    );
    assert_eq!(code, 1, "both writable, secrets touched: {v}");
    assert_eq!(std::fs::read_to_string(w.join("a.txt")).unwrap(), "one\n");
    assert_eq!(std::fs::read_to_string(w2.join("b.txt")).unwrap(), "two\n");
    assert_eq!(
        std::fs::read_to_string(w.join(".env")).unwrap(),
        "TOKEN=mine\n"
    );
    assert_eq!(
        std::fs::read_to_string(w2.join(".env")).unwrap(),
        "SECOND=mine\n"
    );
    let mut got: Vec<(String, String)> = v["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["worktree"].as_str().unwrap().to_owned(),
                x["path"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    got.sort();
    let mut want = vec![
        (w.to_string(), ".env".to_owned()),
        (w2.to_string(), ".env".to_owned()),
    ];
    want.sort();
    assert_eq!(got, want, "{v}");
    let snapshots = v["snapshots"].as_array().unwrap();
    assert_eq!(snapshots.len(), 2, "{v}");
    assert_eq!(snapshots[0]["worktree"], w.as_str());
    assert_eq!(snapshots[0]["snapshot"], v["snapshot"]);
    assert_eq!(snapshots[1]["worktree"], w2.as_str());
    let second = snapshots[1]["snapshot"].as_str().unwrap();
    let shown = env.cairn(&["show", &format!("{second}:b.txt")]);
    assert_eq!(
        shown.stdout, b"two\n",
        "the second worktree was snapshotted"
    );
    let first = v["snapshot"].as_str().unwrap();
    let shown = env.cairn(&["show", &format!("{first}:a.txt")]);
    assert_eq!(shown.stdout, b"one\n");
}

/// Turns the kernel's audit subsystem on for a test and back to what it was after.
struct AuditOn {
    was: bool,
}

impl AuditOn {
    fn new() -> AuditOn {
        let was = sandbox::audit::audit_enabled().expect("reading the audit status (root)");
        sandbox::audit::set_audit_enabled(true).expect("turning audit on (root)");
        AuditOn { was }
    }
}

impl Drop for AuditOn {
    fn drop(&mut self) {
        let _ = sandbox::audit::set_audit_enabled(self.was);
    }
}

#[test]
fn denied_lists_what_the_kernel_refused_and_says_why_when_it_cannot() {
    let env = Env::new();
    let w = setup(&env);
    let out = outside_dir(&env, "out");
    let canary = env.path().join("outside.txt");
    let canary = std::fs::canonicalize(canary).unwrap();
    let script = format!(
        "echo x > {out}/new; echo x > {}; echo fine > a.txt",
        canary.display()
    );
    let args = [w.as_str(), "--", "sh", "-c", script.as_str()];
    {
        let _audit = AuditOn::new();
        let (code, v) = run(&env, &args);
        assert_eq!(code, 0, "{v}");
        assert!(v.get("denied_unavailable").is_none(), "{v}");
        let denied: Vec<(String, String)> = v["denied"]
            .as_array()
            .unwrap_or_else(|| panic!("{v}"))
            .iter()
            .map(|d| {
                (
                    d["path"].as_str().unwrap().to_owned(),
                    d["access"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        // A denied create names the directory; a denied write, the file.
        assert!(
            denied.contains(&(out.clone(), "fs.make_reg".to_owned())),
            "{v}"
        );
        assert!(
            denied.contains(&(
                canary.to_str().unwrap().to_owned(),
                "fs.write_file".to_owned()
            )),
            "{v}"
        );
        assert_eq!(denied.len(), 2, "nothing the command was allowed: {v}");
        // The agent asks for exactly that grant, and the same command is then allowed.
        let (code, v) = policy(&env, &["allow", w.as_str(), "--write", &out, "--yes"]);
        assert_eq!(code, 0, "{v}");
        let script = format!("echo x > {out}/new");
        let (code, v) = run(&env, &[w.as_str(), "--", "sh", "-c", &script]);
        assert_eq!(code, 0, "{v}");
        assert_eq!(v["denied"], serde_json::json!([]), "{v}");
    }
    if !sandbox::audit::audit_enabled().unwrap() {
        let (_, v) = run(&env, &args);
        assert!(v.get("denied").is_none(), "{v}");
        let why = v["denied_unavailable"]
            .as_str()
            .unwrap_or_else(|| panic!("{v}"));
        assert!(why.contains("audit_enabled=0"), "{v}");
    }
}

#[test]
fn the_command_cannot_reach_the_store_or_a_server_of_any_store() {
    let env = Env::new();
    let w = setup(&env);
    let out = outside_dir(&env, "out");
    // A second store with a worktree and a server of its own.
    let other_store = env.path().join("other-store");
    let other = env.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let onboard = env
        .command()
        .args(["--store", other_store.as_str(), "onboard", other.as_str()])
        .output()
        .unwrap();
    assert!(onboard.status.success(), "{}", stderr(&onboard));
    let server = crate::support::Server::start(&env);
    let other_server = {
        let child = env
            .command()
            .args(["--store", other_store.as_str(), "serve"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let socket = cairn_client::Client::socket_of(&other_store);
        while cairn_client::Client::connect(&socket).is_err() {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        crate::support::Server { child, socket }
    };
    // From inside the sandbox: list the store, and ask each server for a grant.
    let cairn = env!("CARGO_BIN_EXE_cairn");
    let script = format!(
        "ls -A {store} > listed; \
         CAIRN_LOCK_TIMEOUT=0 {cairn} --store {store} policy allow {w} --write {out} --yes; echo $? > own; \
         CAIRN_LOCK_TIMEOUT=0 {cairn} --store {other_store} policy allow {other} --write {out} --yes; echo $? > other",
        store = env.store(),
    );
    let (code, v) = run(&env, &[w.as_str(), "--", "sh", "-c", &script]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        std::fs::read_to_string(w.join("listed")).unwrap(),
        "",
        "the store is hidden"
    );
    for asked in ["own", "other"] {
        let status = std::fs::read_to_string(w.join(asked)).unwrap();
        assert_ne!(status.trim(), "0", "{asked} server: the grant went through");
    }
    let (_, mine) = policy(&env, &[w.as_str()]);
    assert_eq!(mine["policy"]["writable"], serde_json::json!([]), "{mine}");
    let theirs = env
        .command()
        .args([
            "--store",
            other_store.as_str(),
            "--json",
            "policy",
            other.as_str(),
        ])
        .output()
        .unwrap();
    let theirs: serde_json::Value = serde_json::from_slice(&theirs.stdout).unwrap();
    assert_eq!(
        theirs["policy"]["writable"],
        serde_json::json!([]),
        "{theirs}"
    );
    // Both servers still serve their own users.
    assert_eq!(policy(&env, &[w.as_str()]).0, 0);
    assert!(server.stop().success());
    assert!(other_server.stop().success());
}

#[test]
fn a_grant_that_no_longer_holds_is_refused_when_a_run_would_use_it() {
    let env = Env::new();
    let w = setup(&env);
    let out = outside_dir(&env, "out");
    let (code, v) = policy(&env, &["allow", w.as_str(), "--write", &out, "--yes"]);
    assert_eq!(code, 0, "{v}");
    // Swapped for a symlink to the store since it was granted.
    std::fs::remove_dir(&out).unwrap();
    std::os::unix::fs::symlink(env.store(), &out).unwrap();
    let (code, v) = run(&env, &[w.as_str(), "--", "sh", "-c", "echo x > /dev/null"]);
    assert_eq!(code, 2, "{v}");
    assert_eq!(v["error"]["code"], "invalid_grant", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&out) && message.contains("policy revoke"),
        "{message}"
    );
    // Revoked as the message says, the run goes on; --allow-write into the store is refused.
    let (code, v) = policy(&env, &["revoke", w.as_str(), "--write", &out]);
    assert_eq!(code, 0, "{v}");
    let (code, v) = run(&env, &[w.as_str(), "--", "true"]);
    assert_eq!(code, 0, "{v}");
    let inside = env.store().join("x");
    std::fs::create_dir_all(&inside).unwrap();
    let (code, v) = run(
        &env,
        &[w.as_str(), "--allow-write", inside.as_str(), "--", "true"],
    );
    assert_eq!(code, 2, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("store's folder"),
        "{v}"
    );
}

#[test]
fn the_runtime_directory_is_hidden_and_processes_outside_get_no_signal() {
    let env = Env::new();
    let w = setup(&env);
    let runtime = env.path().join("runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    std::fs::write(runtime.join("bus"), "").unwrap();
    let mut outside = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let script = format!(
        "ls -A {runtime} > listed; kill -0 {pid} 2>/dev/null; echo $? > signalled",
        pid = outside.id()
    );
    let out = env
        .command()
        .env("XDG_RUNTIME_DIR", runtime.as_str())
        .args([
            "--store",
            env.store().as_str(),
            "--json",
            "run",
            w.as_str(),
            "--",
            "sh",
            "-c",
        ])
        .arg(&script)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(w.join("listed")).unwrap(), "");
    assert_ne!(
        std::fs::read_to_string(w.join("signalled")).unwrap().trim(),
        "0"
    );
    // Outside the sandbox both are there.
    assert!(runtime.join("bus").exists());
    assert!(outside.try_wait().unwrap().is_none());
    outside.kill().unwrap();
    let _ = outside.wait();
}

/// Starts `cairn --json run ARGS…` in the background.
fn spawn_run(env: &Env, args: &[&str]) -> std::process::Child {
    env.command()
        .args(["--store", env.store().as_str(), "--json", "run"])
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn a_once_grant_serves_one_run_even_when_runs_overlap() {
    let env = Env::new();
    let w = setup(&env);
    let out = outside_dir(&env, "out");
    let once = |env: &Env| {
        let (code, v) = policy(
            env,
            &["allow", w.as_str(), "--write", &out, "--once", "--yes"],
        );
        assert_eq!(code, 0, "{v}");
    };
    // The first run writes, then waits until the second one is over.
    once(&env);
    let go = env.path().join("go");
    let first_script = format!("echo 1 > {out}/first; while [ ! -e {go} ]; do sleep 0.05; done");
    let mut first = spawn_run(&env, &[w.as_str(), "--", "sh", "-c", &first_script]);
    let started = std::time::Instant::now();
    while !std::path::Path::new(&out).join("first").exists() {
        assert!(
            first.try_wait().unwrap().is_none(),
            "the first run ended without writing"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(60));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let second_script = format!("echo 2 > {out}/second");
    let (code, v) = run(&env, &[w.as_str(), "--", "sh", "-c", &second_script]);
    std::fs::write(&go, "").unwrap();
    assert!(first.wait().unwrap().success());
    assert_ne!(code, 0, "the grant was the first run's: {v}");
    assert!(
        !std::path::Path::new(&out).join("second").exists(),
        "a next-run grant served two overlapping runs"
    );

    // Runs started at once: exactly one of them gets the grant.
    std::fs::remove_file(format!("{out}/first")).unwrap();
    for round in 0..3 {
        once(&env);
        let runs: Vec<_> = (0..4)
            .map(|i| {
                let script = format!("echo {i} > {out}/r{round}-{i}");
                spawn_run(&env, &[w.as_str(), "--", "sh", "-c", &script])
            })
            .collect();
        for mut r in runs {
            r.wait().unwrap();
        }
        let wrote = std::fs::read_dir(&out).unwrap().count();
        assert_eq!(
            wrote, 1,
            "round {round}: {wrote} runs wrote with one next-run grant"
        );
        for e in std::fs::read_dir(&out).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
        let (_, v) = policy(&env, &[w.as_str()]);
        assert_eq!(
            v["policy"]["once"]["writable"],
            serde_json::json!([]),
            "{v}"
        );
    }
}

/// Swaps `swapped[which]` (a directory and the target of its symlink) for a symlink and
/// back, again and again, until `stop`.
fn swap_in_a_loop(
    swapped: Vec<(String, String)>,
    which: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    use std::sync::atomic::Ordering::Relaxed;
    std::thread::spawn(move || {
        while !stop.load(Relaxed) {
            let (dir, to) = &swapped[which.load(Relaxed) % swapped.len()];
            let aside = format!("{dir}.real");
            std::fs::rename(dir, &aside).unwrap();
            std::os::unix::fs::symlink(to, dir).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(1));
            std::fs::remove_file(dir).unwrap();
            std::fs::rename(&aside, dir).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    })
}

#[test]
fn a_grant_swapped_for_a_symlink_while_runs_start_never_opens_anything_else() {
    use std::sync::atomic::Ordering::Relaxed;
    let env = Env::new();
    let w = setup(&env);
    // Two grants: one swapped itself, one whose parent is swapped; and a path given with
    // --allow-write, swapped too. Each run races one of them.
    let granted = outside_dir(&env, "granted");
    let parent = outside_dir(&env, "parent");
    let nested = outside_dir(&env, "parent/g");
    let given = outside_dir(&env, "given");
    let target = outside_dir(&env, "target");
    let target_parent = outside_dir(&env, "target-parent");
    outside_dir(&env, "target-parent/g");
    for grant in [&granted, &nested] {
        let (code, v) = policy(&env, &["allow", w.as_str(), "--write", grant, "--yes"]);
        assert_eq!(code, 0, "{v}");
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let which = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let racer = swap_in_a_loop(
        vec![
            (granted.clone(), target.clone()),
            (parent.clone(), target_parent.clone()),
            (given.clone(), target.clone()),
        ],
        which.clone(),
        stop.clone(),
    );
    let (mut ran, mut refused, mut at_start) = (0, 0, 0);
    for i in 0..60 {
        which.store(i, Relaxed);
        // The command aims at the real paths the symlinks point to.
        let script = format!("echo {i} > {target}/t{i}; echo {i} > {target_parent}/g/p{i}; true");
        let (code, v) = run(
            &env,
            &[
                w.as_str(),
                "--allow-write",
                &given,
                "--",
                "sh",
                "-c",
                &script,
            ],
        );
        ran += usize::from(code == 0);
        refused += usize::from(code == 2);
        // Refused by the sandbox itself, on the handle it opened: swapped after the check.
        at_start += usize::from(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("the command was not run")),
        );
    }
    stop.store(true, Relaxed);
    racer.join().unwrap();
    let written: Vec<_> = [&target, &format!("{target_parent}/g")]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap())
        .map(|e| e.unwrap().path())
        .collect();
    eprintln!(
        "60 runs: {ran} ran, {refused} refused (a symlink on the way; {at_start} of them by the sandbox as it started), {} writes outside",
        written.len()
    );
    assert!(
        written.is_empty(),
        "runs wrote outside every grant ({ran} of 60 ran): {written:?}"
    );
    assert!(ran > 0, "no run got through the swaps");
}

#[test]
fn a_command_ended_by_a_signal_exits_128_plus_its_number() {
    let env = Env::new();
    let w = setup(&env);
    // SIGTERM is 15: 143, not the 137 of a SIGKILL whatever the signal was.
    let (code, v) = run(&env, &[w.as_str(), "--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(v["exit_code"], 143, "{v}");
    assert_eq!(code, 143, "{v}");
}

/// What `run`s left in `tmp`: what is in their private folders (`cairn-run-UID/`), and the
/// temporary folders and files an older `run` made there (`cairn-run-tmp-*`, `.tmp*`). The
/// copies of a worktree's secrets a killed run leaves (`cairn-run-secrets-*`) are not
/// counted: they may be all that is left of them.
pub(crate) fn tmp_left(tmp: &camino::Utf8Path) -> Vec<String> {
    let names = |dir: &camino::Utf8Path| -> Vec<String> {
        match std::fs::read_dir(dir) {
            Ok(entries) => entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect(),
            Err(_) => Vec::new(),
        }
    };
    let mut left = Vec::new();
    for name in names(tmp) {
        if name.starts_with("cairn-run-tmp-") || name.starts_with(".tmp") {
            left.push(name);
        } else if name
            .strip_prefix("cairn-run-")
            .is_some_and(|uid| uid.parse::<u32>().is_ok())
        {
            left.extend(
                names(&tmp.join(&name))
                    .into_iter()
                    .map(|n| format!("{name}/{n}")),
            );
        }
    }
    left
}

/// kill -9 of a `cairn run` leaves nothing: the command and what it started die with it,
/// and the next run removes the private folder it left.
#[test]
fn a_killed_run_leaves_no_process_and_no_temporary_folder() {
    let env = Env::new();
    let w = setup(&env);
    let tmp = env.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let script = "sleep 300 & echo $! >> pids; sleep 300 & echo $! >> pids; echo $$ >> pids; wait";
    let mut child = env
        .command()
        .env("TMPDIR", tmp.as_str())
        .args(["--store", env.store().as_str(), "run", w.as_str()])
        .args(["--", "sh", "-c", script])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pids = pids_in(&w.join("pids"), 3);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        still_running(&pids),
        Vec::<u32>::new(),
        "the command outlived its killed run"
    );
    let out = env
        .command()
        .env("TMPDIR", tmp.as_str())
        .args([
            "--store",
            env.store().as_str(),
            "run",
            w.as_str(),
            "--",
            "true",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        tmp_left(&tmp),
        Vec::<String>::new(),
        "the next run removed it"
    );
}
