//! A whole agent loop through the API alone, as a harness embedding the engine with its git
//! backend would run it: onboard the user's git repository, check it out for the agent,
//! edit, snapshot, look at the diff, undo a bad step and roll back another, then merge the
//! result into the repository as a commit, checked with the git CLI.

#[path = "../../engine/tests/support/mod.rs"]
mod support;

use cairn_engine::*;
use support::{World, git};

#[test]
fn an_agent_loop_from_onboard_to_merge() {
    let w = world();
    let call = w.call();
    let engine = &w.engine;

    // Turn 1: a good edit, snapshotted.
    std::fs::write(w.work.join("src/lib.rs"), "fn a() { 1 }\n").expect("write");
    let good = engine
        .snapshot(&call, SnapshotOptions::new(&w.work).message("turn 1"))
        .expect("snapshot");
    assert!(good.changed);
    assert_eq!((good.added, good.modified, good.removed), (0, 1, 0));
    let diff = engine
        .diff(&call, DiffOptions::new(&w.base, good.snapshot.to_string()))
        .expect("diff");
    assert_eq!(diff.stats.files, 1);
    assert_eq!(diff.modified[0].path.as_bytes(), b"src/lib.rs");
    assert_eq!((diff.stats.insertions, diff.stats.deletions), (1, 1));

    // Turn 2: a bad edit; undo puts the files back as turn 1 left them.
    std::fs::write(w.work.join("src/lib.rs"), "broken\n").expect("write");
    std::fs::write(w.work.join("junk.txt"), "junk\n").expect("write");
    engine
        .snapshot(&call, SnapshotOptions::new(&w.work).message("turn 2"))
        .expect("snapshot");
    let undone = engine
        .undo(
            &call,
            UndoOptions {
                worktree: Some(w.work.clone()),
            },
        )
        .expect("undo");
    let UndoOutcome::Done(undone) = undone else {
        panic!("nothing was undone: {undone:?}")
    };
    assert!(undone.refused.is_empty(), "{undone:?}");
    assert_eq!(
        std::fs::read_to_string(w.work.join("src/lib.rs")).expect("read"),
        "fn a() { 1 }\n"
    );
    assert!(!w.work.join("junk.txt").exists());

    // Turn 3: another edit, not snapshotted, rolled back to turn 1 (captured first).
    std::fs::write(w.work.join("README"), "scribbled\n").expect("write");
    let rolled = engine
        .rollback(
            &call,
            RollbackOptions {
                worktree: w.work.clone(),
                snapshot: good.snapshot.to_string(),
                ..RollbackOptions::default()
            },
        )
        .expect("rollback");
    assert_eq!(
        rolled.written,
        vec![RepoPathBuf::new("README").expect("a repo path")]
    );
    assert_eq!(
        std::fs::read_to_string(w.work.join("README")).expect("read"),
        "hello\n"
    );
    let status = engine
        .status(
            &call,
            StatusOptions {
                worktree: Some(w.work.clone()),
            },
        )
        .expect("status");
    assert!(status.changes.is_empty(), "{status:?}");

    // Merge turn 1 into the repository, on a new branch.
    let merged = engine
        .merge(
            &call,
            MergeOptions {
                branch: Some("agent".into()),
                message: Some("the agent's work".into()),
                ..MergeOptions::new(good.snapshot.to_string(), &w.repo)
            },
        )
        .expect("merge");
    assert!(merged.merged, "{merged:?}");
    assert_eq!(merged.branch.as_deref(), Some("agent"));
    let commit = merged.commit.expect("a commit");
    assert_eq!(git(&w.repo, &["rev-parse", "agent"]).trim(), commit);
    assert_eq!(
        git(&w.repo, &["show", "agent:src/lib.rs"]),
        "fn a() { 1 }\n"
    );
    assert_eq!(
        git(&w.repo, &["log", "-1", "--format=%s", "agent"]).trim(),
        "the agent's work"
    );
    // The user's branch and files are as they were.
    assert_eq!(git(&w.repo, &["show", "main:src/lib.rs"]), "fn a() {}\n");
    assert_eq!(
        std::fs::read_to_string(w.repo.join("src/lib.rs")).expect("read"),
        "fn a() {}\n"
    );
    assert!(git(&w.repo, &["status", "--porcelain"]).is_empty());
}

/// A world whose engine has the gitoxide backend.
fn world() -> World {
    World::with_engine(|store| {
        Engine::create(store)
            .expect("a store")
            .with_git(cairn_git::Gitoxide)
    })
}
