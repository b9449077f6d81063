use camino::Utf8Path;
use cas::*;

use crate::util::{commit, noise, temp_store};

/// Flips one byte in every copy of `needle` in the file (copy-on-write leaves stale pages
/// with the same bytes, so the live one must be among those hit).
fn flip_byte_of(path: &Utf8Path, needle: &[u8]) {
    let mut bytes = std::fs::read(path).unwrap();
    let hits: Vec<usize> = bytes
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect();
    assert!(!hits.is_empty(), "payload not found in the file");
    for at in hits {
        bytes[at + needle.len() / 2] ^= 0x40;
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_flipped_byte_is_found_by_fsck_and_refused_by_reads() {
    let t = temp_store();
    let content = noise(11, 20_000); // incompressible: stored as is
    let id = t.store.put_blob(&content).unwrap();
    let healthy = commit(&t.store, &[("ok", b"fine")], vec![], "m");
    assert!(
        t.store
            .fsck(&StoreFsckOptions::default(), &[])
            .unwrap()
            .problems
            .is_empty()
    );
    drop(t.store);

    flip_byte_of(&t.root.join(DATABASE_FILE), &content[5_000..5_064]);

    let store = Store::open(&t.root, &OpenOptions::default()).unwrap();
    let out = store.fsck(&StoreFsckOptions::default(), &[]).unwrap();
    assert_eq!(out.problems.len(), 1, "{:?}", out.problems);
    assert_eq!(out.problems[0].kind, "blob");
    assert_eq!(out.problems[0].name, id.to_hex());
    let err = store.reader().unwrap().blob(id).unwrap_err();
    assert!(matches!(err, ReadError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains(&id.to_hex()), "{err}");
    assert!(
        store.reader().unwrap().snapshot(healthy).is_ok(),
        "the rest still reads"
    );
}

#[test]
fn a_corrupt_tree_is_found() {
    let t = temp_store();
    let name = "a-rather-distinctive-file-name.txt";
    let s = commit(&t.store, &[(name, b"x")], vec![], "m");
    let tree = t.store.reader().unwrap().snapshot(s).unwrap().tree;
    drop(t.store);
    flip_byte_of(&t.root.join(DATABASE_FILE), name.as_bytes());
    let store = Store::open(&t.root, &OpenOptions::default()).unwrap();
    let out = store.fsck(&StoreFsckOptions::default(), &[]).unwrap();
    assert!(
        out.problems
            .iter()
            .any(|p| p.kind == "tree" && p.name == tree.to_hex()),
        "{:?}",
        out.problems
    );
    assert!(matches!(
        store.reader().unwrap().tree(tree),
        Err(ReadError::Corrupt { .. })
    ));
}

#[test]
fn gc_reclaims_log_space_and_relocated_blobs_still_read() {
    let mut t = temp_store();
    let mut keep = Vec::new();
    let mut parent = vec![];
    // Interleave kept and garbage blobs so most segments end up sparse.
    for i in 0..60u64 {
        let kept = noise(1000 + i, 9_000);
        let junk = noise(2000 + i, 90_000);
        let s = commit(&t.store, &[("k", &kept)], parent.clone(), "keep");
        commit(&t.store, &[("j", &junk)], vec![], "junk");
        parent = vec![s];
        keep.push(kept);
    }
    t.store.set_ref("main", parent[0]).unwrap();
    let before = std::fs::metadata(t.store.database_path()).unwrap().len();
    let out = t.store.gc(&StoreGcOptions::default(), &[]).unwrap();
    assert!(out.bytes_freed > 5_000_000);
    assert!(
        out.file_bytes_after < before,
        "{} !< {before}",
        out.file_bytes_after
    );
    let r = t.store.reader().unwrap();
    for k in &keep {
        assert_eq!(r.blob(BlobId::of(k)).unwrap(), *k);
    }
    drop(r);
    assert!(
        t.store
            .fsck(&StoreFsckOptions::default(), &[])
            .unwrap()
            .problems
            .is_empty()
    );
    // Writing after gc appends correctly.
    let id = t.store.put_blob(&noise(7, 50_000)).unwrap();
    assert_eq!(
        t.store.reader().unwrap().blob(id).unwrap(),
        noise(7, 50_000)
    );
}

/// After gc the file holds what its tables hold and little more. Many transactions of
/// small blobs with random ids leave free single pages all through the file; redb's
/// compaction moves a page only into a free run of its size lower down, so the blob log's
/// pages must be single pages too (1 MiB segments stopped it, keeping a quarter of the file).
#[test]
fn gc_gives_back_the_free_pages_of_the_whole_file() {
    let mut t = temp_store();
    let mut parent = vec![];
    for round in 0..120u64 {
        let files: Vec<(String, Vec<u8>)> = (0..200u64)
            .map(|i| (format!("f{i}"), noise(round * 1_000 + i, 120)))
            .collect();
        let named: Vec<(&str, &[u8])> = files
            .iter()
            .map(|(n, c)| (n.as_str(), c.as_slice()))
            .collect();
        parent = vec![commit(&t.store, &named, parent, "round")];
    }
    t.store.set_ref("main", parent[0]).unwrap();
    let out = t.store.gc(&StoreGcOptions::default(), &[]).unwrap();
    assert_eq!(out.bytes_freed, 0, "everything is reachable");
    let file = std::fs::metadata(t.store.database_path()).unwrap().len();
    assert_eq!(out.file_bytes_after, file);
    drop(t.store);
    let db = redb::Database::open(t.root.join(DATABASE_FILE)).unwrap();
    let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
    let mut tables = 0;
    for handle in txn.list_tables().unwrap() {
        let stats =
            redb::ReadableTableMetadata::stats(&txn.open_untyped_table(handle).unwrap()).unwrap();
        tables += stats.stored_bytes() + stats.metadata_bytes() + stats.fragmented_bytes();
    }
    // redb's own: its header, region allocator state and system tables (12 KB here;
    // 1 MiB segments left 370 KB free).
    let own = 64 << 10;
    assert!(
        file <= tables + tables / 100 + own,
        "file {file} bytes after gc, its tables {tables}"
    );
}

#[test]
fn gc_refuses_to_guess_below_a_corrupt_tree() {
    let t = temp_store();
    let name = "another-distinctive-file-name.txt";
    let s = commit(&t.store, &[(name, b"x")], vec![], "m");
    t.store.set_ref("main", s).unwrap();
    drop(t.store);
    flip_byte_of(&t.root.join(DATABASE_FILE), name.as_bytes());
    let mut store = Store::open(&t.root, &OpenOptions::default()).unwrap();
    let err = store.gc(&StoreGcOptions::default(), &[]).unwrap_err();
    assert!(matches!(err, MaintenanceError::Unsafe(_)), "{err}");
    assert!(
        store.reader().unwrap().has_blob(BlobId::of(b"x")).unwrap(),
        "nothing removed"
    );
}

/// Flipping a page-type byte makes redb panic deep in its b-tree walk; the store turns that
/// into a corruption error naming it, and refuses every later call with the same error.
#[test]
fn a_damaged_page_is_an_error_naming_the_store_and_the_store_then_refuses() {
    const PAGE: usize = 4096;
    let t = temp_store();
    let snap = commit(&t.store, &[("a", b"alpha"), ("b", b"beta")], vec![], "m");
    let db = t.root.join(DATABASE_FILE);
    drop(t.store);
    let pristine = std::fs::read(&db).unwrap();
    let read_only = OpenOptions {
        read_only: true,
        ..OpenOptions::default()
    };
    let mut refusals = 0;
    for page in 0..pristine.len() / PAGE {
        let mut bytes = pristine.clone();
        bytes[page * PAGE] ^= 0xff;
        std::fs::write(&db, &bytes).unwrap();
        match Store::open(&t.root, &read_only) {
            Ok(store) => {
                let read = store
                    .reader()
                    .map_err(ReadError::from)
                    .and_then(|r| r.snapshot(snap).map(|_| r))
                    .and_then(|r| r.log(snap, None).map(|_| r));
                if let Err(e) = read {
                    let ReadError::Storage(failure) = &e else {
                        panic!("page {page}: not a storage failure: {e}");
                    };
                    assert!(failure.is_corruption(), "page {page}: {e}");
                    let message = e.to_string();
                    assert!(message.contains(t.root.as_str()), "page {page}: {message}");
                    if message.contains("is damaged") {
                        // redb panicked: nothing more is asked of it, reads and writes alike.
                        refusals += 1;
                        let again = store.reader().map(|_| ()).unwrap_err().to_string();
                        assert_eq!(again, message, "page {page}");
                        let write = store.put_blob(b"more").unwrap_err().to_string();
                        assert_eq!(write, message, "page {page}");
                    }
                }
            }
            // A damaged header reads as no redb file at all (an I/O error), not as corruption.
            Err(OpenError::Database { path, .. }) => assert_eq!(path, db, "page {page}"),
            Err(e) => panic!("page {page}: {e}"),
        }
        // Opening for writing walks more of the file in debug builds of redb.
        match Store::open(&t.root, &OpenOptions::default()) {
            Ok(_) => {}
            Err(OpenError::Database { path, .. }) => assert_eq!(path, db, "page {page}"),
            Err(e) => panic!("page {page}: {e}"),
        }
    }
    assert!(refusals > 0, "some damaged page made redb panic");
}

/// A damaged blob-log segment size is refused at open: every read and write allocates a
/// segment of that size.
#[test]
fn a_damaged_segment_size_is_refused_at_open() {
    let t = temp_store();
    commit(&t.store, &[("a", b"alpha")], vec![], "m");
    drop(t.store);
    {
        let db = redb::Database::create(t.root.join(DATABASE_FILE)).unwrap();
        let txn = db.begin_write().unwrap();
        let meta: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("meta");
        txn.open_table(meta)
            .unwrap()
            .insert("segment_bytes", 1u64 << 57)
            .unwrap();
        txn.commit().unwrap();
    }
    match Store::open(&t.root, &OpenOptions::default()) {
        Err(OpenError::Corrupt { path, reason }) => {
            assert_eq!(path, t.root);
            assert!(reason.contains("segment size"), "{reason}");
        }
        other => panic!("expected a damaged store, got {other:?}"),
    }
}

/// A parent that a stored snapshot names but the store cannot find (its key damaged) makes
/// `log` report corruption, not an unknown id.
#[test]
fn log_reports_a_lost_parent_as_corruption() {
    let t = temp_store();
    let parent = commit(&t.store, &[("a", b"alpha")], vec![], "parent");
    let child = commit(&t.store, &[("a", b"beta")], vec![parent], "child");
    let db = t.root.join(DATABASE_FILE);
    drop(t.store);
    let pristine = std::fs::read(&db).unwrap();
    let hits: Vec<usize> = pristine
        .windows(32)
        .enumerate()
        .filter(|(_, w)| *w == parent.as_bytes())
        .map(|(i, _)| i)
        .collect();
    let mut lost = 0;
    for at in hits {
        let mut bytes = pristine.clone();
        bytes[at + 31] ^= 0x01;
        std::fs::write(&db, &bytes).unwrap();
        let store = Store::open(&t.root, &OpenOptions::default()).unwrap();
        match store.reader().unwrap().log(child, None) {
            Ok(_) => {}
            Err(ReadError::Corrupt { id, reason, .. }) => {
                lost += usize::from(id == parent.into() && reason.contains("referenced"));
            }
            Err(e) => panic!("flipping a bit of the parent's id at {at}: {e}"),
        }
    }
    assert!(lost > 0, "some copy of the id is the parent's key");
}

#[test]
fn ranged_reads_decode_only_their_chunks_and_refuse_a_damaged_one() {
    let t = temp_store();
    let content = noise(12, 3 * CHUNK_BYTES + 100); // incompressible: chunks stored as is
    let id = t.store.put_blob(&content).unwrap();
    let small = noise(13, 5_000);
    let small_id = t.store.put_blob(&small).unwrap();
    let empty = t.store.put_blob(b"").unwrap();
    {
        let r = t.store.reader().unwrap();
        let chunks = r.blob_chunks(id).unwrap();
        assert_eq!(
            (chunks.size(), chunks.ids().len()),
            (content.len() as u64, 4)
        );
        for (offset, len) in [
            (0, 1),
            (CHUNK_BYTES - 3, 10),
            (CHUNK_BYTES, CHUNK_BYTES),
            (2 * CHUNK_BYTES + 7, 2 * CHUNK_BYTES),
            (content.len() - 1, 5),
            (content.len(), 5),
            (content.len() + 9, 5),
        ] {
            let got = r.read_blob_at(id, offset as u64, len).unwrap();
            let end = (offset + len).min(content.len());
            assert_eq!(got, content[offset.min(end)..end], "{offset}+{len}");
        }
        assert_eq!(r.read_blob_at(small_id, 10, 20).unwrap(), small[10..30]);
        assert_eq!(r.read_blob_at(empty, 0, 20).unwrap(), b"");
    }
    drop(t.store);

    // Damage in the third chunk: reads of the others still succeed, reads of it fail
    // naming the blob, and so does a read of the whole.
    let third = 2 * CHUNK_BYTES;
    flip_byte_of(
        &t.root.join(DATABASE_FILE),
        &content[third + 5_000..third + 5_064],
    );
    let store = Store::open(&t.root, &OpenOptions::default()).unwrap();
    let r = store.reader().unwrap();
    assert_eq!(r.read_blob_at(id, 10, 100).unwrap(), content[10..110]);
    assert_eq!(
        r.read_blob_at(id, 3 * CHUNK_BYTES as u64, 100).unwrap(),
        content[3 * CHUNK_BYTES..]
    );
    for err in [
        r.read_blob_at(id, third as u64 + 1, 1).unwrap_err(),
        r.blob(id).unwrap_err(),
    ] {
        assert!(matches!(err, ReadError::Corrupt { .. }), "{err}");
    }
}

#[test]
fn a_chunked_blob_is_assembled_only_from_its_own_chunks() {
    let t = temp_store();
    let content = noise(14, 2 * CHUNK_BYTES + 1);
    let parts: Vec<&[u8]> = content.chunks(CHUNK_BYTES).collect();
    let ids: Vec<BlobId> = parts.iter().map(|p| BlobId::of(p)).collect();
    for p in &parts {
        t.store.put_blob(p).unwrap();
    }
    let id = BlobId::of(&content);
    let size = content.len() as u64;
    let r = t.store.reader().unwrap();
    let refused = |id, size, chunks: Vec<BlobId>| {
        let err = r.chunked_blob(id, size, chunks).unwrap_err();
        assert!(err.to_string().contains(&id.to_string()), "{err}");
        err.to_string()
    };
    // Out of order, a size that is not the cut, another blob's id, a missing chunk.
    let swapped = vec![ids[1], ids[0], ids[2]];
    assert!(refused(id, size, swapped).contains("make blob"));
    assert!(refused(id, size + CHUNK_BYTES as u64, ids.clone()).contains("chunks for"));
    assert!(refused(BlobId::of(b"other"), size, ids.clone()).contains("make blob"));
    let missing = vec![ids[0], BlobId::of(b"absent"), ids[2]];
    assert!(refused(id, size, missing).contains("missing"));
    // The chunks as they are: recorded, and read back whole and in ranges.
    let blob = r.chunked_blob(id, size, ids).unwrap();
    drop(r);
    let mut batch = WriteBatch::new();
    batch.add_blob(blob);
    t.store.write(&batch).unwrap();
    let r = t.store.reader().unwrap();
    assert_eq!(r.blob(id).unwrap(), content);
    assert_eq!(
        r.read_blob_at(id, CHUNK_BYTES as u64 - 1, 3).unwrap(),
        content[CHUNK_BYTES - 1..CHUNK_BYTES + 2]
    );
}

/// A read refused for damage keeps what decoding failed on as its typed source, so a caller
/// tells a hash mismatch from a zstd failure without parsing the message (which is as it was).
#[test]
fn a_damaged_blob_keeps_what_its_decoding_failed_on_as_its_source() {
    let t = temp_store();
    let content = noise(21, 20_000); // incompressible: stored as is
    let id = t.store.put_blob(&content).unwrap();
    drop(t.store);
    flip_byte_of(&t.root.join(DATABASE_FILE), &content[5_000..5_064]);
    let store = Store::open(&t.root, &OpenOptions::default()).unwrap();
    let err = store.reader().unwrap().blob(id).unwrap_err();
    assert!(
        matches!(&err, ReadError::Corrupt { damage: Some(d), .. } if matches!(**d, Damage::HashMismatch)),
        "{err:?}"
    );
    let source = std::error::Error::source(&err).map(ToString::to_string);
    assert_eq!(source.as_deref(), Some("content does not match its hash"));
    assert_eq!(
        err.to_string(),
        format!("blob {id} is corrupt: content does not match its hash")
    );
}

/// Blobs stored while `fsck` runs (a lazy mount fetching what is read) are never reported:
/// what it lists and what it reads are one snapshot of the store. (Before, a blob stored
/// between its two reads of the store was listed, then "missing": most runs hit that.)
#[test]
fn fsck_while_blobs_are_stored_finds_nothing_wrong() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let t = temp_store();
    t.store.put_blob(&noise(1, 1_000)).unwrap();
    let writing = AtomicBool::new(true);
    std::thread::scope(|s| {
        s.spawn(|| {
            for seed in 100..3_100 {
                t.store.put_blob(&noise(seed, 1_000)).unwrap();
            }
            writing.store(false, Ordering::Relaxed);
        });
        let mut round = 0;
        while writing.load(Ordering::Relaxed) {
            let out = t.store.fsck(&StoreFsckOptions::default(), &[]).unwrap();
            assert!(out.problems.is_empty(), "round {round}: {:?}", out.problems);
            round += 1;
        }
    });
}
