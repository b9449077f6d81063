//! `cairn run` under real Landlock.

use crate::support::{Env, stderr};

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
