use fs_manager::{CaptureOptions, CheckoutError, CheckoutOptions, OnboardOptions};

use crate::support::*;
use fs_manager::RegistryRead as _;

#[test]
fn a_non_empty_destination_is_refused_and_untouched() {
    let env = Env::new();
    let src = env.path("src");
    write_tree(&src, &[("a", file("1"))]);
    let snap = env
        .worktrees
        .onboard(&env.store, &src, &OnboardOptions::default())
        .unwrap()
        .snapshot;
    let dest = env.path("dest");
    write_tree(&dest, &[("mine.txt", file("not yours"))]);
    let before = disk(&dest, &[]);
    let err = env
        .worktrees
        .checkout(&env.store, snap, &dest, &CheckoutOptions::default())
        .unwrap_err();
    assert!(matches!(err, CheckoutError::NotEmpty { .. }), "{err}");
    assert!(err.to_string().contains(dest.as_str()));
    assert_eq!(disk(&dest, &[]), before);
    // A file is not a destination either.
    let err = env
        .worktrees
        .checkout(
            &env.store,
            snap,
            &dest.join("mine.txt"),
            &CheckoutOptions::default(),
        )
        .unwrap_err();
    assert!(matches!(err, CheckoutError::NotADirectory { .. }), "{err}");
}

#[test]
fn a_deleted_worktree_folder_can_be_checked_out_again() {
    let env = Env::new();
    let src = env.path("src");
    write_tree(&src, &[("a", file("1")), ("d/b", file("2"))]);
    let snap = env
        .worktrees
        .onboard(&env.store, &src, &OnboardOptions::default())
        .unwrap()
        .snapshot;
    let dest = env.path("agent");
    env.worktrees
        .checkout(&env.store, snap, &dest, &CheckoutOptions::default())
        .unwrap();
    std::fs::write(dest.join("a"), "edited").unwrap();
    let edited = env
        .worktrees
        .snapshot(&env.store, &dest, &CaptureOptions::default())
        .unwrap();
    std::fs::remove_dir_all(&dest).unwrap();
    let again = env
        .worktrees
        .checkout(
            &env.store,
            edited.snapshot,
            &dest,
            &CheckoutOptions::default(),
        )
        .unwrap();
    assert_eq!(again.snapshot, edited.snapshot);
    assert_eq!(
        disk(&dest, &[]),
        snapshot_files(&env.store, edited.snapshot)
    );
    let ops = env.store.reader().unwrap().ops(&again.worktree).unwrap();
    assert_eq!(
        ops.iter().map(|o| o.op.as_str()).collect::<Vec<_>>(),
        ["checkout", "snapshot", "checkout"]
    );
}

#[test]
fn multiple_worktrees_share_and_dedupe_content() {
    let env = Env::new();
    let src = env.path("src");
    let big: Vec<u8> = (0..500_000u32)
        .map(|i| (i.wrapping_mul(7919) % 256) as u8)
        .collect();
    write_tree(&src, &[("big", Node::File(big))]);
    let snap = env
        .worktrees
        .onboard(&env.store, &src, &OnboardOptions::default())
        .unwrap()
        .snapshot;
    let size = || std::fs::metadata(env.store.database_path()).unwrap().len();
    let before = size();
    for i in 0..3 {
        let dest = env.path(&format!("agent-{i}"));
        env.worktrees
            .checkout(&env.store, snap, &dest, &CheckoutOptions::default())
            .unwrap();
        env.worktrees
            .snapshot(&env.store, &dest, &CaptureOptions::default())
            .unwrap();
    }
    assert_eq!(fs_manager::list_worktrees(&env.store).unwrap().len(), 4);
    assert!(
        size() < before + 400_000,
        "content is stored once: {} -> {}",
        before,
        size()
    );
}
