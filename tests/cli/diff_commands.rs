//! `cairn diff` and `status` against real git on the same pairs of trees.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;

use camino::Utf8Path;

use crate::support::{Env, git, stdout};

fn put(root: &Utf8Path, name: &[u8], content: &[u8]) {
    let p = root.as_std_path().join(OsStr::from_bytes(name));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let _ = std::fs::remove_file(&p);
    std::fs::write(p, content).unwrap();
}

type Change = fn(&Utf8Path);
/// A case: its name, the files before, and the change to make.
type Case = (&'static str, Vec<(&'static [u8], &'static [u8])>, Change);

/// Each case: files before (name, content), then a change to make.
fn cases() -> Vec<Case> {
    vec![
        ("edit", vec![(b"f.txt", b"one\ntwo\nthree\n")], |r| {
            put(r, b"f.txt", b"one\n2\nthree\nfour\n")
        }),
        ("add", vec![(b"keep", b"k\n")], |r| {
            put(r, b"dir/new.txt", b"fresh\nlines\n")
        }),
        (
            "delete",
            vec![(b"gone.txt", b"a\nb\n"), (b"keep", b"k\n")],
            |r| std::fs::remove_file(r.join("gone.txt")).unwrap(),
        ),
        (
            "exact rename",
            vec![
                (b"old-name.txt", b"unique content for the rename\n"),
                (b"keep", b"k\n"),
            ],
            |r| {
                std::fs::rename(r.join("old-name.txt"), r.join("sub/new-name.txt")).unwrap_or_else(
                    |_| {
                        std::fs::create_dir_all(r.join("sub")).unwrap();
                        std::fs::rename(r.join("old-name.txt"), r.join("sub/new-name.txt"))
                            .unwrap();
                    },
                )
            },
        ),
        (
            "exec bit",
            vec![(b"run.sh", b"#!/bin/sh\necho hi\n")],
            |r| {
                std::fs::set_permissions(r.join("run.sh"), std::fs::Permissions::from_mode(0o755))
                    .unwrap()
            },
        ),
        (
            "symlink retarget",
            vec![(b"a", b"a\n"), (b"b", b"b\n")],
            |r| {
                std::fs::remove_file(r.join("link")).unwrap();
                std::os::unix::fs::symlink("b", r.join("link")).unwrap();
            },
        ),
        (
            "binary",
            vec![(b"blob.bin", b"\x00\x01\x02binary\x00")],
            |r| put(r, b"blob.bin", b"\x00\x01\x02binary, longer now\x00\xff"),
        ),
        (
            "no trailing newline",
            vec![(b"tail.txt", b"line one\nline two")],
            |r| put(r, b"tail.txt", b"line one\nline 2"),
        ),
        ("crlf", vec![(b"dos.txt", b"a\r\nb\r\nc\r\n")], |r| {
            put(r, b"dos.txt", b"a\r\nB\r\nc\r\nd\r\n")
        }),
        ("empty files", vec![(b"keep", b"k\n")], |r| {
            put(r, b"empty", b"");
            put(r, b"keep", b"");
        }),
        ("non-UTF-8 and quoted names", vec![(b"keep", b"k\n")], |r| {
            put(r, b"caf\xe9.txt", b"latin-1 name\n");
            put(r, "na\u{ef}ve \"q\".txt".as_bytes(), b"utf-8 name\n");
            put(r, b"back\\slash", b"backslash\n");
        }),
        (
            "file becomes symlink",
            vec![(b"target", b"t\n"), (b"was-file", b"plain\n")],
            |r| {
                std::fs::remove_file(r.join("was-file")).unwrap();
                std::os::unix::fs::symlink("target", r.join("was-file")).unwrap();
            },
        ),
        (
            "many",
            vec![
                (b"a.c", b"int a;\n"),
                (b"b.c", b"int b;\n"),
                (b"lib/c.c", b"int c;\n"),
            ],
            |r| {
                put(r, b"a.c", b"int a = 1;\nint aa;\n");
                std::fs::remove_file(r.join("b.c")).unwrap();
                put(r, b"lib/d.c", &b"x\n".repeat(120));
                put(r, b"lib/c.c", b"");
            },
        ),
    ]
}

fn setup(
    env: &Env,
    name: &str,
    files: &[(&[u8], &[u8])],
    change: Change,
) -> (camino::Utf8PathBuf, String, String) {
    let root = env.path().join(name.replace(' ', "-"));
    std::fs::create_dir_all(&root).unwrap();
    git(&root, &["init", "-q"]);
    for (n, c) in files {
        put(&root, n, c);
    }
    if name == "symlink retarget" {
        std::os::unix::fs::symlink("a", root.join("link")).unwrap();
    }
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-qm", "before"]);
    let (code, v) = env.json(&["onboard", root.as_str()]);
    assert_eq!(code, 0, "{v}");
    let before = v["snapshot"].as_str().unwrap().to_owned();
    change(&root);
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-qm", "after"]);
    let (code, v) = env.json(&["snapshot", root.as_str()]);
    assert_eq!(code, 0, "{v}");
    (root, before, v["snapshot"].as_str().unwrap().to_owned())
}

#[test]
fn name_status_and_stat_match_git_byte_for_byte() {
    let env = Env::new();
    for (name, files, change) in cases() {
        let (root, before, after) = setup(&env, name, &files, change);
        for flag in ["--name-status", "--stat"] {
            let expected = git(&root, &["diff", flag, "HEAD~1", "HEAD"]);
            let out = env.cairn(&["diff", &before, &after, flag]);
            assert_eq!(out.status.code(), Some(0));
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&expected),
                "case {name:?}, {flag}"
            );
        }
    }
}

#[test]
fn patches_apply_with_git() {
    let env = Env::new();
    for (name, files, change) in cases() {
        if matches!(
            name,
            "binary" | "exec bit" | "symlink retarget" | "file becomes symlink"
        ) {
            continue; // no text hunks to check
        }
        let (root, before, after) = setup(&env, name, &files, change);
        let patch = env.cairn(&["diff", &before, &after]).stdout;
        // `--json -p` carries each file's hunks exactly as the patch prints them.
        let (code, v) = env.json(&["diff", "-p", &before, &after]);
        assert_eq!(code, 0, "{v}");
        let hunks: Vec<&str> = ["added", "removed", "modified"]
            .iter()
            .flat_map(|group| v[group].as_array().unwrap())
            .filter_map(|c| c["patch"].as_str())
            .collect();
        let printed = String::from_utf8_lossy(&patch);
        assert_eq!(
            hunks.is_empty(),
            !printed.contains("\n@@ "),
            "case {name:?}: {v}"
        );
        for h in hunks {
            assert!(
                h.starts_with("@@ ") && printed.contains(h),
                "case {name:?}: {h:?} not in {printed}"
            );
        }
        let (_, v) = env.json(&["diff", &before, &after]);
        assert!(!v.to_string().contains("\"patch\""), "{v}");
        let target = String::from_utf8(git(&root, &["rev-parse", "HEAD"]))
            .unwrap()
            .trim()
            .to_owned();
        git(&root, &["checkout", "-q", "HEAD~1"]);
        let mut child = std::process::Command::new("git")
            .args(["-C", root.as_str(), "apply", "--index", "-"])
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(&patch).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "case {name:?}: git apply: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&patch)
        );
        let left = git(&root, &["diff", "--cached", "--name-status", &target]);
        assert!(
            left.is_empty(),
            "case {name:?}: applying the patch leaves {}",
            String::from_utf8_lossy(&left)
        );
    }
}

#[test]
fn diff_of_live_worktrees_filters_exit_codes_and_status() {
    let env = Env::new();
    let w = env.path().join("w");
    put(&w, b"a.txt", b"1\n");
    put(&w, b"src/b.txt", b"2\n");
    let snap = env.json(&["onboard", w.as_str()]).1["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, v) = env.json(&["diff", &snap, w.as_str(), "--exit-code"]);
    assert_eq!(code, 0, "no changes: {v}");
    assert_eq!(v["stats"]["files"], 0);

    put(&w, b"a.txt", b"1\nmore\n");
    put(&w, b"src/b.txt", b"changed\n");
    let (code, v) = env.json(&["diff", &snap, w.as_str(), "--exit-code"]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["modified"].as_array().unwrap().len(), 2);
    assert_eq!(
        v["stats"],
        serde_json::json!({ "files": 2, "insertions": 2, "deletions": 1 })
    );
    // Nothing was written: the live diff stores no snapshot.
    let (_, log) = env.json(&["log", w.as_str()]);
    assert_eq!(log["snapshots"].as_array().unwrap().len(), 1);

    let (_, v) = env.json(&["diff", &snap, w.as_str(), "--", "src"]);
    assert_eq!(v["modified"][0]["path"], "src/b.txt");
    assert_eq!(v["modified"].as_array().unwrap().len(), 1);
    let out = env.cairn(&["diff", &snap, w.as_str(), "--name-status", "--", "nowhere"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no changes under nowhere"));

    let out = env.cairn(&["status", w.as_str()]);
    assert_eq!(
        stdout(&out),
        "Modified: a.txt, src/b.txt\n+2 -1 across 2 files\n"
    );
    let out = env.cairn(&["status", w.as_str(), "--short"]);
    assert_eq!(stdout(&out), "[checkpoint: 2 files changed]\n");
    let (code, v) = env.json(&["status", w.as_str()]);
    assert_eq!(code, 0);
    assert_eq!(v["stats"]["files"], 2);

    let (code, v) = env.json(&["diff", "no-such-ref", w.as_str()]);
    assert_eq!((code, v["error"]["code"].as_str()), (2, Some("unknown_id")));
    let plain = env.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let (code, v) = env.json(&["diff", &snap, plain.as_str()]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (2, Some("not_a_worktree"))
    );
}
