//! Format 1 stores, which kept their callers' records in tables of their own, open as
//! format 2 with every record moved into the side tables their owners declare (and then
//! as format 3); format 2 stores read as they are.

use camino::Utf8Path;
use cas::*;
use redb::{ReadableDatabase, TableDefinition};

use crate::util::{commit, temp_store};

const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const WORKTREES: TableDefinition<&str, &[u8]> = TableDefinition::new("worktrees");
const OPLOG: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("oplog");
const FILE_STATES: TableDefinition<(&str, &[u8]), &[u8]> = TableDefinition::new("file_states");
const GIT_OIDS: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("git_oids");
const JOURNALS_1: TableDefinition<&str, &[u8]> = TableDefinition::new("journals");

// Where the layers above declare format 1's tables went (`fs_manager`, `merge_back`).
const FORMAT_1_WORKTREES: SideTable = SideTable::new("fs.worktrees");
const FORMAT_1_OPLOG: SideTable = SideTable::new("fs.oplog");
const FORMAT_1_FILE_STATES: SideTable = SideTable::new("fs.file_states");
const FORMAT_1_GIT_OIDS: SideTable = SideTable::keyed_by_object("git.oids");

/// Options that give open every owner's format 1 tables.
fn with_owners(options: OpenOptions) -> OpenOptions {
    let moves = [
        ("worktrees", Format1Keys::Scope, FORMAT_1_WORKTREES),
        ("oplog", Format1Keys::Sequence, FORMAT_1_OPLOG),
        (
            "file_states",
            Format1Keys::ScopedBytes,
            FORMAT_1_FILE_STATES,
        ),
        ("git_oids", Format1Keys::Object, FORMAT_1_GIT_OIDS),
    ];
    OpenOptions {
        format_1_tables: moves
            .into_iter()
            .map(|(name, keys, now)| Format1Table { name, keys, now })
            .collect(),
        ..options
    }
}

/// A store as format 1 left it, closed: objects, plus every record table format 1 had.
fn format_1_store(with_journal: bool) -> (tempfile::TempDir, camino::Utf8PathBuf, SnapshotId) {
    let t = temp_store();
    let snap = commit(&t.store, &[("a", b"alpha")], vec![], "m");
    let db_path = t.root.join(DATABASE_FILE);
    drop(t.store);
    let db = redb::Database::open(db_path.as_std_path()).unwrap();
    let txn = db.begin_write().unwrap();
    {
        txn.open_table(META)
            .unwrap()
            .insert("format_version", 1)
            .unwrap();
        let mut w = txn.open_table(WORKTREES).unwrap();
        w.insert("/w/one", br#"{"root":"/w/one"}"#.as_slice())
            .unwrap();
        w.insert("/w/two", br#"{"root":"/w/two"}"#.as_slice())
            .unwrap();
        let mut ops = txn.open_table(OPLOG).unwrap();
        for seq in 1..=3u64 {
            ops.insert(("/w/one", seq), format!("op {seq}").as_bytes())
                .unwrap();
        }
        ops.insert(("/w/two", 1), b"op of two".as_slice()).unwrap();
        let mut states = txn.open_table(FILE_STATES).unwrap();
        states
            .insert(("/w/one", b"d:src".as_slice()), b"state".as_slice())
            .unwrap();
        txn.open_table(GIT_OIDS)
            .unwrap()
            .insert(snap.as_bytes(), [9u8; 20].as_slice())
            .unwrap();
        if with_journal {
            txn.open_table(JOURNALS_1)
                .unwrap()
                .insert("/w/one", br#"{"op":"rollback"}"#.as_slice())
                .unwrap();
        }
    }
    txn.commit().unwrap();
    drop(db);
    (t._dir, t.root, snap)
}

fn check_moved(store: &Store, snap: SnapshotId) {
    let r = store.reader().unwrap();
    assert_eq!(
        r.side_entries(FORMAT_1_WORKTREES).unwrap(),
        vec![
            ("/w/one".into(), vec![], br#"{"root":"/w/one"}"#.to_vec()),
            ("/w/two".into(), vec![], br#"{"root":"/w/two"}"#.to_vec()),
        ]
    );
    let ops = r.side_scope(FORMAT_1_OPLOG, "/w/one").unwrap();
    assert_eq!(
        ops.iter()
            .map(|(k, v)| (
                sequence_of(k).unwrap(),
                String::from_utf8(v.clone()).unwrap()
            ))
            .collect::<Vec<_>>(),
        vec![(1, "op 1".into()), (2, "op 2".into()), (3, "op 3".into())]
    );
    assert_eq!(r.side_scope(FORMAT_1_OPLOG, "/w/two").unwrap().len(), 1);
    assert_eq!(
        r.side_get(FORMAT_1_FILE_STATES, "/w/one", b"d:src")
            .unwrap(),
        Some(b"state".to_vec())
    );
    assert_eq!(
        r.side_of_object(FORMAT_1_GIT_OIDS, snap.into()).unwrap(),
        Some(vec![9; 20])
    );
    assert_eq!(r.snapshot(snap).unwrap().message, "m", "objects untouched");
}

#[test]
fn a_format_1_store_is_upgraded_on_open_with_every_record_kept() {
    let (_dir, root, snap) = format_1_store(true);
    let store = Store::open(&root, &with_owners(OpenOptions::default())).unwrap();
    check_moved(&store, snap);
    assert_eq!(
        store
            .reader()
            .unwrap()
            .journal(Utf8Path::new("/w/one"))
            .unwrap(),
        Some(br#"{"op":"rollback"}"#.to_vec())
    );
    // Appends continue after the moved entries.
    let mut batch = WriteBatch::new();
    batch.append_side(FORMAT_1_OPLOG, "/w/one", b"op 4".to_vec());
    assert_eq!(store.write(&batch).unwrap().appended, vec![4]);

    // The old tables are gone and the format is 3 (format 2's records are format 3's; the
    // blob log keeps its segment size, so not 4).
    drop(store);
    let db = redb::Database::open(root.join(DATABASE_FILE).as_std_path()).unwrap();
    let txn = db.begin_read().unwrap();
    let names: Vec<String> = txn
        .list_tables()
        .unwrap()
        .map(|h| redb::TableHandle::name(&h).to_owned())
        .collect();
    for old in ["worktrees", "oplog", "file_states", "git_oids", "journals"] {
        assert!(!names.iter().any(|n| n == old), "{old} left in {names:?}");
    }
    let meta = txn.open_table(META).unwrap();
    assert_eq!(meta.get("format_version").unwrap().unwrap().value(), 3);
}

#[test]
fn a_read_only_open_upgrades_a_format_1_store_too() {
    let (_dir, root, snap) = format_1_store(false);
    let read_only = with_owners(OpenOptions {
        read_only: true,
        ..OpenOptions::default()
    });
    let store = Store::open(&root, &read_only).unwrap();
    check_moved(&store, snap);
    assert!(
        matches!(
            store.write(&WriteBatch::new()),
            Err(WriteError::ReadOnly { .. })
        ),
        "it is still a read-only open"
    );
}

/// A format 1 store opened without the owner of one of its tables is refused, naming the
/// table, and left as it was: no record is moved where its owner would not find it.
#[test]
fn a_format_1_store_with_a_table_no_owner_claims_is_refused_and_left_as_it_was() {
    let (_dir, root, snap) = format_1_store(true);
    let mut options = with_owners(OpenOptions::default());
    options.format_1_tables.retain(|t| t.name != "git_oids");
    match Store::open(&root, &options) {
        Err(OpenError::Format1Unclaimed { path, table }) => {
            assert_eq!(path, root);
            assert_eq!(table, "git_oids");
        }
        other => panic!("expected a refusal, got {:?}", other.map(|_| ())),
    }
    let db = redb::Database::open(root.join(DATABASE_FILE).as_std_path()).unwrap();
    let txn = db.begin_read().unwrap();
    let meta = txn.open_table(META).unwrap();
    assert_eq!(meta.get("format_version").unwrap().unwrap().value(), 1);
    assert!(txn.open_table(WORKTREES).is_ok(), "nothing moved");
    drop((meta, txn, db));
    // With every owner it opens, every record kept.
    let store = Store::open(&root, &with_owners(OpenOptions::default())).unwrap();
    check_moved(&store, snap);
}
