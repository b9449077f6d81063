use fs_manager::{
    CaptureOptions, RollbackError, WorktreeCheckoutOptions, WorktreeOnboardOptions,
    WorktreeRollbackOptions,
};

use crate::support::*;

fn setup(env: &Env) -> (camino::Utf8PathBuf, cas::SnapshotId) {
    let root = env.path("w");
    write_tree(
        &root,
        &[
            ("keep.txt", file("unchanged")),
            ("edit.txt", file("original")),
            ("delete-me.txt", file("will be deleted")),
            ("script.sh", file("#!/bin/sh\n")),
            ("becomes-dir", file("a file first")),
            ("dir-becomes-file/inner.txt", file("inner")),
            ("link", Node::Link(b"keep.txt".to_vec())),
            ("file-becomes-link", file("plain")),
            ("src/lib.rs", file("pub fn f() {}")),
            (".gitignore", file("*.log\n")),
        ],
    );
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    let snap = env
        .worktrees
        .onboard(&env.store, &root, &WorktreeOnboardOptions::default())
        .unwrap()
        .snapshot;
    (root, snap)
}

fn mess_up(root: &camino::Utf8Path) {
    std::fs::write(root.join("edit.txt"), "edited by an agent").unwrap();
    std::fs::remove_file(root.join("delete-me.txt")).unwrap();
    std::fs::write(root.join("created.txt"), "new file").unwrap();
    std::fs::create_dir_all(root.join("new/deep")).unwrap();
    std::fs::write(root.join("new/deep/x"), "x").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        root.join("script.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::remove_file(root.join("becomes-dir")).unwrap();
    std::fs::create_dir_all(root.join("becomes-dir")).unwrap();
    std::fs::write(root.join("becomes-dir/f"), "now a dir").unwrap();
    std::fs::remove_dir_all(root.join("dir-becomes-file")).unwrap();
    std::fs::write(root.join("dir-becomes-file"), "now a file").unwrap();
    std::fs::remove_file(root.join("link")).unwrap();
    std::fs::write(root.join("link"), "link became a file").unwrap();
    std::fs::remove_file(root.join("file-becomes-link")).unwrap();
    std::os::unix::fs::symlink("edit.txt", root.join("file-becomes-link")).unwrap();
    std::fs::write(root.join("debug.log"), "ignored, must survive").unwrap();
}

#[test]
fn rollback_restores_exactly_the_snapshot_and_spares_ignored_files_and_git() {
    let env = Env::new();
    let (root, snap) = setup(&env);
    mess_up(&root);
    let live_before = disk(&root, &[".git", "debug.log"]);

    let dry = env
        .worktrees
        .rollback(
            &env.store,
            &root,
            snap,
            &WorktreeRollbackOptions {
                dry_run: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(
        disk(&root, &[".git", "debug.log"]),
        live_before,
        "a dry run changes nothing"
    );
    assert!(dry.written.contains(&repo("edit.txt")));
    assert!(dry.deleted.contains(&repo("created.txt")));

    let out = env
        .worktrees
        .rollback(&env.store, &root, snap, &WorktreeRollbackOptions::default())
        .unwrap();
    assert_eq!(out.written, dry.written);
    assert_eq!(out.deleted, dry.deleted);
    assert!(
        !out.written.contains(&repo("keep.txt")),
        "unchanged files are not touched"
    );
    assert_eq!(
        disk(&root, &[".git", "debug.log"]),
        snapshot_files(&env.store, snap)
    );
    assert_eq!(
        std::fs::read_to_string(root.join("debug.log")).unwrap(),
        "ignored, must survive"
    );
    assert_eq!(
        std::fs::read_to_string(root.join(".git/HEAD")).unwrap(),
        "ref: refs/heads/main\n"
    );
    assert!(
        !root.join("new").exists(),
        "directories emptied by the rollback are removed"
    );

    // The live state was captured first: nothing unsnapshotted is lost.
    assert_ne!(out.captured, snap);
    assert_eq!(snapshot_files(&env.store, out.captured), live_before);
    let head = fs_manager::find_worktree(&env.store.reader().unwrap(), &root)
        .unwrap()
        .unwrap()
        .head;
    assert_eq!(head, Some(snap));
    // And back again, to the captured state.
    env.worktrees
        .rollback(
            &env.store,
            &root,
            out.captured,
            &WorktreeRollbackOptions::default(),
        )
        .unwrap();
    assert_eq!(disk(&root, &[".git", "debug.log"]), live_before);
}

#[test]
fn rollback_of_given_paths_restores_only_those() {
    let env = Env::new();
    let (root, snap) = setup(&env);
    mess_up(&root);
    let paths = vec![repo("edit.txt"), repo("new")];
    let out = env
        .worktrees
        .rollback(
            &env.store,
            &root,
            snap,
            &WorktreeRollbackOptions {
                paths: &paths,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(out.written, vec![repo("edit.txt")]);
    assert_eq!(out.deleted, vec![repo("new/deep/x")]);
    assert_eq!(
        std::fs::read_to_string(root.join("edit.txt")).unwrap(),
        "original"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("created.txt")).unwrap(),
        "new file",
        "not named, not touched"
    );
    // The head is a snapshot of what is now on disk.
    assert_eq!(
        snapshot_files(&env.store, out.snapshot),
        disk(&root, &[".git", "debug.log"])
    );
    let err = env
        .worktrees
        .rollback(
            &env.store,
            &root,
            snap,
            &WorktreeRollbackOptions {
                paths: &[repo("no/such")],
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(matches!(err, RollbackError::NoSuchPath { .. }), "{err}");
}

#[test]
fn planted_symlinks_are_replaced_never_followed() {
    let env = Env::new();
    let outside = env.path("outside");
    write_tree(
        &outside,
        &[
            ("canary.txt", file("must never change")),
            ("lib.rs", file("outside lib")),
        ],
    );
    let canary = disk(&outside, &[]);
    let (root, snap) = setup(&env);
    // The agent swaps src/ for a link to the outside, and edit.txt for a link to the canary.
    std::fs::remove_dir_all(root.join("src")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("src")).unwrap();
    std::fs::remove_file(root.join("edit.txt")).unwrap();
    std::os::unix::fs::symlink(outside.join("canary.txt"), root.join("edit.txt")).unwrap();

    env.worktrees
        .rollback(&env.store, &root, snap, &WorktreeRollbackOptions::default())
        .unwrap();
    assert_eq!(
        disk(&outside, &[]),
        canary,
        "nothing outside the worktree changed"
    );
    assert!(root.join("src").symlink_metadata().unwrap().is_dir());
    assert_eq!(
        disk(&root, &[".git", "debug.log"]),
        snapshot_files(&env.store, snap)
    );
}

#[test]
fn an_ignored_symlink_in_the_way_is_refused_before_anything_changes() {
    let env = Env::new();
    let outside = env.path("outside");
    write_tree(&outside, &[("canary.txt", file("must never change"))]);
    let root = env.path("w");
    write_tree(
        &root,
        &[("logs.d/keep.txt", file("kept")), ("a.txt", file("a"))],
    );
    let snap = env
        .worktrees
        .onboard(&env.store, &root, &WorktreeOnboardOptions::default())
        .unwrap()
        .snapshot;
    // logs.d becomes an ignored symlink to the outside.
    std::fs::remove_dir_all(root.join("logs.d")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("logs.d")).unwrap();
    std::fs::write(root.join(".gitignore"), "logs.d\n").unwrap();
    std::fs::write(root.join("a.txt"), "changed").unwrap();
    let before = disk(&root, &[]);
    let err = env
        .worktrees
        .rollback(&env.store, &root, snap, &WorktreeRollbackOptions::default())
        .unwrap_err();
    assert!(matches!(err, RollbackError::Blocked { .. }), "{err}");
    assert!(err.to_string().contains("logs.d"), "{err}");
    assert_eq!(disk(&root, &[]), before, "nothing changed");
    assert_eq!(
        disk(&outside, &[]),
        [(b"canary.txt".to_vec(), file("must never change"))].into()
    );
}

#[test]
fn rollback_on_a_checked_out_worktree_and_bad_input() {
    let env = Env::new();
    let (root, snap) = setup(&env);
    let agent = env.path("agent");
    env.worktrees
        .checkout(
            &env.store,
            snap,
            &agent,
            &WorktreeCheckoutOptions::default(),
        )
        .unwrap();
    mess_up(&agent);
    let turn = env
        .worktrees
        .snapshot(&env.store, &agent, &CaptureOptions::default())
        .unwrap();
    env.worktrees
        .rollback(
            &env.store,
            &agent,
            snap,
            &WorktreeRollbackOptions::default(),
        )
        .unwrap();
    assert_eq!(
        disk(&agent, &["debug.log"]),
        snapshot_files(&env.store, snap)
    );
    env.worktrees
        .rollback(
            &env.store,
            &agent,
            turn.snapshot,
            &WorktreeRollbackOptions::default(),
        )
        .unwrap();
    assert_eq!(
        disk(&agent, &["debug.log"]),
        snapshot_files(&env.store, turn.snapshot)
    );

    let err = env
        .worktrees
        .rollback(
            &env.store,
            &env.path("nowhere"),
            snap,
            &WorktreeRollbackOptions::default(),
        )
        .unwrap_err();
    assert!(matches!(err, RollbackError::NotAWorktree { .. }), "{err}");
    let _ = root;
}

#[test]
fn rollback_never_writes_or_deletes_a_secret() {
    let env = Env::new();
    // A snapshot that holds a secret, taken from a worktree that opted in.
    let source = env.path("source");
    write_tree(
        &source,
        &[("app.txt", file("v2")), (".env", file("THEIRS"))],
    );
    let with_secret = env
        .worktrees
        .onboard(
            &env.store,
            &source,
            &WorktreeOnboardOptions {
                include_denied: true,
                ..Default::default()
            },
        )
        .unwrap()
        .snapshot;
    let root = env.path("w");
    write_tree(
        &root,
        &[
            ("app.txt", file("v1")),
            (".env", file("MINE")),
            ("key.pem", file("MINE TOO")),
        ],
    );
    env.worktrees
        .onboard(&env.store, &root, &WorktreeOnboardOptions::default())
        .unwrap();
    let out = env
        .worktrees
        .rollback(
            &env.store,
            &root,
            with_secret,
            &WorktreeRollbackOptions::default(),
        )
        .unwrap();
    assert_eq!(std::fs::read_to_string(root.join("app.txt")).unwrap(), "v2");
    assert_eq!(
        std::fs::read_to_string(root.join(".env")).unwrap(),
        "MINE",
        "not overwritten"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("key.pem")).unwrap(),
        "MINE TOO",
        "not deleted"
    );
    assert_eq!(out.skipped.len(), 1);
    assert_eq!(out.skipped[0].path, b".env");
    assert!(!out.written.contains(&repo(".env")) && !out.deleted.contains(&repo("key.pem")));
}
