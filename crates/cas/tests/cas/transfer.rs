//! Objects between stores: payloads out and in, checked; objects promised by a remote.

use cas::*;

use crate::util::{commit, noise, temp_store};

fn copy_snapshot_without_parents(from: &Reader, to: &Store, id: SnapshotId, remote: &str) {
    let snap = from.snapshot(id).unwrap();
    let mut batch = WriteBatch::new();
    let tree = from.tree(snap.tree).unwrap();
    for entry in tree.entries() {
        let blob = entry.blob().unwrap();
        let payload = from.blob_payload(blob).unwrap();
        batch.add_blob(PreparedBlob::from_payload(blob, payload).unwrap());
    }
    batch.add_tree(tree);
    for p in &snap.parents {
        batch.promise((*p).into(), remote);
    }
    batch.add_snapshot(snap);
    to.write(&batch).unwrap();
}

#[test]
fn a_payload_travels_as_stored_and_comes_back_checked() {
    let a = temp_store();
    let small = b"hello hello hello hello hello hello\n".repeat(10);
    let big = noise(3, CHUNK_BYTES * 2 + 17);
    let small_id = a.store.put_blob(&small).unwrap();
    let big_id = a.store.put_blob(&big).unwrap();
    let reader = a.store.reader().unwrap();

    let payload = reader.blob_payload(small_id).unwrap();
    assert!(payload.zstd, "repetitive text goes compressed");
    assert!(payload.bytes.len() < small.len());
    let b = temp_store();
    let mut batch = WriteBatch::new();
    batch.add_blob(PreparedBlob::from_payload(small_id, payload.clone()).unwrap());
    let big_payload = reader.blob_payload(big_id).unwrap();
    assert_eq!(big_payload.size, big.len() as u64);
    batch.add_blob(PreparedBlob::from_payload(big_id, big_payload).unwrap());
    b.store.write(&batch).unwrap();
    let back = b.store.reader().unwrap();
    assert_eq!(back.blob(small_id).unwrap(), small);
    assert_eq!(back.blob(big_id).unwrap(), big);

    // A flipped byte, a wrong size, a payload of other content: refused, naming the id.
    let mut flipped = payload.clone();
    let last = flipped.bytes.len() - 1;
    flipped.bytes[last] ^= 1;
    let mut short = payload.clone();
    short.size -= 1;
    let other = BlobPayload {
        size: 5,
        zstd: false,
        bytes: b"other".to_vec(),
    };
    for bad in [flipped, short, other] {
        let err = verify_blob_payload(small_id, bad).unwrap_err();
        assert!(err.to_string().contains(&small_id.to_string()), "{err}");
    }
}

#[test]
fn a_snapshot_whose_parents_are_promised_is_whole_for_fsck_and_gc() {
    let a = temp_store();
    let first = commit(&a.store, &[("a", b"one")], vec![], "first");
    let second = commit(&a.store, &[("a", b"two")], vec![first], "second");
    let from = a.store.reader().unwrap();

    let mut b = temp_store();
    // Without the promise, the missing parent is refused.
    let snap = from.snapshot(second).unwrap();
    let mut batch = WriteBatch::new();
    batch.add_blob(PreparedBlob::new(b"two"));
    batch.add_tree(from.tree(snap.tree).unwrap());
    batch.add_snapshot(snap);
    assert!(matches!(
        b.store.write(&batch),
        Err(WriteError::Dangling { id, .. }) if id == first.into()
    ));

    copy_snapshot_without_parents(&from, &b.store, second, "origin");
    b.store.set_ref("main", second).unwrap();
    let reader = b.store.reader().unwrap();
    assert_eq!(
        reader.promised(first.into()).unwrap().as_deref(),
        Some("origin")
    );
    assert!(!reader.has_snapshot(first).unwrap());
    let fsck = b.store.fsck(&FsckOptions::default(), &[]).unwrap();
    assert!(fsck.problems.is_empty(), "{:?}", fsck.problems);
    drop(reader);
    let gc = b.store.gc(&GcOptions::default(), &[]).unwrap();
    assert!(gc.removed.is_empty(), "{gc:?}");
    assert!(b.store.reader().unwrap().has_snapshot(second).unwrap());

    // Fetching the parent later stores it and ends the promise.
    copy_snapshot_without_parents(&from, &b.store, first, "origin");
    let reader = b.store.reader().unwrap();
    assert!(reader.has_snapshot(first).unwrap());
    assert_eq!(reader.promised(first.into()).unwrap(), None);
    assert_eq!(reader.log(second, None).unwrap().len(), 2);
}
