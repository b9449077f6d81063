//! Large blobs travel as their chunks.

use cas::*;
use remote::{Need, RefUpdate, RemoteError, Silent, fetch, gc, push, refs};

use crate::util::*;

#[test]
fn a_large_blob_travels_as_its_chunks_across_packs_and_a_cut_push_sends_those_missing() {
    use remote::layout::Encoding;
    let f = Fixture::new();
    let a = f.store("a");
    // Larger than a pack: its chunks fill more than one.
    let big = noise(3, 20 * CHUNK_BYTES + 7);
    let id = commit(
        &a,
        &[("big.bin", big.clone()), ("small", b"s".to_vec())],
        vec![],
    );
    let remote = f.remote();
    push(&remote, &a, &[id], &Silent).unwrap();
    let packs = remote_packs(&f.root);
    let list = packs
        .iter()
        .find(|(_, e, _)| e.encoding == Encoding::Chunks)
        .expect("a chunk list");
    assert_eq!(list.1.size, big.len() as u64);
    let chunk_packs: std::collections::BTreeSet<&String> = packs
        .iter()
        .filter(|(_, e, _)| e.kind == ObjectKind::Blob && e.size == CHUNK_BYTES as u64)
        .map(|(p, _, _)| p)
        .collect();
    assert!(chunk_packs.len() >= 2, "{chunk_packs:?}");
    assert!(
        packs
            .iter()
            .all(|(_, e, _)| u64::from(e.len) <= CHUNK_BYTES as u64 + 4096)
    );

    // A push cut off: a pack of chunks and the snapshot's pack never got their index.
    let (snapshot_pack, _, _) = packs
        .iter()
        .find(|(_, e, _)| e.kind == ObjectKind::Snapshot)
        .unwrap();
    let lost = chunk_packs
        .iter()
        .find(|p| **p != &list.0)
        .expect("a pack of chunks only");
    for pack in [snapshot_pack, *lost] {
        std::fs::remove_file(index_path(&f.root, pack)).unwrap();
    }
    // Cut off, it recorded none of what it sent in this store's index cache.
    let mut forget = WriteBatch::new();
    forget.clear_side_scope(remote::INDEX_CACHE, remote.name());
    a.write(&forget).unwrap();
    let again = push(&remote, &a, &[id], &Silent).unwrap();
    assert!(again.objects_sent >= 2, "{again:?}");
    // Remote gc keeps every chunk the list names; a fresh store gets the file whole.
    refs::update(&remote, "main", RefUpdate::Set(id), None).unwrap();
    gc(&remote, &a, &NOW).unwrap();
    let b = f.store("b");
    fetch(&remote, &b, &[id], Need::Closure, &Silent).unwrap();
    assert_eq!(files_of(&b, id)["big.bin"], big);
}

#[test]
fn a_chunk_list_naming_other_chunks_is_refused_and_the_blob_is_not_stored() {
    use remote::layout::Encoding;
    let f = Fixture::new();
    let a = f.store("a");
    let big = noise(4, 3 * CHUNK_BYTES);
    let id = commit(&a, &[("big.bin", big.clone())], vec![]);
    let remote = f.remote();
    push(&remote, &a, &[id], &Silent).unwrap();
    // Swap the first two chunk ids of the list in the pack: each chunk is a valid blob,
    // but together they are another file. The pack is renamed to its new id and the
    // index rewritten to match, as a hostile remote would.
    let (pack, entry, _) = remote_packs(&f.root)
        .into_iter()
        .find(|(_, e, _)| e.encoding == Encoding::Chunks)
        .unwrap();
    let path = f.root.join("remote/packs").join(&pack);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = entry.offset as usize;
    let (x, y) = (
        bytes[at..at + 32].to_vec(),
        bytes[at + 32..at + 64].to_vec(),
    );
    bytes[at..at + 32].copy_from_slice(&y);
    bytes[at + 32..at + 64].copy_from_slice(&x);
    let new_id = blake3::hash(&bytes).to_hex().to_string();
    std::fs::write(f.root.join("remote/packs").join(&new_id), &bytes).unwrap();
    std::fs::remove_file(&path).unwrap();
    let index_path = index_path(&f.root, &pack);
    let mut index = std::fs::read(&index_path).unwrap();
    index[8..40].copy_from_slice(blake3::hash(&bytes).as_bytes());
    let body = index.len() - 32;
    let check = *blake3::hash(&index[..body]).as_bytes();
    index[body..].copy_from_slice(&check);
    let new_name = index_path.file_name().unwrap().replace(&pack, &new_id);
    std::fs::write(f.root.join("remote/index").join(new_name), index).unwrap();
    std::fs::remove_file(&index_path).unwrap();

    let b = f.store("b");
    let err = fetch(&remote, &b, &[id], Need::Closure, &Silent).unwrap_err();
    assert!(matches!(err, RemoteError::Corrupt { .. }), "{err}");
    assert!(
        err.to_string().contains(&BlobId::of(&big).to_string()),
        "{err}"
    );
    let r = b.reader().unwrap();
    assert!(!r.has_blob(BlobId::of(&big)).unwrap());
    assert!(!r.has_snapshot(id).unwrap());
}
