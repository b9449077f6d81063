use std::os::unix::fs::PermissionsExt;

use crate::support::{Env, stderr, stdout};

fn git(dir: &camino::Utf8Path, args: &[&str]) -> String {
    String::from_utf8(crate::support::git(dir, args)).unwrap()
}

fn write(root: &camino::Utf8Path, files: &[(&str, &str)]) {
    for (name, content) in files {
        let p = root.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
}

#[test]
fn onboard_snapshot_log_and_labels() {
    let env = Env::new();
    let src = env.path().join("proj");
    write(
        &src,
        &[
            ("a.txt", "1"),
            ("dir/b.txt", "2"),
            (".gitignore", "*.log\n"),
            ("x.log", "ignored"),
        ],
    );
    let (code, v) = env.json(&["onboard", src.as_str(), "-m", "start", "--label", "task=42"]);
    assert_eq!(code, 0, "{v}");
    for field in ["snapshot", "tree", "files", "bytes", "skipped", "source"] {
        assert!(v.get(field).is_some(), "missing {field}: {v}");
    }
    assert_eq!(v["files"], 3);
    assert_eq!(v["bytes"], 8);
    assert_eq!(v["source"], serde_json::Value::Null, "not a git repository");
    let first = v["snapshot"].as_str().unwrap().to_owned();

    let (code, v) = env.json(&["snapshot", src.as_str()]);
    assert_eq!(code, 0);
    assert_eq!(v["changed"], false);
    assert_eq!(v["snapshot"], first.as_str());

    write(&src, &[("a.txt", "changed"), ("new.txt", "3")]);
    std::fs::remove_file(src.join("dir/b.txt")).unwrap();
    let (code, v) = env.json(&[
        "snapshot",
        src.as_str(),
        "-m",
        "turn 1",
        "--label",
        "turn=1",
        "--label",
        "task=42",
    ]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        (
            v["changed"].as_bool(),
            v["added"].as_u64(),
            v["modified"].as_u64(),
            v["removed"].as_u64()
        ),
        (Some(true), Some(1), Some(1), Some(1))
    );
    assert_eq!(v["parent"], first.as_str());

    let (_, log) = env.json(&["log", src.as_str()]);
    let snaps = log["snapshots"].as_array().unwrap();
    assert_eq!(snaps.len(), 2);
    assert_eq!(snaps[0]["labels"], serde_json::json!(["task=42", "turn=1"]));
    assert_eq!(snaps[0]["message"], "turn 1");
    // From inside the worktree, no argument needed.
    let out = env
        .command()
        .current_dir(src.as_str())
        .args(["--store", env.store().as_str(), "--json", "log", "-n", "1"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["snapshots"].as_array().unwrap().len(), 1);

    let (code, v) = env.json(&["snapshot", src.as_str(), "--label", "bad label"]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (2, Some("invalid_label"))
    );
}

#[test]
fn onboard_records_the_git_commit_and_dirtiness() {
    let env = Env::new();
    let repo = env.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    write(&repo, &[("f", "committed")]);
    git(&repo, &["add", "f"]);
    git(&repo, &["commit", "-qm", "c"]);
    let head = git(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
    let (_, v) = env.json(&["onboard", repo.as_str()]);
    assert_eq!(
        v["source"],
        serde_json::json!({ "git_commit": head, "dirty": false })
    );
    // git's own files stay out of the snapshot.
    let out = env.cairn(&["show", v["snapshot"].as_str().unwrap()]);
    assert!(!stdout(&out).contains(".git"), "{}", stdout(&out));
    write(&repo, &[("f", "edited, not committed")]);
    let (_, v) = env.json(&["onboard", repo.as_str()]);
    assert_eq!(v["source"]["dirty"], true);
    let f = env.cairn(&["show", &format!("{}:f", v["snapshot"].as_str().unwrap())]);
    assert_eq!(
        f.stdout, b"edited, not committed",
        "working files are the truth"
    );
}

#[test]
fn global_excludes_are_honoured() {
    let env = Env::new();
    let config = env.path().join("config");
    write(&config, &[("git/ignore", "*.secret-build\n")]);
    let src = env.path().join("w");
    write(
        &src,
        &[("keep.txt", "k"), ("out.secret-build", "excluded globally")],
    );
    let out = env
        .command()
        .env("XDG_CONFIG_HOME", config.as_str())
        .args([
            "--store",
            env.store().as_str(),
            "--json",
            "onboard",
            src.as_str(),
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["files"], 1, "{v}");
}

#[test]
fn checkout_refuses_a_non_empty_destination_and_hydrates_an_empty_one() {
    let env = Env::new();
    let src = env.path().join("src");
    write(&src, &[("a", "1"), ("bin/run", "#!/bin/sh\n")]);
    std::fs::set_permissions(src.join("bin/run"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("a", src.join("link")).unwrap();
    let snap = env.json(&["onboard", src.as_str()]).1["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();

    let busy = env.path().join("busy");
    write(&busy, &[("mine", "do not touch")]);
    let (code, v) = env.json(&["checkout", &snap[..8], busy.as_str()]);
    assert_eq!((code, v["error"]["code"].as_str()), (2, Some("not_empty")));
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains(busy.as_str())
    );
    assert_eq!(std::fs::read_dir(&busy).unwrap().count(), 1);
    assert_eq!(
        std::fs::read_to_string(busy.join("mine")).unwrap(),
        "do not touch"
    );

    let dest = env.path().join("agent-1");
    let (code, v) = env.json(&["checkout", &snap[..8], dest.as_str()]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["snapshot"], snap.as_str());
    assert_eq!(v["files"], 3);
    assert_eq!(v["worktree"], dest.as_str());
    assert_eq!(
        std::fs::read_link(dest.join("link")).unwrap().to_str(),
        Some("a")
    );
    assert_ne!(
        std::fs::metadata(dest.join("bin/run"))
            .unwrap()
            .permissions()
            .mode()
            & 0o100,
        0
    );

    let (code, v) = env.json(&["checkout", "0000000000", env.path().join("x").as_str()]);
    assert_eq!((code, v["error"]["code"].as_str()), (2, Some("unknown_id")));
    assert!(!env.path().join("x").exists());

    let (_, v) = env.json(&["worktree", "list"]);
    assert_eq!(v["worktrees"].as_array().unwrap().len(), 2);
    let (code, _) = env.json(&["worktree", "remove", dest.as_str()]);
    assert_eq!(code, 0);
    assert!(
        dest.join("a").exists(),
        "remove forgets, it does not delete"
    );
    let (code, v) = env.json(&["worktree", "remove", dest.as_str()]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (2, Some("not_a_worktree"))
    );
}

/// A path no tree can hold (a spelling of `.git`, a control character) is bad input naming
/// it, for every verb that takes `-- PATH…`, before anything is read or changed.
#[test]
fn a_path_no_tree_can_hold_is_bad_input_naming_it() {
    let env = Env::new();
    let src = env.path().join("w");
    write(&src, &[("a", "1")]);
    let snap = env.json(&["onboard", src.as_str()]).1["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    write(&src, &[("a", "edited")]);
    let (code, v) = env.json(&["checkpoint", src.as_str()]);
    assert_eq!(code, 0, "{v}");
    for bad in ["src/.GIT/config", "tab\there"] {
        for args in [
            vec!["rollback", src.as_str(), &snap, "--", bad],
            vec!["diff", &snap, src.as_str(), "--", bad],
            vec!["accept", src.as_str(), "--", bad],
            vec!["discard", src.as_str(), "--", bad],
        ] {
            let (code, v) = env.json(&args);
            assert_eq!(code, 2, "{args:?}: {v}");
            assert_eq!(v["error"]["code"], "invalid_path", "{args:?}: {v}");
            let message = v["error"]["message"].as_str().unwrap();
            let reason = if bad.contains('\t') {
                "contains a control character"
            } else {
                "a spelling of .git"
            };
            assert!(message.contains(reason), "{args:?}: {message}");
            let named = message.starts_with(&diff::quote_path(bad.as_bytes()));
            assert!(named, "{args:?}: {message}");
        }
    }
    assert_eq!(std::fs::read_to_string(src.join("a")).unwrap(), "edited");
}

#[test]
fn rollback_whole_per_path_and_dry_run() {
    let env = Env::new();
    let src = env.path().join("w");
    write(&src, &[("a", "1"), ("b", "2"), ("d/c", "3")]);
    let snap = env.json(&["onboard", src.as_str()]).1["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    write(&src, &[("a", "edited"), ("b", "edited"), ("new", "n")]);

    let (code, v) = env.json(&["rollback", src.as_str(), &snap, "--dry-run"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["written"], serde_json::json!(["a", "b"]));
    assert_eq!(v["deleted"], serde_json::json!(["new"]));
    assert_eq!(
        std::fs::read_to_string(src.join("a")).unwrap(),
        "edited",
        "dry run changes nothing"
    );

    let (code, v) = env.json(&[
        "rollback",
        src.as_str(),
        &snap,
        "--",
        "a",
        src.join("new").as_str(),
    ]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["written"], serde_json::json!(["a"]));
    assert_eq!(v["deleted"], serde_json::json!(["new"]));
    assert_eq!(std::fs::read_to_string(src.join("a")).unwrap(), "1");
    assert_eq!(std::fs::read_to_string(src.join("b")).unwrap(), "edited");

    let (code, v) = env.json(&["rollback", src.as_str(), &snap, "--", "/etc/passwd"]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (2, Some("invalid_path"))
    );
    let (code, v) = env.json(&["rollback", src.as_str(), &snap, "--", "../x"]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (2, Some("invalid_path"))
    );

    let (code, v) = env.json(&["rollback", src.as_str(), &snap]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(std::fs::read_to_string(src.join("b")).unwrap(), "2");
    let human = stdout(&env.cairn(&["rollback", src.as_str(), &snap]));
    assert!(human.contains("0 written, 0 deleted"), "{human}");
}

#[test]
fn bad_input_names_the_path_and_changes_nothing() {
    let env = Env::new();
    let missing = env.path().join("no-such-dir");
    let (code, v) = env.json(&["onboard", missing.as_str()]);
    assert_eq!(code, 2);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains(missing.as_str())
    );
    let plain = env.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let (code, v) = env.json(&["snapshot", plain.as_str()]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (2, Some("not_a_worktree"))
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains(plain.as_str())
    );
    write(&plain, &[("f", "x")]);
    env.json(&["onboard", plain.as_str()]);
    let (code, v) = env.json(&["rollback", plain.as_str(), "deadbeef00"]);
    assert_eq!((code, v["error"]["code"].as_str()), (2, Some("unknown_id")));
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("deadbeef00")
    );
    assert_eq!(std::fs::read_to_string(plain.join("f")).unwrap(), "x");
    let out = env.cairn(&["onboard", missing.as_str()]);
    assert!(stderr(&out).contains(missing.as_str()));
}

/// Run as an unprivileged user (root reads everything), an unreadable file stops the
/// onboard with an error naming it, and nothing becomes visible in the store.
#[test]
fn an_unreadable_file_is_an_error_naming_it() {
    let env = Env::new();
    std::fs::set_permissions(env.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let src = env.path().join("w");
    write(&src, &[("ok.txt", "fine"), ("secret.txt", "no access")]);
    std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::set_permissions(
        src.join("secret.txt"),
        std::fs::Permissions::from_mode(0o000),
    )
    .unwrap();
    let is_root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .unwrap()
        .stdout
        .starts_with(b"0\n");
    let run = |args: &[&str]| {
        let mut cmd = if is_root {
            let mut c = std::process::Command::new("setpriv");
            c.args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                env!("CARGO_BIN_EXE_cairn"),
            ]);
            c
        } else {
            std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
        };
        cmd.current_dir(env.path())
            .env("HOME", env.path().as_str())
            .args(["--store", env.store().as_str(), "--json"])
            .args(args);
        cmd.output().unwrap()
    };
    assert_eq!(run(&["init", env.store().as_str()]).status.code(), Some(0));
    let out = run(&["onboard", src.as_str()]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(src.join("secret.txt").as_str()) && message.contains("ermission denied"),
        "{message}"
    );
    let v: serde_json::Value = serde_json::from_slice(&run(&["worktree", "list"]).stdout).unwrap();
    assert_eq!(v["worktrees"], serde_json::json!([]), "nothing registered");
    let v: serde_json::Value = serde_json::from_slice(&run(&["gc", "--dry-run"]).stdout).unwrap();
    assert!(
        v["removed"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["kind"] == "blob"),
        "no snapshot or tree was recorded: {v}"
    );
}

/// A registered root swapped for a symlink or another directory is refused before anything
/// is read or recorded, until `worktree rebind` accepts the new directory.
#[test]
fn a_root_swapped_behind_cairns_back_is_refused_until_rebound() {
    let env = Env::new();
    let wt = env.path().join("wt");
    let elsewhere = env.path().join("elsewhere");
    write(&wt, &[("a.txt", "mine\n")]);
    write(&elsewhere, &[("secret.txt", "not the worktree\n")]);
    let (code, first) = env.json(&["onboard", wt.as_str()]);
    assert_eq!(code, 0, "{first}");
    let s1 = first["snapshot"].as_str().unwrap().to_owned();
    // What the store holds: reachable snapshots, and what gc would drop (a capture stored
    // but not referenced).
    let log_len = || {
        let (code, list) = env.json(&["worktree", "list"]);
        assert_eq!(code, 0, "{list}");
        let (code, gc) = env.json(&["gc", "--dry-run"]);
        assert_eq!(code, 0, "{gc}");
        (list, gc["removed"].clone(), gc["bytes_freed"].clone())
    };
    let ops = || stdout(&env.cairn(&["--json", "op", "log", wt.as_str()]));
    let (snapshots, op_log) = (log_len(), ops());

    std::fs::rename(&wt, env.path().join("wt.real")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &wt).unwrap();
    let refused = |args: &[&str]| {
        let (code, v) = env.json(args);
        assert_eq!(code, 2, "{args:?}: {v}");
        assert_eq!(v["error"]["code"], "worktree_moved", "{args:?}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(wt.as_str()), "{args:?}: {message}");
        message.to_owned()
    };
    assert!(refused(&["snapshot", wt.as_str()]).contains("symlink"));
    refused(&["rollback", wt.as_str(), &s1]);
    refused(&["status", wt.as_str()]);
    refused(&["checkpoint", wt.as_str()]);
    refused(&["undo", wt.as_str()]);
    // Nothing was captured of the directory behind the link, and nothing was written there.
    assert_eq!(log_len(), snapshots);
    assert_eq!(ops(), op_log);
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        1,
        "nothing written behind the link"
    );
    // A symlink is never accepted as the root.
    refused(&["worktree", "rebind", wt.as_str()]);

    // Another directory in its place: refused, then accepted by rebind.
    std::fs::remove_file(&wt).unwrap();
    write(&wt, &[("a.txt", "restored from a backup\n")]);
    let message = refused(&["snapshot", wt.as_str()]);
    assert!(message.contains("cairn worktree rebind"), "{message}");
    assert_eq!(log_len(), snapshots);
    let (code, v) = env.json(&["worktree", "rebind", wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    let (code, v) = env.json(&["snapshot", wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["changed"], true, "{v}");
    assert_eq!(v["modified"], 1, "{v}");

    // Checkout into the registered worktree's emptied folder records the new directory.
    std::fs::remove_dir_all(&wt).unwrap();
    let (code, v) = env.json(&["checkout", &s1, wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    let (code, v) = env.json(&["snapshot", wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["changed"], false, "{v}");
    assert_eq!(env.json(&["fsck"]).0, 0);
}

/// A registered worktree whose directory is gone is the caller's mistake (exit 2 naming it,
/// as SPEC has it for an invalid path), not a store or I/O failure: through `cairn serve`
/// exit 3 is a 500, which generated requests found.
#[test]
fn a_registered_worktree_whose_directory_is_gone_is_bad_input() {
    let env = Env::new();
    let wt = env.path().join("wt");
    write(&wt, &[("a.txt", "mine\n")]);
    let (code, v) = env.json(&["checkpoint", wt.as_str(), "--name", "base"]);
    assert_eq!(code, 0, "{v}");
    std::fs::remove_dir_all(&wt).unwrap();
    for args in [
        &["snapshot", wt.as_str()][..],
        &["status", wt.as_str()],
        &["checkpoint", wt.as_str()],
        &["review", wt.as_str()],
        &["rewind", wt.as_str()],
        &["rollback", wt.as_str(), "base"],
    ] {
        let (code, v) = env.json(args);
        assert_eq!(code, 2, "{args:?}: {v}");
        assert_eq!(v["error"]["code"], "invalid_path", "{args:?}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(wt.as_str()), "{args:?}: {message}");
    }
    assert!(!wt.exists(), "nothing was created");
}

#[test]
fn checkout_below_a_file_is_bad_input_naming_the_path() {
    let env = Env::new();
    let snap = env.commit(&[("a.txt", b"1")], vec![], "m").to_string();
    std::fs::write(env.path().join("file"), "a file\n").unwrap();
    std::os::unix::fs::symlink("file", env.path().join("link")).unwrap();
    for dest in ["file/below", "file/below/deeper", "link/below"] {
        let target = env.path().join(dest);
        let out = env.cairn(&["checkout", &snap, target.as_str()]);
        assert_eq!(out.status.code(), Some(2), "{dest}: {}", stderr(&out));
        assert!(stderr(&out).contains(target.as_str()), "{}", stderr(&out));
        let (code, v) = env.json(&["checkout", &snap, target.as_str()]);
        assert_eq!(code, 2);
        assert_eq!(v["error"]["code"], "invalid_path", "{v}");
    }
    assert_eq!(
        std::fs::read_to_string(env.path().join("file")).unwrap(),
        "a file\n"
    );
    assert_eq!(
        env.json(&["worktree", "list"]).1["worktrees"],
        serde_json::json!([])
    );
}

/// `cairn --store STORE [--json] args…` with arguments that may be any bytes.
fn cairn_bytes(env: &Env, json: bool, args: &[&[u8]]) -> std::process::Output {
    use std::os::unix::ffi::OsStrExt;
    let mut cmd = env.command();
    cmd.arg("--store").arg(env.store().as_str());
    if json {
        cmd.arg("--json");
    }
    cmd.args(args.iter().map(|a| std::ffi::OsStr::from_bytes(a)));
    cmd.output().unwrap()
}

/// The message of a failed command, human or `--json`.
fn error_message(out: &std::process::Output, json: bool) -> String {
    if json {
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["error"]["message"].as_str().unwrap().to_owned()
    } else {
        stderr(out)
    }
}

#[test]
fn errors_name_a_non_utf8_path_in_the_quoted_form() {
    use std::os::unix::ffi::OsStrExt;
    let env = Env::new();
    let root = env.path().join("w");
    write(&root, &[("keep.txt", "k"), (".gitignore", "blocker\n")]);
    let (code, v) = env.json(&["onboard", root.as_str()]);
    assert_eq!(code, 0, "{v}");
    let first = v["snapshot"].as_str().unwrap().to_owned();
    let wt = root.as_str().as_bytes();
    let name = |rest: &[u8]| [wt, b"/", rest].concat();
    for json in [false, true] {
        let cases: Vec<(Vec<Vec<u8>>, &str)> = vec![
            // Worktree arguments: not a worktree, not a destination.
            (vec![b"status".to_vec(), name(b"caf\xe9")], "caf\\351\""),
            (vec![b"snapshot".to_vec(), name(b"caf\xe9")], "caf\\351\""),
            (vec![b"undo".to_vec(), name(b"caf\xe9")], "caf\\351\""),
            (
                vec![
                    b"checkout".to_vec(),
                    first.as_bytes().to_vec(),
                    name(b"caf\xe9"),
                ],
                "caf\\351\"",
            ),
            // A path after `--` that names nothing.
            (
                vec![
                    b"rollback".to_vec(),
                    wt.to_vec(),
                    first.as_bytes().to_vec(),
                    b"--".to_vec(),
                    b"caf\xe9".to_vec(),
                ],
                "caf\\351\"",
            ),
        ];
        for (args, quoted) in cases {
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let out = cairn_bytes(&env, json, &refs);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
            let message = error_message(&out, json);
            assert!(message.contains(quoted), "{args:?}: {message}");
            assert!(!message.contains('\u{fffd}'), "{args:?}: {message}");
        }
    }

    // A rollback refused because an ignored non-UTF-8 file stands where the snapshot has a
    // directory names that file quoted.
    let at =
        |rel: &[u8]| std::path::Path::new(root.as_str()).join(std::ffi::OsStr::from_bytes(rel));
    std::fs::remove_file(root.join(".gitignore")).unwrap();
    std::fs::create_dir_all(at(b"d\xe9")).unwrap();
    std::fs::write(at(b"d\xe9/x"), "inside").unwrap();
    let (code, v) = env.json(&["snapshot", root.as_str()]);
    assert_eq!(code, 0, "{v}");
    let with_dir = v["snapshot"].as_str().unwrap().to_owned();
    let (code, v) = env.json(&["rollback", root.as_str(), &first]);
    assert_eq!(code, 0, "{v}");
    assert!(!at(b"d\xe9").exists());
    std::fs::write(root.join(".gitignore"), "d*\n").unwrap();
    std::fs::write(at(b"d\xe9"), "ignored, in the way").unwrap();
    for json in [false, true] {
        let out = cairn_bytes(&env, json, &[b"rollback", wt, with_dir.as_bytes()]);
        let message = error_message(&out, json);
        assert_eq!(out.status.code(), Some(2), "{message}");
        assert!(message.contains("/d\\351\""), "{message}");
        assert!(!message.contains('\u{fffd}'), "{message}");
    }
    assert_eq!(std::fs::read(at(b"d\xe9")).unwrap(), b"ignored, in the way");
}

/// Onboarding `/` (or checkpointing it) would walk every file system there is: refused as
/// bad input, naming it, before anything is read or registered.
#[test]
fn the_file_system_root_is_never_onboarded() {
    let env = Env::new();
    for args in [&["onboard", "/"][..], &["checkpoint", "/"]] {
        let (code, v) = env.json(args);
        assert_eq!(code, 2, "{args:?}: {v}");
        assert_eq!(v["error"]["code"], "invalid_path", "{args:?}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("/: "), "{args:?}: {message}");
    }
    let (code, v) = env.json(&["worktree", "list"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["worktrees"], serde_json::json!([]), "{v}");
}

/// Every free-text argument has a limit, the same on every face (the engine checks it): a
/// 10 MB snapshot message through MCP once grew the store by 33 MB, and `log --max-count`
/// took 2^64 - 1. Past its limit, an argument is refused naming it and the limit, and
/// nothing is stored.
#[test]
fn arguments_past_their_limits_are_refused_naming_them() {
    let env = Env::new();
    let wt = env.path().join("wt");
    write(&wt, &[("a.txt", "a\n")]);
    let (code, v) = env.json(&["onboard", wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    std::fs::write(wt.join("a.txt"), "b\n").unwrap();
    let store_file = env.store().join("store.redb");
    let before = std::fs::metadata(&store_file).unwrap().len();

    let message = "m".repeat(cairn_engine::limits::MAX_MESSAGE_CHARS + 1);
    let (code, v) = env.json(&["snapshot", wt.as_str(), "-m", &message]);
    assert_eq!(code, 2, "{v}");
    assert_eq!(v["error"]["code"], "too_large", "{v}");
    let said = v["error"]["message"].as_str().unwrap();
    assert!(said.contains("message") && said.contains("65536"), "{said}");
    assert_eq!(std::fs::metadata(&store_file).unwrap().len(), before);
    let (code, v) = env.json(&["log", wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        v["snapshots"].as_array().unwrap().len(),
        1,
        "nothing stored: {v}"
    );

    let long_name = "n".repeat(cairn_engine::limits::MAX_TEXT_CHARS + 1);
    let (code, v) = env.json(&["checkpoint", wt.as_str(), "--name", &long_name]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (2, Some("too_large")),
        "{v}"
    );
    assert!(
        v["error"]["message"].as_str().unwrap().contains("name"),
        "{v}"
    );

    let (code, v) = env.json(&["log", wt.as_str(), "--max-count", &u64::MAX.to_string()]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (2, Some("too_large")),
        "{v}"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_count"),
        "{v}"
    );

    // At its limit, a message is taken.
    let message = "m".repeat(cairn_engine::limits::MAX_MESSAGE_CHARS);
    let (code, v) = env.json(&["snapshot", wt.as_str(), "-m", &message]);
    assert_eq!(code, 0, "{v}");
}

/// A directory whose name is longer than the file system takes (`ENAMETOOLONG`) is the
/// caller's bad path (exit 2 naming it), not a store or I/O failure: through `cairn serve`
/// exit 3 was a 500, which generated requests found.
#[test]
fn a_name_too_long_for_the_file_system_is_bad_input() {
    let env = Env::new();
    let wt = env.path().join("wt");
    write(&wt, &[("a.txt", "a\n")]);
    let (code, v) = env.json(&["onboard", wt.as_str()]);
    assert_eq!(code, 0, "{v}");
    let snap = v["snapshot"].as_str().unwrap().to_owned();
    let long = env.path().join("n".repeat(300));
    for args in [
        &["checkout", &snap, long.as_str()][..],
        &["checkpoint", long.as_str()],
        &["onboard", long.as_str()],
    ] {
        let (code, v) = env.json(args);
        assert_eq!(code, 2, "{args:?}: {v}");
        assert_eq!(v["error"]["code"], "invalid_path", "{args:?}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains(long.as_str()),
            "{v}"
        );
    }
}

/// A worktree under a folder ~3,000 bytes long holding a file ~2,000 bytes deep: the
/// file's absolute path (~5,000 bytes) is longer than the system takes (`PATH_MAX`), its
/// path in the tree is not. It was skipped as `path-too-long` (and `checkout` refused the
/// snapshot); now `onboard`, `status`, `snapshot` and `checkout` reach it through
/// directory handles.
#[test]
fn a_file_whose_absolute_path_exceeds_path_max_is_captured_reported_and_checked_out() {
    use crate::support::{deep_folder, deep_path, read_beneath, write_beneath};
    let env = Env::new();
    let root = deep_folder(&env.path().join("a"), 3000, 'r');
    let rel = deep_path(2000);
    assert!(
        root.as_str().len() + 1 + rel.len() > 4096,
        "beyond PATH_MAX"
    );
    write(&root, &[("top.txt", "top\n")]);
    write_beneath(&root, &rel, b"deep bytes\n");

    let (code, v) = env.json(&["onboard", root.as_str()]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["skipped"], serde_json::json!([]), "{v}");
    let first = v["snapshot"].as_str().unwrap().to_owned();
    let shown = env.cairn(&["show", &format!("{first}:{rel}")]);
    assert_eq!(shown.stdout, b"deep bytes\n", "{}", stderr(&shown));

    // `status` reports a change to it, with its line counts, and skips nothing.
    write_beneath(&root, &rel, b"changed bytes\n");
    let (code, v) = env.json(&["status", root.as_str()]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["skipped"], serde_json::json!([]), "{v}");
    let modified = v["modified"].as_array().unwrap();
    assert_eq!(modified.len(), 1, "{v}");
    assert_eq!(modified[0]["path"], rel.as_str(), "{v}");
    assert_eq!(modified[0]["insertions"], 1, "{v}");

    let (code, v) = env.json(&["snapshot", root.as_str()]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["skipped"], serde_json::json!([]), "{v}");
    let second = v["snapshot"].as_str().unwrap().to_owned();
    let shown = env.cairn(&["show", &format!("{second}:{rel}")]);
    assert_eq!(shown.stdout, b"changed bytes\n", "{}", stderr(&shown));

    // Checked out under another deep folder, it is written, and nothing is left to do.
    let other = deep_folder(&env.path().join("b"), 3000, 'o');
    let (code, v) = env.json(&["checkout", &second, other.as_str()]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(read_beneath(&other, &rel).unwrap(), b"changed bytes\n");
    assert_eq!(std::fs::read(other.join("top.txt")).unwrap(), b"top\n");
    let (code, v) = env.json(&["status", other.as_str()]);
    assert_eq!(code, 0, "{v}");
    for list in ["added", "removed", "modified", "skipped"] {
        assert_eq!(v[list], serde_json::json!([]), "{list}: {v}");
    }
}
