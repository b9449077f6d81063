//! `cairn policy`: a worktree's remembered sandbox grants, and what a grant may be.

use crate::support::{Env, stderr, stdout};

fn setup(env: &Env) -> camino::Utf8PathBuf {
    let w = env.path().join("w");
    std::fs::create_dir_all(&w).unwrap();
    std::fs::write(w.join("a.txt"), "a\n").unwrap();
    assert_eq!(env.json(&["onboard", w.as_str()]).0, 0);
    w
}

fn canonical(path: &camino::Utf8Path) -> String {
    std::fs::create_dir_all(path).unwrap();
    std::fs::canonicalize(path)
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned()
}

/// `policy allow W ARGS… --yes` fails with `code`, and its message names `named`.
#[track_caller]
fn refused(env: &Env, w: &str, args: &[&str], code: &str, named: &str) {
    let mut all = vec!["policy", "allow", w];
    all.extend_from_slice(args);
    all.push("--yes");
    let (exit, v) = env.json(&all);
    assert_eq!(exit, 2, "{args:?}: {v}");
    assert_eq!(v["error"]["code"], code, "{args:?}: {v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains(named), "{args:?}: {message}");
}

#[test]
fn a_grant_must_be_an_existing_canonical_absolute_path_away_from_the_store() {
    let env = Env::new();
    let w = setup(&env);
    let root = canonical(env.path());
    let store = format!("{root}/store");
    let missing = format!("{root}/missing");
    refused(
        &env,
        w.as_str(),
        &["--write", "rel/dir"],
        "invalid_grant",
        "rel/dir",
    );
    refused(
        &env,
        w.as_str(),
        &["--write", &missing],
        "invalid_grant",
        &missing,
    );
    let real = canonical(&env.path().join("real"));
    let link = format!("{root}/link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    refused(
        &env,
        w.as_str(),
        &["--write", &link],
        "invalid_grant",
        &real,
    );
    let dotted = format!("{root}/real/../real");
    refused(
        &env,
        w.as_str(),
        &["--write", &dotted],
        "invalid_grant",
        &dotted,
    );
    refused(
        &env,
        w.as_str(),
        &["--write", &store],
        "invalid_grant",
        "store's folder",
    );
    let inside = canonical(&env.store().join("inside"));
    refused(
        &env,
        w.as_str(),
        &["--write", &inside],
        "invalid_grant",
        "store's folder",
    );
    refused(
        &env,
        w.as_str(),
        &["--write", &root],
        "invalid_grant",
        "holds the store",
    );
    // $HOME whole (the tests' HOME holds no store) holds the user's credentials: --yes is
    // not enough, the path must be named.
    let home = canonical(&env.path().join("home"));
    refused(
        &env,
        w.as_str(),
        &["--write", &home],
        "confirmation_needed",
        &format!("--confirm {home}"),
    );
    let (code, v) = env.json(&[
        "policy",
        "allow",
        w.as_str(),
        "--write",
        &home,
        "--yes",
        "--confirm",
        &home,
    ]);
    assert_eq!(code, 0, "{v}");
    // Nothing refused was remembered.
    let (_, v) = env.json(&["policy", w.as_str()]);
    assert_eq!(v["policy"]["writable"], serde_json::json!([home]), "{v}");
    // Without --write or --network there is nothing to grant.
    let out = env.cairn(&["policy", "allow", w.as_str(), "--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn revoking_what_was_not_granted_is_an_error_naming_it() {
    let env = Env::new();
    let w = setup(&env);
    let dir = canonical(&env.path().join("d"));
    let (code, v) = env.json(&["policy", "revoke", w.as_str(), "--write", &dir]);
    assert_eq!(code, 2, "{v}");
    assert_eq!(v["error"]["code"], "unknown_grant");
    assert!(
        v["error"]["message"].as_str().unwrap().contains(&dir),
        "{v}"
    );
    let (code, v) = env.json(&["policy", "revoke", w.as_str(), "--network"]);
    assert_eq!(code, 2, "{v}");
    // A remembered grant is not a next-run one.
    assert_eq!(
        env.json(&["policy", "allow", w.as_str(), "--write", &dir, "--yes"])
            .0,
        0
    );
    let (code, v) = env.json(&["policy", "revoke", w.as_str(), "--write", &dir, "--once"]);
    assert_eq!(code, 2, "{v}");
    let (code, v) = env.json(&["policy", "revoke", w.as_str(), "--write", &dir]);
    assert_eq!(code, 0, "{v}");
    let (code, v) = env.json(&["policy", "revoke", "/nowhere", "--network"]);
    assert_eq!(code, 2, "{v}");
    assert_eq!(v["error"]["code"], "not_a_worktree", "{v}");
}

#[test]
fn policy_lists_the_grants_readably_from_inside_the_worktree() {
    let env = Env::new();
    let w = setup(&env);
    let dir = canonical(&env.path().join("d"));
    assert_eq!(
        env.json(&["policy", "allow", w.as_str(), "--write", &dir, "--yes"])
            .0,
        0
    );
    assert_eq!(
        env.json(&[
            "policy",
            "allow",
            w.as_str(),
            "--network",
            "--once",
            "--yes"
        ])
        .0,
        0
    );
    // Allowing again changes nothing and logs nothing.
    assert_eq!(
        env.json(&["policy", "allow", w.as_str(), "--write", &dir, "--yes"])
            .0,
        0
    );
    let mut cmd = env.command();
    cmd.current_dir(w.as_std_path())
        .args(["--store", env.store().as_str(), "policy"]);
    let out = cmd.output().unwrap();
    assert_eq!(
        stdout(&out),
        format!(
            "{w}: writable: the worktree; readable: everything\n  write {dir}\n  network (next run only)\n"
        ),
        "{}",
        stderr(&out)
    );
    let (_, log) = env.json(&["op", "log", w.as_str()]);
    let allows = log["ops"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["op"] == "policy_allow")
        .count();
    assert_eq!(allows, 2, "{log}");
}

#[test]
fn a_folder_holding_home_needs_its_path_named_and_slash_is_never_granted() {
    let env = Env::new();
    let w = setup(&env);
    let users = canonical(&env.path().join("users"));
    let home = canonical(&env.path().join("users/me"));
    let allow = |args: &[&str]| {
        let mut cmd = env.command();
        cmd.env("HOME", &home)
            .args([
                "--store",
                env.store().as_str(),
                "--json",
                "policy",
                "allow",
                w.as_str(),
            ])
            .args(args);
        let out = cmd.output().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.code().unwrap(), v)
    };
    let (code, v) = allow(&["--write", &users]);
    assert_eq!(code, 2, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("--yes"),
        "{v}"
    );
    let (code, v) = allow(&["--write", &users, "--yes"]);
    assert_eq!(code, 2, "{v}");
    assert_eq!(v["error"]["code"], "confirmation_needed", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("--confirm {users}")),
        "{v}"
    );
    let (code, v) = allow(&["--write", &users, "--yes", "--confirm", &users]);
    assert_eq!(code, 0, "{v}");
    let (code, v) = allow(&["--write", "/", "--yes"]);
    assert_eq!(code, 2, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`/` is never granted"),
        "{v}"
    );
}

/// `cairn --json ARGS…` in a private mount namespace where `mounts` (a shell line of
/// `mount` commands) ran first; its exit status and JSON object.
fn in_private_mounts(env: &Env, mounts: &str, args: &[&str]) -> (i32, serde_json::Value) {
    let mut line = format!(
        "{mounts} && exec {} --store {} --json",
        env!("CARGO_BIN_EXE_cairn"),
        env.store()
    );
    for a in args {
        line.push_str(&format!(" '{a}'"));
    }
    let out = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &line])
        .current_dir(env.path())
        .env_remove("CAIRN_STORE")
        .env("HOME", env.path().join("home").as_str())
        .output()
        .expect("unshare(1) is needed");
    let text = String::from_utf8_lossy(&out.stdout);
    let v = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("{e}: {text} {}", stderr(&out)));
    (out.status.code().unwrap(), v)
}

#[test]
fn pseudo_file_systems_are_never_granted_whatever_they_are_called() {
    let env = Env::new();
    let w = setup(&env);
    for path in [
        "/proc",
        "/proc/sys/kernel",
        "/sys",
        "/sys/kernel",
        "/dev",
        "/dev/shm",
    ] {
        let (code, v) = env.json(&["policy", "allow", w.as_str(), "--write", path, "--yes"]);
        assert_eq!(code, 2, "{path}: {v}");
        assert_eq!(v["error"]["code"], "invalid_grant", "{path}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(path) && message.contains("never granted"),
            "{path}: {message}"
        );
        let (code, v) = env.json(&["run", w.as_str(), "--allow-write", path, "--", "true"]);
        assert_eq!(code, 2, "run --allow-write {path}: {v}");
    }
    // /proc under another name (a bind mount), and a folder holding a /proc mount: found
    // by what they are.
    let alias = canonical(&env.path().join("alias"));
    let holder = canonical(&env.path().join("holder"));
    std::fs::create_dir_all(format!("{holder}/inner")).unwrap();
    let mounts = format!("mount --bind /proc {alias} && mount --bind /proc {holder}/inner");
    for (grant, named) in [
        (&alias, "pseudo file system (proc)"),
        (&holder, "holds a pseudo file system"),
    ] {
        let (code, v) = in_private_mounts(
            &env,
            &mounts,
            &["policy", "allow", w.as_str(), "--write", grant, "--yes"],
        );
        assert_eq!(code, 2, "{grant}: {v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(named),
            "{grant}: {v}"
        );
    }
    let (_, v) = env.json(&["policy", w.as_str()]);
    assert_eq!(v["policy"]["writable"], serde_json::json!([]), "{v}");
}

#[test]
fn the_sandbox_refuses_a_writable_path_that_is_a_symlink_or_a_pseudo_file_system() {
    let env = Env::new();
    let real = canonical(&env.path().join("real"));
    let link = format!("{}/link", env.path());
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let scratch = canonical(&env.path().join("scratch"));
    for (root, why) in [
        (link.as_str(), "symlink"),
        ("/proc", "never granted"),
        (real.as_str(), ""),
    ] {
        let report = env.path().join("report");
        std::fs::write(&report, "").unwrap();
        let policy = serde_json::json!({
            "mode": "workspace-write",
            "writable_roots": [root],
        });
        let out = env
            .command()
            .args([
                "__sandbox-exec",
                &policy.to_string(),
                &scratch,
                report.as_str(),
            ])
            .args(["--", "true"])
            .output()
            .unwrap();
        let reported = std::fs::read_to_string(&report).unwrap();
        if why.is_empty() {
            assert_eq!(out.status.code(), Some(0), "{root}: {reported}");
        } else {
            assert_eq!(out.status.code(), Some(232), "{root}: {}", stderr(&out));
            assert!(
                reported.starts_with("refused: ")
                    && reported.contains(root)
                    && reported.contains(why),
                "{root}: {reported}"
            );
        }
    }
}

#[test]
fn over_http_an_agent_only_asks_and_a_person_grants_or_denies_on_the_terminal() {
    let env = Env::new();
    let w = setup(&env);
    let cache = canonical(&env.path().join("cache"));
    let logs = canonical(&env.path().join("logs"));
    let server = crate::support::Server::start(&env);
    let client = server.client();
    let post = |path: &str, body: serde_json::Value| client.post_json(path, &body).unwrap();

    // The verb route records a request: who asked, what, why. Nothing is granted.
    let (status, v) = post(
        "/v1/policy_allow",
        serde_json::json!({ "worktree": w, "write": [cache], "reason": "a build cache" }),
    );
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["requested"], 1, "{v}");
    assert_eq!(v["policy"]["writable"], serde_json::json!([]), "{v}");
    let asked = &v["requests"][0];
    assert_eq!(asked["writable"], serde_json::json!([cache]), "{v}");
    assert_eq!(asked["reason"], "a build cache", "{v}");
    assert!(
        asked["by"]
            .as_str()
            .unwrap()
            .starts_with("HTTP client pid "),
        "{v}"
    );
    // The agent cannot confirm for the person, nor ask for a pseudo file system.
    let (status, v) = post(
        "/v1/policy_allow",
        serde_json::json!({ "worktree": w, "write": [cache], "yes": true }),
    );
    assert_eq!(status, 400, "{v}");
    let (status, v) = post(
        "/v1/policy_allow",
        serde_json::json!({ "worktree": w, "write": ["/proc/sys/kernel"] }),
    );
    assert_eq!(
        (status, &v["error"]["code"]),
        (422, &"invalid_grant".into()),
        "{v}"
    );
    // The typed route, from a program that is not cairn: a request as well, whatever it
    // claims, and it cannot grant a listed request.
    let typed = |args: serde_json::Value, verb: &str| {
        post(
            "/v1/call",
            serde_json::json!({ "cwd": w, "request": { "verb": verb, "args": args } }),
        )
    };
    let (_, v) = typed(
        serde_json::json!({ "worktree": w, "write": [logs], "yes": true, "confirm": [logs] }),
        "policy_allow",
    );
    assert_eq!(v["outcome"]["verb"], "policy_request", "{v}");
    assert_eq!(v["outcome"]["outcome"]["requested"], 2, "{v}");
    let (_, v) = typed(
        serde_json::json!({ "worktree": w, "network": true, "by": "the user" }),
        "policy_request",
    );
    let by = v["outcome"]["outcome"]["requests"][2]["by"]
        .as_str()
        .unwrap();
    assert!(by.starts_with("HTTP client pid "), "{v}");
    let (status, v) = typed(
        serde_json::json!({ "worktree": w, "request": 1, "yes": true }),
        "policy_allow",
    );
    assert_eq!(
        (status, &v["error"]["code"]),
        (403, &"not_permitted".into()),
        "{v}"
    );
    let (_, v) = env.json(&["policy", w.as_str()]);
    assert_eq!(v["policy"]["writable"], serde_json::json!([]), "{v}");
    assert_eq!(v["requests"].as_array().unwrap().len(), 3, "{v}");
    let human = stdout(&env.cairn(&["policy", w.as_str()]));
    assert!(
        human.contains(&format!(
            "request 1: write {cache}, asked by HTTP client pid "
        )),
        "{human}"
    );

    // A person grants request 1 on the terminal (through the server), and denies 2 and 3.
    let (code, v) = env.json(&["policy", "allow", w.as_str(), "--request", "1"]);
    assert_eq!(
        (code, &v["error"]["code"]),
        (2, &"confirmation_needed".into()),
        "{v}"
    );
    let (code, v) = env.json(&["policy", "allow", w.as_str(), "--request", "1", "--yes"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["policy"]["writable"], serde_json::json!([cache]), "{v}");
    let (code, v) = env.json(&["policy", "allow", w.as_str(), "--request", "1", "--yes"]);
    assert_eq!(
        (code, &v["error"]["code"]),
        (2, &"unknown_request".into()),
        "{v}"
    );
    for id in ["2", "3"] {
        let (code, v) = env.json(&["policy", "revoke", w.as_str(), "--request", id]);
        assert_eq!(code, 0, "{v}");
    }
    let (_, v) = env.json(&["policy", w.as_str()]);
    assert_eq!(v["requests"], serde_json::json!([]), "{v}");
    assert_eq!(v["policy"]["writable"], serde_json::json!([cache]), "{v}");
    assert_eq!(v["policy"]["network"], false, "{v}");
    // Numbers are never reused.
    let (_, v) = post(
        "/v1/policy_allow",
        serde_json::json!({ "worktree": w, "write": [logs] }),
    );
    assert_eq!(v["requested"], 4, "{v}");
    let (_, log) = env.json(&["op", "log", w.as_str()]);
    let ops: Vec<(String, String)> = log["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["op"].as_str().unwrap().to_owned(),
                o["detail"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert!(
        ops.iter().any(|(op, d)| op == "policy_allow"
            && d.starts_with(&format!("--write {cache} (request 1 by HTTP client pid "))),
        "{ops:?}"
    );
    assert_eq!(
        ops.iter().filter(|(op, _)| op == "policy_deny").count(),
        2,
        "{ops:?}"
    );
    assert_eq!(
        ops.iter().filter(|(op, _)| op == "policy_request").count(),
        4,
        "{ops:?}"
    );
    assert!(server.stop().success());
}

/// `cairn --json policy allow W ARGS…` in a terminal; its JSON and status go to files.
fn allow_on_a_terminal(
    env: &Env,
    w: &str,
    args: &str,
) -> (
    crate::picker::Terminal,
    camino::Utf8PathBuf,
    camino::Utf8PathBuf,
) {
    let json = env.path().join("out.json");
    let status = env.path().join("status");
    let _ = std::fs::remove_file(&status);
    let line = format!(
        "env NO_COLOR=1 HOME={home} {cairn} --store {store} --json policy allow {w} {args} > {json}; echo $? > {status}",
        home = env.path().join("home"),
        cairn = env!("CARGO_BIN_EXE_cairn"),
        store = env.store(),
    );
    (crate::picker::Terminal::start(env, &line), json, status)
}

#[test]
fn on_a_terminal_allow_asks_naming_the_grant_and_a_credential_must_be_typed() {
    let env = Env::new();
    let w = setup(&env);
    let cache = canonical(&env.path().join("cache"));
    let ssh = canonical(&env.path().join("home/.ssh"));
    let granted = |env: &Env| {
        let (_, v) = env.json(&["policy", w.as_str()]);
        v["policy"]["writable"].clone()
    };
    // Answered no: nothing granted.
    {
        let (terminal, json, status) =
            allow_on_a_terminal(&env, w.as_str(), &format!("--write {cache}"));
        let screen = terminal.wait_for("Grant it? [y/N]");
        assert!(
            screen.contains(&format!("Grant every later `cairn run` of {w}:"))
                && screen.contains(&format!("write beneath {cache}")),
            "{screen}"
        );
        terminal.keys(&["n", "Enter"]);
        let (code, v) = crate::picker::ended(&json, &status);
        assert_eq!(
            (code, &v["error"]["code"]),
            (2, &"not_confirmed".into()),
            "{v}"
        );
        assert_eq!(granted(&env), serde_json::json!([]));
    }
    // Answered yes: granted.
    {
        let (terminal, json, status) =
            allow_on_a_terminal(&env, w.as_str(), &format!("--write {cache} --once"));
        terminal.wait_for("Grant the next `cairn run` of");
        terminal.keys(&["y", "Enter"]);
        let (code, v) = crate::picker::ended(&json, &status);
        assert_eq!(code, 0, "{v}");
        assert_eq!(
            v["policy"]["once"]["writable"],
            serde_json::json!([cache]),
            "{v}"
        );
    }
    // The user's credentials: yes is not enough, the path must be typed, exactly.
    for (typed, code) in [("/elsewhere", 2), (ssh.as_str(), 0)] {
        let (terminal, json, status) =
            allow_on_a_terminal(&env, w.as_str(), &format!("--write {ssh}"));
        terminal.wait_for("Grant it? [y/N]");
        terminal.keys(&["y", "Enter"]);
        let screen = terminal.wait_for("Type the path to grant it:");
        assert!(screen.contains("the user's credentials"), "{screen}");
        terminal.keys(&[typed, "Enter"]);
        let (exit, v) = crate::picker::ended(&json, &status);
        assert_eq!(exit, code, "{typed}: {v}");
    }
    assert_eq!(granted(&env), serde_json::json!([ssh]));
}
