//! Where each remote object is, as the store keeps it: a push or fetch reads the
//! locations of the objects it asks about, not every index the store caches.

use cas::*;
use remote::{Catalog, INDEX_CACHE, LOCATIONS, Need, Silent, fetch, push};

use crate::util::*;

/// Packs pushed one snapshot at a time: each push leaves two (objects, snapshot).
const PUSHES: usize = 40;

/// Pushes `PUSHES` one-file snapshots from `store`, each alone.
fn many_packs(remote: &remote::Remote, store: &Store) -> Vec<SnapshotId> {
    (0..PUSHES)
        .map(|i| {
            let id = commit(store, &[(&format!("f{i}"), vec![i as u8; 100])], vec![]);
            push(remote, store, &[id], &Silent).unwrap();
            id
        })
        .collect()
}

#[test]
fn a_push_of_two_files_reads_neither_every_cached_index_nor_every_location() {
    let f = Fixture::new();
    let a = f.store("a");
    let remote = f.remote();
    many_packs(&remote, &a);

    let id = commit(
        &a,
        &[("new1", b"one".to_vec()), ("new2", b"two".to_vec())],
        vec![],
    );
    let decoded = remote::layout::indexes_decoded_here();
    let read = remote::locations_read_here();
    let pushed = push(&remote, &a, &[id], &Silent).unwrap();
    assert!(pushed.objects_sent >= 3, "{pushed:?}");
    let decoded = remote::layout::indexes_decoded_here() - decoded;
    let read = remote::locations_read_here() - read;
    // The push's own two indexes, decoded to record where their objects are; not the
    // 2 × PUSHES the store caches.
    assert!(
        decoded <= 2,
        "{decoded} indexes decoded for a push of two files"
    );
    assert!(read <= 4, "{read} locations read for a push of two files");

    // The locations it recorded serve the next push, which sends nothing.
    let again = push(&remote, &a, &[id], &Silent).unwrap();
    assert_eq!(again.objects_sent, 0, "{again:?}");
}

#[test]
fn a_store_that_cached_indexes_without_locations_makes_them_once_and_fetches() {
    let f = Fixture::new();
    let a = f.store("a");
    let remote = f.remote();
    let ids = many_packs(&remote, &a);

    let b = f.store("b");
    fetch(&remote, &b, &ids[..1], Need::Closure, &Silent).unwrap();
    // As a store of an earlier cairn: its indexes cached, no locations, a mark without
    // the word that they were made.
    let mut old = WriteBatch::new();
    old.clear_side_scope(LOCATIONS, remote.name());
    old.put_side(
        INDEX_CACHE,
        remote.name(),
        b"mark",
        br#"{"seen_millis":0,"gc":[]}"#.to_vec(),
    );
    b.write(&old).unwrap();

    let decoded = remote::layout::indexes_decoded_here();
    let catalog = Catalog::sync(&remote, &b).unwrap();
    assert!(
        remote::layout::indexes_decoded_here() - decoded >= 2 * PUSHES as u64,
        "the table is made from every cached index"
    );
    for id in &ids {
        assert!(catalog.has((*id).into()).unwrap(), "{id}");
    }
    // Once: the next sync reads no cached index.
    let decoded = remote::layout::indexes_decoded_here();
    Catalog::sync(&remote, &b).unwrap();
    assert_eq!(remote::layout::indexes_decoded_here() - decoded, 0);
    fetch(&remote, &b, &ids[PUSHES - 1..], Need::Closure, &Silent).unwrap();
    assert!(b.reader().unwrap().has_snapshot(ids[PUSHES - 1]).unwrap());
}

#[test]
fn two_syncs_of_one_store_at_once_leave_every_object_located() {
    let f = Fixture::new();
    let a = f.store("a");
    let remote = f.remote();
    let ids = many_packs(&remote, &a);

    let b = f.store("b");
    std::thread::scope(|s| {
        let syncs: Vec<_> = (0..2)
            .map(|_| s.spawn(|| Catalog::sync(&remote, &b).unwrap()))
            .collect();
        for sync in syncs {
            let catalog = sync.join().unwrap();
            for id in &ids {
                assert!(catalog.has((*id).into()).unwrap(), "{id}");
            }
        }
    });
    let catalog = Catalog::sync(&remote, &b).unwrap();
    for id in &ids {
        assert!(catalog.has((*id).into()).unwrap(), "{id}");
    }
}
