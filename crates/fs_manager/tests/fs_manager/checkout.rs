use cas::{EntryKind, PreparedBlob, Snapshot, Tree, TreeEntry, WriteBatch};
use fs_manager::{CaptureOptions, CheckoutError, WorktreeCheckoutOptions, WorktreeOnboardOptions};

use crate::support::*;
use fs_manager::RegistryRead as _;

#[test]
fn a_non_empty_destination_is_refused_and_untouched() {
    let env = Env::new();
    let src = env.path("src");
    write_tree(&src, &[("a", file("1"))]);
    let snap = env
        .worktrees
        .onboard(&env.store, &src, &WorktreeOnboardOptions::default())
        .unwrap()
        .snapshot;
    let dest = env.path("dest");
    write_tree(&dest, &[("mine.txt", file("not yours"))]);
    let before = disk(&dest, &[]);
    let err = env
        .worktrees
        .checkout(&env.store, snap, &dest, &WorktreeCheckoutOptions::default())
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
            &WorktreeCheckoutOptions::default(),
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
        .onboard(&env.store, &src, &WorktreeOnboardOptions::default())
        .unwrap()
        .snapshot;
    let dest = env.path("agent");
    env.worktrees
        .checkout(&env.store, snap, &dest, &WorktreeCheckoutOptions::default())
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
            &WorktreeCheckoutOptions::default(),
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
        .onboard(&env.store, &src, &WorktreeOnboardOptions::default())
        .unwrap()
        .snapshot;
    let size = || std::fs::metadata(env.store.database_path()).unwrap().len();
    let before = size();
    for i in 0..3 {
        let dest = env.path(&format!("agent-{i}"));
        env.worktrees
            .checkout(&env.store, snap, &dest, &WorktreeCheckoutOptions::default())
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

#[test]
fn a_checked_out_tree_snapshots_unchanged_then_reads_nothing() {
    let env = Env::new();
    let src = env.path("src");
    let mut spec: Vec<(String, Node)> = vec![
        ("top.txt".into(), file("top")),
        ("only/sub/deeper/f.txt".into(), file("deep")),
        ("bin/run.sh".into(), Node::Exec(b"#!/bin/sh\n".to_vec())),
        ("links/a.txt".into(), file("a")),
        ("links/m".into(), Node::Link(b"../top.txt".to_vec())),
        ("links/z.txt".into(), file("z")),
        ("justlinks/l".into(), Node::Link(b"nowhere".to_vec())),
    ];
    for d in 0..30 {
        for f in 0..200 {
            spec.push((format!("many/d{d}/f{f}"), file(&format!("{d} {f}"))));
        }
    }
    let refs: Vec<(&str, Node)> = spec.iter().map(|(p, n)| (p.as_str(), n.clone())).collect();
    write_tree(&src, &refs);
    let onboarded = env
        .worktrees
        .onboard(&env.store, &src, &WorktreeOnboardOptions::default())
        .unwrap();
    let dest = env.path("dest");
    let out = env
        .worktrees
        .checkout(
            &env.store,
            onboarded.snapshot,
            &dest,
            &WorktreeCheckoutOptions::default(),
        )
        .unwrap();
    assert_eq!(out.files, spec.len() as u64);
    assert_eq!(disk(&dest, &[]), disk(&src, &[]));
    // Every directory holding files has its record, and only those (keys: `d`, the path
    // with `/` as NUL).
    let keys: Vec<Vec<u8>> = env
        .store
        .reader()
        .unwrap()
        .file_states(&out.worktree)
        .unwrap()
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    let mut expected: Vec<Vec<u8>> = ["", "bin", "justlinks", "links", "only/sub/deeper"]
        .into_iter()
        .map(String::from)
        .chain((0..30).map(|d| format!("many/d{d}")))
        .map(|d| [b"d".as_slice(), &d.replace('/', "\0").into_bytes()].concat())
        .collect();
    expected.sort();
    assert_eq!(keys, expected);

    settle();
    let first = env
        .worktrees
        .snapshot(&env.store, &dest, &CaptureOptions::default())
        .unwrap();
    assert!(!first.changed);
    assert_eq!(first.tree, onboarded.tree);
    assert!(
        first.read_files < out.files,
        "the cache was trusted: {} of {} files read",
        first.read_files,
        out.files
    );
    let again = env
        .worktrees
        .snapshot(&env.store, &dest, &CaptureOptions::default())
        .unwrap();
    assert_eq!(again.read_files, 0);
}

/// A refused path deep in a tree whose other files come first: nothing is written, an
/// existing empty destination stays, a missing one is not made, and the error names the
/// first refused path in tree order.
#[test]
fn a_refused_path_deep_in_the_tree_leaves_the_destination_untouched() {
    let env = Env::new();
    let mut batch = WriteBatch::new();
    let blob = batch.add_blob(PreparedBlob::new(b"body"));
    let file_entry = |name: &str| TreeEntry {
        name: name.as_bytes().to_vec(),
        kind: EntryKind::File,
        id: blob.into(),
        size: 4,
    };
    // `d/d/…/leaf`, 2100 levels down; `z` beside the chain 2060 levels down is refused too,
    // and is found first, but comes later in tree order.
    let mut entry = file_entry("leaf");
    for level in (0..2100).rev() {
        let mut entries = vec![entry];
        if level == 2060 {
            entries.push(file_entry("z"));
        }
        let id = batch.add_tree(Tree::new(entries).unwrap());
        entry = TreeEntry {
            name: b"d".to_vec(),
            kind: EntryKind::Tree,
            id: id.into(),
            size: 4,
        };
    }
    let mut top = vec![file_entry("a.txt"), entry];
    top.extend((0..50).map(|i| file_entry(&format!("f{i}"))));
    top.sort_by(|a, b| a.name.cmp(&b.name));
    let root = batch.add_tree(Tree::new(top).unwrap());
    let snap = batch.add_snapshot(Snapshot {
        tree: root,
        parents: vec![],
        created: jiff::Timestamp::now(),
        message: "deep".into(),
        labels: Default::default(),
        source: None,
    });
    env.store.write(&batch).unwrap();

    let empty = env.path("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let missing = env.path("missing");
    for dest in [&empty, &missing] {
        let err = env
            .worktrees
            .checkout(&env.store, snap, dest, &WorktreeCheckoutOptions::default())
            .unwrap_err();
        let CheckoutError::Refused { path, .. } = &err else {
            panic!("not refused: {err}");
        };
        assert!(path.starts_with(dest), "{}", path.display());
        assert!(path.ends_with("d/leaf"), "{}", path.display());
    }
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
    assert!(!missing.exists(), "checkout made its destination");
    let reader = env.store.reader().unwrap();
    assert!(reader.worktree(&empty).unwrap().is_none());
    assert!(reader.journal(&empty).unwrap().is_none());
}
