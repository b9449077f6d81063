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

/// `policy allow W ARGS…` fails with `code`, and its message names `named`.
#[track_caller]
fn refused(env: &Env, w: &str, args: &[&str], code: &str, named: &str) {
    let mut all = vec!["policy", "allow", w];
    all.extend_from_slice(args);
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
    // $HOME whole (the tests' HOME holds no store) needs --yes.
    let home = canonical(&env.path().join("home"));
    refused(
        &env,
        w.as_str(),
        &["--write", &home],
        "invalid_grant",
        "--yes",
    );
    let (code, v) = env.json(&["policy", "allow", w.as_str(), "--write", &home, "--yes"]);
    assert_eq!(code, 0, "{v}");
    // Nothing refused was remembered.
    let (_, v) = env.json(&["policy", w.as_str()]);
    assert_eq!(v["policy"]["writable"], serde_json::json!([home]), "{v}");
    // Without --write or --network there is nothing to grant.
    let out = env.cairn(&["policy", "allow", w.as_str()]);
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
        env.json(&["policy", "allow", w.as_str(), "--write", &dir])
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
        env.json(&["policy", "allow", w.as_str(), "--write", &dir])
            .0,
        0
    );
    assert_eq!(
        env.json(&["policy", "allow", w.as_str(), "--network", "--once"])
            .0,
        0
    );
    // Allowing again changes nothing and logs nothing.
    assert_eq!(
        env.json(&["policy", "allow", w.as_str(), "--write", &dir])
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
fn a_folder_holding_home_needs_yes_and_slash_is_never_granted() {
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
