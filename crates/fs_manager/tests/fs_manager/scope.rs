use std::os::unix::ffi::OsStrExt;

use fs_manager::{CaptureOptions, WorktreeOnboardOptions};
use fs_manager::{RegistryRead as _, RegistryWrite as _};

use crate::support::*;

#[test]
fn scope_honours_ignore_files_inside_and_only_inside_the_root() {
    let env = Env::new();
    let outer = env.path("outer");
    let root = outer.join("proj");
    write_tree(
        &outer,
        &[
            (".gitignore", file("proj-file-ignored-from-above\n")),
            (
                "proj/proj-file-ignored-from-above",
                file("kept: ignore files above the root do not count"),
            ),
            ("proj/.gitignore", file("*.log\nbuild/\n")),
            ("proj/.ignore", file("secret-notes.txt\n")),
            ("proj/app.log", file("ignored")),
            ("proj/build/out.o", file("ignored")),
            ("proj/secret-notes.txt", file("ignored by .ignore")),
            ("proj/.hidden", file("hidden files are in scope")),
            ("proj/src/main.rs", file("fn main() {}")),
            ("proj/src/.gitignore", file("gen.rs\n")),
            ("proj/src/gen.rs", file("ignored by a nested .gitignore")),
            ("proj/.git/HEAD", file("ref: refs/heads/main\n")),
            ("proj/vendor/.git", file("gitdir: elsewhere\n")),
            ("proj/vendor/lib.rs", file("kept")),
        ],
    );
    let out = env
        .worktrees
        .onboard(&env.store, &root, &WorktreeOnboardOptions::default())
        .unwrap();
    let files = snapshot_files(&env.store, out.snapshot);
    assert_eq!(
        keys(&files),
        [
            ".gitignore",
            ".hidden",
            ".ignore",
            "proj-file-ignored-from-above",
            "src/.gitignore",
            "src/main.rs",
            "vendor/lib.rs"
        ]
    );
    assert!(out.skipped.is_empty(), "{:?}", out.skipped);
}

#[test]
fn git_info_exclude_is_honoured_and_git_state_recorded() {
    let env = Env::new();
    let root = env.path("repo");
    std::fs::create_dir_all(&root).unwrap();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-C",
                root.as_str(),
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(
            ok.status.success(),
            "{}",
            String::from_utf8_lossy(&ok.stderr)
        );
        String::from_utf8(ok.stdout).unwrap()
    };
    git(&["init", "-q"]);
    write_tree(
        &root,
        &[("tracked.txt", file("v1")), ("local.tmp", file("excluded"))],
    );
    std::fs::write(root.join(".git/info/exclude"), "*.tmp\n").unwrap();
    git(&["add", "tracked.txt"]);
    git(&["commit", "-qm", "init"]);
    let head = git(&["rev-parse", "HEAD"]).trim().to_owned();
    std::fs::write(root.join("tracked.txt"), "v2 uncommitted").unwrap();
    // What git says of the directory comes from the caller (cairn asks gitoxide, in
    // merge_back); here the git CLI answers.
    let probe = |dir: &camino::Utf8Path| {
        assert_eq!(dir, root, "asked of the canonical root");
        Some(cas::GitSource {
            commit: git(&["rev-parse", "HEAD"]).trim().to_owned(),
            dirty: !git(&["status", "--porcelain", "--untracked-files=no"]).is_empty(),
        })
    };
    let out = env
        .worktrees
        .onboard(
            &env.store,
            &root,
            &WorktreeOnboardOptions {
                git: Some(&probe),
                ..WorktreeOnboardOptions::default()
            },
        )
        .unwrap();
    let files = snapshot_files(&env.store, out.snapshot);
    assert_eq!(keys(&files), ["tracked.txt"]);
    assert_eq!(
        files[&b"tracked.txt".to_vec()],
        file("v2 uncommitted"),
        "working files are the truth"
    );
    let source = out.source.expect("a git repository");
    assert_eq!(source.commit, head);
    assert!(source.dirty);
}

#[test]
fn special_files_and_refused_names_are_reported_not_dropped_silently() {
    let env = Env::new();
    let root = env.path("w");
    write_tree(&root, &[("ok.txt", file("ok"))]);
    let fifo = root.join("pipe");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(fifo.as_str())
            .status()
            .unwrap()
            .success()
    );
    let bad = root
        .as_std_path()
        .join(std::ffi::OsStr::from_bytes(b"bad\x01name"));
    std::fs::write(&bad, "control character").unwrap();
    let bad_dir = root
        .as_std_path()
        .join(std::ffi::OsStr::from_bytes(b"dir\x02"));
    std::fs::create_dir(&bad_dir).unwrap();
    std::fs::write(bad_dir.join("inner"), "x").unwrap();
    let out = env
        .worktrees
        .onboard(&env.store, &root, &WorktreeOnboardOptions::default())
        .unwrap();
    assert_eq!(keys(&snapshot_files(&env.store, out.snapshot)), ["ok.txt"]);
    let reasons: Vec<String> = out.skipped.iter().map(|s| s.reason.to_string()).collect();
    let skipped: Vec<(Vec<u8>, &str)> = out
        .skipped
        .iter()
        .zip(&reasons)
        .map(|(s, reason)| (s.path.clone(), reason.as_str()))
        .collect();
    assert!(
        skipped
            .iter()
            .any(|(p, r)| p == b"pipe" && r.contains("fifo")),
        "{skipped:?}"
    );
    assert!(
        skipped
            .iter()
            .any(|(p, r)| p == b"bad\x01name" && r.contains("control")),
        "{skipped:?}"
    );
    assert!(skipped.iter().any(|(p, _)| p == b"dir\x02"), "{skipped:?}");
}

/// A folder holding the store's folder (a project with its `.cairn` in it) is never a
/// worktree: a capture of it would take in the live database, a rollback write over it.
/// Onboarding it is refused before anything is read, naming both; nothing is recorded.
#[test]
fn a_folder_holding_the_store_is_never_a_worktree() {
    let dir = tempfile::tempdir().unwrap();
    let root = camino::Utf8Path::from_path(dir.path()).unwrap().to_owned();
    let store_root = root.join(".cairn");
    let store = cas::Store::open(
        &store_root,
        &cas::OpenOptions {
            create: true,
            ..Default::default()
        },
    )
    .unwrap();
    write_tree(&root, &[("a.txt", file("a"))]);
    let err = fs_manager::Worktrees::new()
        .onboard(&store, &root, &WorktreeOnboardOptions::default())
        .unwrap_err();
    assert!(
        matches!(
            &err,
            fs_manager::CaptureError::StoreOverlap(fs_manager::StoreOverlap {
                overlap: fs_manager::Overlap::HoldsTheStore,
                ..
            })
        ),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains(root.as_str()) && message.contains(store_root.as_str()),
        "{message}"
    );
    assert!(fs_manager::list_worktrees(&store).unwrap().is_empty());
    let stored = store.fsck(&cas::StoreFsckOptions::default(), &[]).unwrap();
    assert_eq!((stored.snapshots, stored.blobs), (0, 0), "nothing captured");
}

#[test]
fn sequential_and_parallel_walks_give_the_same_tree() {
    let env = Env::new();
    let root = env.path("many");
    let mut spec = Vec::new();
    for d in 0..12 {
        for f in 0..25 {
            spec.push((
                format!("d{d}/sub{}/f{f}.txt", f % 3),
                file(&format!("{d}-{f}")),
            ));
        }
    }
    spec.push(("a-b".into(), file("sorts between a and a/ on purpose")));
    spec.push(("a/x".into(), file("x")));
    spec.push(("a.b/y".into(), Node::Link(b"../a/x".to_vec())));
    let spec: Vec<(&str, Node)> = spec.iter().map(|(n, c)| (n.as_str(), c.clone())).collect();
    write_tree(&root, &spec);
    let seq = env
        .worktrees
        .onboard(
            &env.store,
            &root,
            &WorktreeOnboardOptions {
                capture: CaptureOptions {
                    threads: 1,
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .unwrap();
    let other = Env::new();
    let par = other
        .worktrees
        .onboard(
            &other.store,
            &root,
            &WorktreeOnboardOptions {
                capture: CaptureOptions {
                    threads: 4,
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(seq.tree, par.tree);
    assert_eq!(seq.files, 303);
}

/// Every mutation, then a cached snapshot must equal an uncached capture of the same files
/// (a fresh store onboarding them), including after edits to ignore rules at any depth.
#[test]
fn cached_scans_agree_with_fresh_scans() {
    let env = Env::new();
    let root = env.path("w");
    let mut spec = Vec::new();
    for d in 0..4 {
        for s in 0..3 {
            for f in 0..4 {
                spec.push((format!("d{d}/s{s}/f{f}.txt"), file(&format!("{d}{s}{f}"))));
            }
        }
    }
    let spec: Vec<(&str, Node)> = spec.iter().map(|(n, c)| (n.as_str(), c.clone())).collect();
    write_tree(&root, &spec);
    env.worktrees
        .onboard(&env.store, &root, &WorktreeOnboardOptions::default())
        .unwrap();

    type Step = fn(&camino::Utf8Path);
    let steps: Vec<(&str, Step)> = vec![
        ("nothing", |_| {}),
        ("edit in place", |r| {
            std::fs::write(r.join("d1/s1/f1.txt"), "changed").unwrap()
        }),
        ("create file", |r| {
            std::fs::write(r.join("d2/s0/new.txt"), "new").unwrap()
        }),
        ("delete file", |r| {
            std::fs::remove_file(r.join("d3/s2/f3.txt")).unwrap()
        }),
        ("create dir", |r| {
            std::fs::create_dir_all(r.join("d0/s0/deep/er")).unwrap();
            std::fs::write(r.join("d0/s0/deep/er/x"), "x").unwrap();
        }),
        ("remove dir", |r| {
            std::fs::remove_dir_all(r.join("d2/s1")).unwrap()
        }),
        ("rename dir", |r| {
            std::fs::rename(r.join("d1/s2"), r.join("d1/s9")).unwrap()
        }),
        ("nested gitignore created", |r| {
            std::fs::write(r.join("d0/.gitignore"), "f1.txt\n").unwrap()
        }),
        ("nested gitignore edited in place", |r| {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(r.join("d0/.gitignore"))
                .unwrap();
            f.write_all(b"f2.txt\n").unwrap();
        }),
        ("negation deeper", |r| {
            std::fs::write(r.join("d0/s1/.gitignore"), "!f1.txt\n").unwrap()
        }),
        ("ignore file removed", |r| {
            std::fs::remove_file(r.join("d0/.gitignore")).unwrap()
        }),
        ("root .ignore", |r| {
            std::fs::write(r.join(".ignore"), "s0/\n").unwrap()
        }),
        ("root .ignore emptied in place", |r| {
            std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(r.join(".ignore"))
                .unwrap();
        }),
        ("file becomes symlink", |r| {
            std::fs::remove_file(r.join("d3/s0/f0.txt")).unwrap();
            std::os::unix::fs::symlink("f1.txt", r.join("d3/s0/f0.txt")).unwrap();
        }),
        ("exec bit", |r| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(
                r.join("d3/s1/f1.txt"),
                std::fs::Permissions::from_mode(0o755),
            )
            .unwrap();
        }),
    ];
    for (name, step) in steps {
        step(&root);
        settle();
        let cached = env
            .worktrees
            .snapshot(&env.store, &root, &CaptureOptions::default())
            .unwrap();
        let fresh = Env::new();
        let expect = fresh
            .worktrees
            .onboard(&fresh.store, &root, &WorktreeOnboardOptions::default())
            .unwrap();
        assert_eq!(cached.tree, expect.tree, "after {name}");
        // Once more with everything settled: the fast path proper.
        settle();
        let again = env
            .worktrees
            .snapshot(&env.store, &root, &CaptureOptions::default())
            .unwrap();
        assert_eq!(again.tree, expect.tree, "again after {name}");
        assert_eq!(
            again.read_files, 0,
            "after {name}, a settled tree reads nothing"
        );
    }
}

/// A damaged or foreign cache costs time, never correctness.
#[test]
fn a_damaged_cache_never_changes_what_is_captured() {
    let env = Env::new();
    let root = env.path("w");
    write_tree(
        &root,
        &[
            ("a/x", file("1")),
            ("a/y", file("2")),
            ("b/z", file("3")),
            ("top", file("4")),
        ],
    );
    settle();
    let first = env
        .worktrees
        .onboard(&env.store, &root, &WorktreeOnboardOptions::default())
        .unwrap();
    let worktree = fs_manager::find_worktree(&env.store.reader().unwrap(), &root)
        .unwrap()
        .unwrap()
        .root;
    let flip: fn(&mut Vec<u8>) = |v| {
        let mid = v.len() / 2;
        v[mid] ^= 0x10;
    };
    let cut: fn(&mut Vec<u8>) = |v| v.truncate(v.len().saturating_sub(9));
    let wipe: fn(&mut Vec<u8>) = |v| v.clear();
    for damage in [flip, cut, wipe] {
        let states = env.store.reader().unwrap().file_states(&worktree).unwrap();
        assert!(states.len() >= 3);
        let mut batch = cas::WriteBatch::new();
        for (key, mut value) in states {
            damage(&mut value);
            batch.set_file_state(&worktree, &key, Some(value));
        }
        env.store.write(&batch).unwrap();
        let s = env
            .worktrees
            .snapshot(&env.store, &root, &CaptureOptions::default())
            .unwrap();
        assert_eq!(s.tree, first.tree);
        assert!(!s.changed);
    }
    // Valid records under the wrong directories.
    settle();
    let mut states = env.store.reader().unwrap().file_states(&worktree).unwrap();
    states.retain(|(k, _)| k.first() == Some(&b'd'));
    let mut batch = cas::WriteBatch::new();
    for i in 0..states.len() {
        let (key, _) = &states[i];
        let (_, value) = &states[(i + 1) % states.len()];
        batch.set_file_state(&worktree, key, Some(value.clone()));
    }
    env.store.write(&batch).unwrap();
    let s = env
        .worktrees
        .snapshot(&env.store, &root, &CaptureOptions::default())
        .unwrap();
    assert_eq!(s.tree, first.tree);
}

#[test]
fn secrets_stay_out_of_scope_unless_a_worktree_opts_in() {
    let env = Env::new();
    let root = env.path("w");
    write_tree(
        &root,
        &[
            ("src/main.rs", file("fn main() {}")),
            (".env", file("TOKEN=1")),
            ("app/.env.local", file("TOKEN=2")),
            ("certs/server.pem", file("-----BEGIN")),
            ("home/.ssh/config", file("Host *")),
            ("id_rsa", file("private")),
            (".env.example", file("TOKEN=")),
            ("db/app.sqlite", file("rows")),
            (".cairndeny", file("*.sqlite\n!.env.example\n")),
        ],
    );
    let out = env
        .worktrees
        .onboard(&env.store, &root, &WorktreeOnboardOptions::default())
        .unwrap();
    assert_eq!(
        keys(&snapshot_files(&env.store, out.snapshot)),
        [".cairndeny", ".env.example", "src/main.rs"]
    );
    let skipped: Vec<(String, String)> = out
        .skipped
        .iter()
        .map(|s| {
            (
                String::from_utf8_lossy(&s.path).into_owned(),
                s.reason.to_string(),
            )
        })
        .collect();
    for (path, pattern) in [
        (".env", ".env"),
        ("app/.env.local", ".env.*"),
        ("certs/server.pem", "*.pem"),
        ("home/.ssh", ".ssh/"),
        ("id_rsa", "id_rsa*"),
        ("db/app.sqlite", "*.sqlite"),
    ] {
        assert!(
            skipped.contains(&(path.to_owned(), format!("denied by pattern {pattern}"))),
            "{path}: {skipped:?}"
        );
    }
    // The secrets never reached the store.
    assert!(
        !env.store
            .reader()
            .unwrap()
            .has_blob(cas::BlobId::of(b"TOKEN=1"))
            .unwrap()
    );

    let other = Env::new();
    let all = other
        .worktrees
        .onboard(
            &other.store,
            &root,
            &WorktreeOnboardOptions {
                include_denied: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(snapshot_files(&other.store, all.snapshot).contains_key(b".env".as_slice()));

    // Changing the worktree's deny file changes the scope of the next snapshot.
    std::fs::write(root.join(".cairndeny"), "*.sqlite\n!.env.example\n*.rs\n").unwrap();
    settle();
    let s = env
        .worktrees
        .snapshot(&env.store, &root, &CaptureOptions::default())
        .unwrap();
    assert_eq!(
        keys(&snapshot_files(&env.store, s.snapshot)),
        [".cairndeny", ".env.example"]
    );
}

#[test]
fn names_that_spell_git_are_skipped_and_reported() {
    let env = Env::new();
    let root = env.path("w");
    write_tree(
        &root,
        &[
            ("ok.txt", file("ok")),
            (".GIT/config", file("[core]")),
            ("sub/git~1", file("x")),
            ("sub/.git.", file("y")),
        ],
    );
    let out = env
        .worktrees
        .onboard(&env.store, &root, &WorktreeOnboardOptions::default())
        .unwrap();
    assert_eq!(keys(&snapshot_files(&env.store, out.snapshot)), ["ok.txt"]);
    let reported: Vec<String> = out
        .skipped
        .iter()
        .map(|s| String::from_utf8_lossy(&s.path).into_owned())
        .collect();
    assert_eq!(reported, [".GIT", "sub/.git.", "sub/git~1"]);
    assert!(
        out.skipped
            .iter()
            .all(|s| s.reason.to_string().contains("spelling of .git")),
        "{:?}",
        out.skipped
    );
}
