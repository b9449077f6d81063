//! The registry, op logs and stat caches in the store's side tables, and what they keep
//! alive through `gc` (moved here from `cas` with the records).

use camino::Utf8Path;
use cas::{
    BlobId, EntryKind, PreparedBlob, Snapshot, SnapshotId, Store, StoreFsckOptions, StoreGcOptions,
    Tree, TreeEntry, WriteBatch,
};
use fs_manager::{
    Checkpoint, OpRecord, Registry, RegistryRead, RegistryWrite, Task, WorktreeKind, WorktreeRecord,
};

use crate::support::Env;

struct TempStore {
    store: Store,
    _dir: tempfile::TempDir,
}

fn temp_store() -> TempStore {
    let Env { dir, store, .. } = Env::new();
    TempStore { store, _dir: dir }
}

fn file_states_version(store: &Store, root: &Utf8Path) -> u64 {
    store.side_version(fs_manager::registry::FILE_STATES, root.as_str())
}

/// Deterministic pseudo-random bytes (incompressible).
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect()
}

/// Stores files `name -> content` as one flat tree and a snapshot; returns the snapshot id.
fn commit(
    store: &Store,
    files: &[(&str, &[u8])],
    parents: Vec<SnapshotId>,
    message: &str,
) -> SnapshotId {
    let mut batch = WriteBatch::new();
    let mut entries = Vec::new();
    for (name, content) in files {
        let id = batch.add_blob(PreparedBlob::new(content));
        entries.push(TreeEntry {
            name: name.as_bytes().to_vec(),
            kind: EntryKind::File,
            id: id.into(),
            size: content.len() as u64,
        });
    }
    let tree = batch.add_tree(Tree::new(entries).unwrap());
    let id = batch.add_snapshot(Snapshot {
        tree,
        parents,
        created: jiff::Timestamp::now(),
        message: message.into(),
        labels: Default::default(),
        source: None,
    });
    store.write(&batch).unwrap();
    id
}

#[test]
fn gc_keeps_what_is_reachable_and_drops_the_rest() {
    let mut t = temp_store();
    let base = commit(
        &t.store,
        &[("shared", b"shared"), ("a", b"base")],
        vec![],
        "base",
    );
    let by_ref = commit(
        &t.store,
        &[("shared", b"shared"), ("a", b"by ref")],
        vec![base],
        "ref",
    );
    let by_head = commit(&t.store, &[("h", b"by head")], vec![], "head");
    let by_op = commit(&t.store, &[("o", b"by op")], vec![], "op");
    let by_checkpoint = commit(&t.store, &[("c", b"by checkpoint")], vec![], "checkpoint");
    let by_baseline = commit(&t.store, &[("b", b"by baseline")], vec![], "baseline");
    let garbage_blob = noise(5, 300_000);
    let garbage = commit(&t.store, &[("g", &garbage_blob)], vec![by_ref], "garbage");
    t.store.set_ref("main", by_ref).unwrap();
    let root = Utf8Path::new("/w");
    let mut batch = WriteBatch::new();
    batch
        .put_worktree(&WorktreeRecord {
            head: Some(by_head),
            checkpoints: vec![Checkpoint {
                name: Some("cp".into()),
                snapshot: by_checkpoint,
                created: jiff::Timestamp::now(),
            }],
            task: Some(Task {
                baseline: by_baseline,
                started: jiff::Timestamp::now(),
            }),
            ..WorktreeRecord::new(root.to_owned(), WorktreeKind::Isolated)
        })
        .unwrap();
    batch
        .append_op(
            Utf8Path::new("/old"),
            &OpRecord::new("rollback", Some(by_op), None),
        )
        .unwrap();
    t.store.write(&batch).unwrap();

    let dry = t
        .store
        .gc(
            &StoreGcOptions {
                dry_run: true,
                max_size: None,
            },
            &[&Registry::default()],
        )
        .unwrap();
    let removed: Vec<_> = dry.removed.iter().map(|(_, id)| *id).collect();
    assert!(removed.contains(&garbage.into()));
    assert!(removed.contains(&BlobId::of(&garbage_blob).into()));
    assert_eq!(
        removed.len(),
        3,
        "snapshot, its tree and its blob: {removed:?}"
    );
    assert!(
        t.store.reader().unwrap().has_snapshot(garbage).unwrap(),
        "dry run removes nothing"
    );

    let out = t
        .store
        .gc(&StoreGcOptions::default(), &[&Registry::default()])
        .unwrap();
    assert_eq!(out.removed.len(), 3);
    assert!(out.bytes_freed >= 300_000);
    let r = t.store.reader().unwrap();
    assert!(!r.has_snapshot(garbage).unwrap());
    assert!(!r.has_blob(BlobId::of(&garbage_blob)).unwrap());
    for s in [base, by_ref, by_head, by_op, by_checkpoint, by_baseline] {
        assert!(r.has_snapshot(s).unwrap(), "{s} is reachable");
    }
    assert_eq!(r.blob(BlobId::of(b"by ref")).unwrap(), b"by ref");
    drop(r);
    assert!(
        t.store
            .fsck(&StoreFsckOptions::default(), &[&Registry::default()])
            .unwrap()
            .problems
            .is_empty()
    );
}

/// Under a size budget every op-log entry is history, except the change `undo` would
/// revert: its states stay, whatever the budget, and those of older changes go.
#[test]
fn a_size_budget_keeps_the_change_undo_would_revert() {
    let mut t = temp_store();
    let [a, b, c, d, e] =
        ["a", "b", "c", "d", "e"].map(|n| commit(&t.store, &[(n, n.as_bytes())], vec![], n));
    let root = Utf8Path::new("/w");
    let mut batch = WriteBatch::new();
    batch
        .append_op(root, &OpRecord::new("snapshot", None, Some(a)))
        .unwrap();
    batch
        .append_op(root, &OpRecord::new("snapshot", Some(a), Some(b)))
        .unwrap();
    batch
        .append_op(root, &OpRecord::new("rewind", Some(c), Some(b)))
        .unwrap();
    // Undone, so `undo` would now revert the rewind.
    batch
        .append_op(root, &OpRecord::new("snapshot", Some(b), Some(d)))
        .unwrap();
    let mut undone = OpRecord::new("undo", Some(d), Some(b));
    undone.undoes = Some(4);
    batch.append_op(root, &undone).unwrap();
    batch
        .put_worktree(&WorktreeRecord::new(
            root.to_owned(),
            WorktreeKind::Isolated,
        ))
        .unwrap();
    // A worktree no longer registered: nothing can undo its changes.
    let gone = Utf8Path::new("/gone");
    batch
        .append_op(gone, &OpRecord::new("snapshot", Some(e), Some(d)))
        .unwrap();
    t.store.write(&batch).unwrap();

    let out = t
        .store
        .gc(
            &StoreGcOptions {
                dry_run: false,
                max_size: Some(1),
            },
            &[&Registry::default()],
        )
        .unwrap();
    let r = t.store.reader().unwrap();
    assert!(r.has_snapshot(c).unwrap() && r.has_snapshot(b).unwrap());
    assert!(!r.has_snapshot(a).unwrap(), "older history goes");
    assert!(
        !r.has_snapshot(e).unwrap(),
        "an unregistered worktree's too"
    );
    let mut undo: Vec<_> = out
        .retained
        .iter()
        .filter(|k| k.keeper.reason == "undo")
        .map(|k| {
            (
                k.snapshot,
                k.keeper.name.as_deref(),
                k.keeper.worktree.as_deref(),
            )
        })
        .collect();
    undo.sort();
    let mut expected = vec![(b, Some("#3"), Some("/w")), (c, Some("#3"), Some("/w"))];
    expected.sort();
    assert_eq!(undo, expected, "its before and after states");
    let ops = r.ops(root).unwrap();
    assert_eq!(
        fs_manager::undo_stacks(&ops).undo.last(),
        Some(&3),
        "{ops:?}"
    );
}

#[test]
fn gc_prunes_old_op_log_entries_first_and_what_only_they_kept() {
    let mut t = temp_store();
    let old = commit(&t.store, &[("o", b"old")], vec![], "old");
    let recent = commit(&t.store, &[("r", b"recent")], vec![], "recent");
    let root = Utf8Path::new("/w");
    let mut batch = WriteBatch::new();
    let mut aged = OpRecord::new("snapshot", None, Some(old));
    aged.time = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(24 * 40);
    batch.append_op(root, &aged).unwrap();
    batch
        .append_op(root, &OpRecord::new("snapshot", Some(old), Some(recent)))
        .unwrap();
    t.store.write(&batch).unwrap();

    let cutoff = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(24 * 30);
    let dry = t
        .store
        .gc(
            &StoreGcOptions {
                dry_run: true,
                max_size: None,
            },
            &[&Registry {
                prune_ops_before: Some(cutoff),
                ..Registry::default()
            }],
        )
        .unwrap();
    assert_eq!(Registry::ops_pruned(&dry.dropped), 1);
    assert_eq!(t.store.reader().unwrap().ops(root).unwrap().len(), 2);
    // The recent entry still names `old` as its before state, so `old` stays.
    let out = t
        .store
        .gc(
            &StoreGcOptions {
                dry_run: false,
                max_size: None,
            },
            &[&Registry {
                prune_ops_before: Some(cutoff),
                ..Registry::default()
            }],
        )
        .unwrap();
    assert_eq!(Registry::ops_pruned(&out.dropped), 1);
    let r = t.store.reader().unwrap();
    let ops = r.ops(root).unwrap();
    assert_eq!(ops.len(), 1);
    assert_eq!(ops[0].after, Some(recent));
    assert!(r.has_snapshot(old).unwrap());
    drop(r);

    // Pruning every entry frees what only the log kept.
    let out = t
        .store
        .gc(
            &StoreGcOptions {
                dry_run: false,
                max_size: None,
            },
            &[&Registry {
                prune_ops_before: Some(jiff::Timestamp::now() + jiff::SignedDuration::from_secs(1)),
                ..Registry::default()
            }],
        )
        .unwrap();
    assert_eq!(Registry::ops_pruned(&out.dropped), 1);
    let r = t.store.reader().unwrap();
    assert!(!r.has_snapshot(old).unwrap());
    assert!(!r.has_snapshot(recent).unwrap());
}

#[test]
fn registry_and_op_log_round_trip() {
    let t = temp_store();
    let a = commit(&t.store, &[("a", b"1")], vec![], "a");
    let root = Utf8Path::new("/work/agent-1");
    let mut batch = WriteBatch::new();
    batch
        .put_worktree(&WorktreeRecord {
            head: Some(a),
            ..WorktreeRecord::new(root.to_owned(), WorktreeKind::Isolated)
        })
        .unwrap();
    batch
        .append_op(root, &OpRecord::new("checkout", None, Some(a)))
        .unwrap();
    batch
        .append_op(root, &OpRecord::new("snapshot", Some(a), Some(a)))
        .unwrap();
    let out = t.store.write(&batch).unwrap();
    assert_eq!(out.appended, vec![1, 2]);
    let r = t.store.reader().unwrap();
    assert_eq!(r.worktree(root).unwrap().unwrap().head, Some(a));
    let ops = r.ops(root).unwrap();
    assert_eq!(
        ops.iter()
            .map(|o| (o.seq, o.op.as_str()))
            .collect::<Vec<_>>(),
        vec![(1, "checkout"), (2, "snapshot")]
    );
    assert!(
        r.ops(Utf8Path::new("/work/agent-10")).unwrap().is_empty(),
        "logs are per worktree"
    );
}

#[test]
fn file_states_round_trip_per_worktree() {
    let t = temp_store();
    let (a, b) = (Utf8Path::new("/w/a"), Utf8Path::new("/w/a2"));
    let mut batch = WriteBatch::new();
    batch.set_file_state(a, b"x", Some(vec![1]));
    batch.set_file_state(a, b"dir/y", Some(vec![2]));
    batch.set_file_state(b, b"x", Some(vec![3]));
    t.store.write(&batch).unwrap();
    let r = t.store.reader().unwrap();
    assert_eq!(
        r.file_states(a).unwrap(),
        vec![(b"dir/y".to_vec(), vec![2]), (b"x".to_vec(), vec![1])]
    );
    assert_eq!(r.file_states(b).unwrap().len(), 1);
    drop(r);
    let mut batch = WriteBatch::new();
    batch.set_file_state(a, b"x", None);
    t.store.write(&batch).unwrap();
    assert_eq!(t.store.reader().unwrap().file_states(a).unwrap().len(), 1);
    let mut batch = WriteBatch::new();
    batch.clear_file_states(a);
    t.store.write(&batch).unwrap();
    assert!(t.store.reader().unwrap().file_states(a).unwrap().is_empty());
    assert_eq!(
        t.store.reader().unwrap().file_states(b).unwrap().len(),
        1,
        "other worktrees keep theirs"
    );
}

#[test]
fn file_states_version_follows_writes_to_that_worktree() {
    let t = temp_store();
    let (a, b) = (Utf8Path::new("/w/a"), Utf8Path::new("/w/b"));
    let (a0, b0) = (
        file_states_version(&t.store, a),
        file_states_version(&t.store, b),
    );
    let mut batch = WriteBatch::new();
    batch.set_file_state(a, b"x", Some(vec![1]));
    t.store.write(&batch).unwrap();
    let written = file_states_version(&t.store, a);
    assert_ne!(written, a0);
    assert_eq!(file_states_version(&t.store, b), b0, "b was not written");

    // Writes that touch no file states leave every version alone.
    let snap = commit(&t.store, &[("f", b"x")], vec![], "s");
    let mut batch = WriteBatch::new();
    batch.set_ref("r", snap);
    t.store.write(&batch).unwrap();
    assert_eq!(file_states_version(&t.store, a), written);
    assert_eq!(file_states_version(&t.store, b), b0);

    for change in [
        |batch: &mut WriteBatch, a: &Utf8Path| batch.clear_file_states(a),
        |batch: &mut WriteBatch, a: &Utf8Path| batch.remove_worktree(a),
        |batch: &mut WriteBatch, a: &Utf8Path| batch.set_file_state(a, b"x", None),
    ] {
        let before = file_states_version(&t.store, a);
        let mut batch = WriteBatch::new();
        change(&mut batch, a);
        t.store.write(&batch).unwrap();
        assert_ne!(file_states_version(&t.store, a), before);
    }

    // A refused write may still have changed what was known: a new version too.
    let before = file_states_version(&t.store, a);
    let mut batch = WriteBatch::new();
    batch.set_file_state(a, b"x", Some(vec![2]));
    batch.set_ref("dangling", SnapshotId::from_bytes([7; 32]));
    assert!(t.store.write(&batch).is_err());
    assert_ne!(file_states_version(&t.store, a), before);

    // Another store (or the same one opened again) never reports a version seen here.
    let other = temp_store();
    assert_ne!(
        file_states_version(&other.store, a),
        file_states_version(&t.store, a)
    );
    assert_ne!(file_states_version(&other.store, b), b0);
}

/// A journal that does not decode is refused with the registry's own error as a typed
/// cause (what `recover` reports), not a string made of it.
#[test]
fn an_undecodable_journal_is_refused_with_a_typed_cause() {
    let err = fs_manager::fuzzing::reencode_journal(b"{not json").unwrap_err();
    let fs_manager::fuzzing::JournalError::Decode(cause) = &err else {
        panic!("{err:?}");
    };
    assert!(
        matches!(
            cause,
            fs_manager::RegistryError::Corrupt {
                source: Some(_),
                ..
            }
        ),
        "{cause:?}"
    );
    assert_eq!(err.to_string(), cause.to_string());
    // The decoder's error is kept under the registry's, and says what the message says.
    let json = std::error::Error::source(cause).expect("the JSON error is kept");
    assert!(cause.to_string().ends_with(&json.to_string()), "{cause}");
}
