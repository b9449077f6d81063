//! `cairn onboard SRC --git REV` against repositories built with the git CLI.

use camino::Utf8Path;

use crate::support::{Env, git, stdout};

fn hex(out: Vec<u8>) -> String {
    String::from_utf8(out).unwrap().trim().to_owned()
}

fn repo(env: &Env) -> camino::Utf8PathBuf {
    let r = env.path().join("repo");
    std::fs::create_dir_all(r.join("src/a")).unwrap();
    git(&r, &["init", "-q"]);
    std::fs::write(r.join("README"), "hello\n").unwrap();
    std::fs::write(r.join("src/a/b.c"), "int b;\n").unwrap();
    std::fs::create_dir_all(r.join("bin")).unwrap();
    std::fs::write(r.join("bin/tool"), "#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(r.join("bin/tool"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("README", r.join("link")).unwrap();
    std::fs::write(r.join(".env"), "TOKEN=committed by mistake\n").unwrap();
    git(&r, &["add", "-A"]);
    // A submodule entry, as `git submodule add` leaves it in the tree.
    let head_like = "0123456789abcdef0123456789abcdef01234567";
    git(
        &r,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{head_like},vendor/lib"),
        ],
    );
    git(&r, &["commit", "-qm", "first"]);
    std::fs::write(r.join("README"), "hello again\n").unwrap();
    git(&r, &["commit", "-qam", "second"]);
    r
}

#[test]
fn a_commit_imports_with_modes_links_and_nothing_registered() {
    let env = Env::new();
    let r = repo(&env);
    let first = hex(git(&r, &["rev-parse", "HEAD~1"]));
    let (code, v) = env.json(&[
        "onboard",
        r.as_str(),
        "--git",
        "HEAD~1",
        "--label",
        "origin=git",
    ]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        v["source"],
        serde_json::json!({ "git_commit": first, "dirty": false })
    );
    assert_eq!(v["files"], 4, "{v}");
    let skipped: Vec<(&str, &str)> = v["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["path"].as_str().unwrap(), s["reason"].as_str().unwrap()))
        .collect();
    assert!(
        skipped.contains(&(".env", "denied by pattern .env")),
        "{skipped:?}"
    );
    assert!(
        skipped
            .iter()
            .any(|(p, r)| *p == "vendor/lib" && r.contains("submodule")),
        "{skipped:?}"
    );
    let snap = v["snapshot"].as_str().unwrap().to_owned();

    // Every imported file matches git, byte for byte, with its mode.
    for (path, kind) in [
        ("README", "file"),
        ("src/a/b.c", "file"),
        ("bin/tool", "executable"),
        ("link", "symlink"),
    ] {
        let ours = env.cairn(&["show", &format!("{snap}:{path}")]).stdout;
        let theirs = git(&r, &["cat-file", "-p", &format!("HEAD~1:{path}")]);
        assert_eq!(ours, theirs, "{path}");
        let dir = Utf8Path::new(path)
            .parent()
            .map(|p| p.as_str())
            .unwrap_or("");
        let (_, listing) = env.json(&["show", &format!("{snap}:{dir}")]);
        let name = Utf8Path::new(path).file_name().unwrap();
        let entry = listing["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap()
            .clone();
        assert_eq!(entry["kind"], kind, "{path}");
    }
    assert_eq!(
        env.json(&["worktree", "list"]).1["worktrees"],
        serde_json::json!([])
    );
    let (_, log) = env.json(&["log", &snap]);
    assert_eq!(
        log["snapshots"][0]["labels"],
        serde_json::json!(["origin=git"])
    );
    // Kept alive for gc, though no worktree or ref names it.
    assert_eq!(env.json(&["gc"]).0, 0);
    assert_eq!(
        env.cairn(&["show", &format!("{snap}:README")]).stdout,
        b"hello\n"
    );
    // With --include-denied the secret comes along.
    let (_, v) = env.json(&["onboard", r.as_str(), "--git", "HEAD", "--include-denied"]);
    assert_eq!(v["files"], 5, "{v}");
    assert_eq!(
        stdout(&env.cairn(&[
            "show",
            &format!("{}:README", v["snapshot"].as_str().unwrap())
        ])),
        "hello again\n"
    );
}

#[test]
fn bad_revisions_repositories_and_names_are_refused() {
    let env = Env::new();
    let r = repo(&env);
    let (code, v) = env.json(&["onboard", r.as_str(), "--git", "no-such-branch"]);
    assert_eq!(code, 2, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no-such-branch")
    );
    let plain = env.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let (code, v) = env.json(&["onboard", plain.as_str(), "--git", "HEAD"]);
    assert_eq!(code, 2, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains(plain.as_str())
    );

    // A commit whose tree names a path with a control byte is refused whole.
    let blob = hex(git(&r, &["hash-object", "-w", "README"]));
    git(
        &r,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("100644,{blob},bad\x01name"),
        ],
    );
    git(&r, &["commit", "-qm", "bad name"]);
    let (code, v) = env.json(&["onboard", r.as_str(), "--git", "HEAD"]);
    assert_eq!(code, 2, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("bad") && message.contains("control"),
        "{message}"
    );
}
