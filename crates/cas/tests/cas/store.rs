use std::time::Duration;

use camino::Utf8Path;
use cas::*;

use crate::util::{commit, noise, temp_store};

#[test]
fn blobs_round_trip_small_empty_and_chunked() {
    let t = temp_store();
    let small = b"fn main() {}\n".repeat(50);
    let big = noise(1, 8 << 20);
    let odd = noise(2, CHUNK_BYTES * 2 + 17);
    let mut batch = WriteBatch::new();
    let ids: Vec<BlobId> = [&small[..], &[][..], &big[..], &odd[..]]
        .iter()
        .map(|c| batch.add_blob(PreparedBlob::new(c)))
        .collect();
    t.store.write(&batch).unwrap();
    let r = t.store.reader().unwrap();
    for (id, content) in ids.iter().zip([&small[..], &[][..], &big[..], &odd[..]]) {
        assert_eq!(*id, BlobId::of(content));
        assert_eq!(r.blob(*id).unwrap(), content);
        assert_eq!(r.blob_size(*id).unwrap(), content.len() as u64);
    }
}

#[test]
fn streamed_blobs_match_in_memory_ids() {
    let t = temp_store();
    for (seed, len) in [
        (3, 0),
        (4, 10),
        (5, CHUNK_BYTES),
        (6, CHUNK_BYTES + 1),
        (7, 5 * CHUNK_BYTES + 3),
    ] {
        let content = noise(seed, len);
        let id = t.store.put_blob_stream(&content[..], "test input").unwrap();
        assert_eq!(id, BlobId::of(&content), "len {len}");
        assert_eq!(
            t.store.reader().unwrap().blob(id).unwrap(),
            content,
            "len {len}"
        );
    }
    assert!(
        t.store
            .fsck(&StoreFsckOptions::default(), &[])
            .unwrap()
            .problems
            .is_empty()
    );
}

#[test]
fn a_prepared_stream_stores_its_chunks_and_leaves_the_blob_to_the_batch() {
    let t = temp_store();
    for (seed, len) in [(20, 10), (21, CHUNK_BYTES), (22, 3 * CHUNK_BYTES + 1)] {
        let content = noise(seed, len);
        let id = BlobId::of(&content);
        let blob = t
            .store
            .prepare_blob_stream(&content[..], "test input")
            .unwrap();
        assert_eq!((blob.id(), blob.size()), (id, len as u64));
        let r = t.store.reader().unwrap();
        assert!(
            !r.has_blob(id).unwrap(),
            "len {len}: recorded by the batch only"
        );
        if len > CHUNK_BYTES {
            for c in content.chunks(CHUNK_BYTES) {
                assert!(r.has_blob(BlobId::of(c)).unwrap(), "its chunks are stored");
            }
        }
        drop(r);
        let mut batch = WriteBatch::new();
        batch.add_blob(blob);
        t.store.write(&batch).unwrap();
        assert_eq!(t.store.reader().unwrap().blob(id).unwrap(), content);
    }
}

#[test]
fn writes_dedupe_and_survive_reopen() {
    let t = temp_store();
    let content = noise(9, 100_000);
    let mut batch = WriteBatch::new();
    batch.add_blob(PreparedBlob::new(&content));
    let first = t.store.write(&batch).unwrap();
    assert_eq!(first.blobs_written, 1);
    let second = t.store.write(&batch).unwrap();
    assert_eq!(
        second.blobs_written, 0,
        "a stored blob is not written again"
    );
    let snap = commit(&t.store, &[("a", b"1")], vec![], "m");
    drop(t.store);
    let store = Store::open(&t.root, &OpenOptions::default()).unwrap();
    let r = store.reader().unwrap();
    assert_eq!(r.blob(BlobId::of(&content)).unwrap(), content);
    assert_eq!(r.snapshot(snap).unwrap().message, "m");
}

#[test]
fn dangling_references_are_refused_and_nothing_is_written() {
    let t = temp_store();
    let mut batch = WriteBatch::new();
    let blob = batch.add_blob(PreparedBlob::new(b"x"));
    let missing = BlobId::of(b"never stored");
    let tree = Tree::new(vec![TreeEntry {
        name: b"a".to_vec(),
        kind: EntryKind::File,
        id: missing.into(),
        size: 12,
    }])
    .unwrap();
    batch.add_tree(tree);
    let err = t.store.write(&batch).unwrap_err();
    assert!(
        matches!(err, WriteError::Dangling { id, .. } if id == missing.into()),
        "{err}"
    );
    assert!(
        !t.store.reader().unwrap().has_blob(blob).unwrap(),
        "the failed batch left nothing"
    );
    let err = t
        .store
        .set_ref("main", SnapshotId::from_bytes([1; 32]))
        .unwrap_err();
    assert!(matches!(err, RefError::UnknownSnapshot { .. }), "{err}");
}

#[test]
fn refs_set_list_remove() {
    let t = temp_store();
    let a = commit(&t.store, &[("a", b"1")], vec![], "a");
    t.store.set_ref("main", a).unwrap();
    t.store.set_ref("agents/fixer-1", a).unwrap();
    let r = t.store.reader().unwrap();
    assert_eq!(r.ref_target("main").unwrap(), Some(a));
    assert_eq!(r.refs().unwrap().len(), 2);
    assert_eq!(r.resolve_snapshot("main").unwrap(), a);
    drop(r);
    assert_eq!(t.store.remove_ref("main").unwrap(), a);
    assert!(matches!(
        t.store.remove_ref("main"),
        Err(RefError::NotFound { .. })
    ));
    for bad in [
        "",
        "-x",
        "a//b",
        "a/../b",
        "sp ace",
        &"a".repeat(256),
        &a.to_hex(),
    ] {
        assert!(t.store.set_ref(bad, a).is_err(), "{bad:?} must be refused");
    }
}

#[test]
fn prefixes_resolve_and_ambiguity_lists_candidates() {
    let t = temp_store();
    let a = commit(&t.store, &[("a", b"1")], vec![], "a");
    let r = t.store.reader().unwrap();
    assert_eq!(r.resolve_snapshot(&a.short(6)).unwrap(), a);
    assert_eq!(r.resolve_snapshot(&a.to_hex()).unwrap(), a);
    assert!(matches!(
        r.resolve_snapshot(&a.short(5)),
        Err(ResolveError::Unknown { .. })
    ));
    assert!(matches!(
        r.resolve_snapshot("zzzzzz"),
        Err(ResolveError::Unknown { .. })
    ));
    drop(r);

    // Find two snapshots whose ids share 6 hex digits, store both, and ask for the prefix.
    let tree = Tree::default();
    let mut seen = std::collections::HashMap::new();
    let (x, y) = (0u64..)
        .find_map(|i| {
            let s = Snapshot {
                tree: tree.id(),
                parents: vec![],
                created: jiff::Timestamp::UNIX_EPOCH,
                message: i.to_string(),
                labels: Default::default(),
                source: None,
            };
            let p = s.id().short(6);
            seen.insert(p, s.clone()).map(|prev| (prev, s))
        })
        .unwrap();
    let mut batch = WriteBatch::new();
    batch.add_tree(tree);
    let (xid, yid) = (batch.add_snapshot(x), batch.add_snapshot(y));
    t.store.write(&batch).unwrap();
    let r = t.store.reader().unwrap();
    match r.resolve_snapshot(&xid.short(6)) {
        Err(ResolveError::Ambiguous { candidates, .. }) => {
            let ids: Vec<_> = candidates.iter().map(|(_, id)| *id).collect();
            assert!(ids.contains(&xid.into()) && ids.contains(&yid.into()));
        }
        other => panic!("expected ambiguity, got {other:?}"),
    }
    assert_eq!(r.resolve_snapshot(&xid.short(20)).unwrap(), xid);
}

#[test]
fn resolve_object_finds_every_kind() {
    let t = temp_store();
    let s = commit(&t.store, &[("f", b"content")], vec![], "m");
    let r = t.store.reader().unwrap();
    let snap = r.snapshot(s).unwrap();
    assert_eq!(
        r.resolve_object(&s.short(10)).unwrap(),
        (ObjectKind::Snapshot, s.into())
    );
    assert_eq!(
        r.resolve_object(&snap.tree.short(10)).unwrap(),
        (ObjectKind::Tree, snap.tree.into())
    );
    let blob = BlobId::of(b"content");
    assert_eq!(
        r.resolve_object(&blob.to_hex()).unwrap(),
        (ObjectKind::Blob, blob.into())
    );
}

#[test]
fn log_walks_ancestry_newest_first() {
    let t = temp_store();
    let a = commit(&t.store, &[("a", b"1")], vec![], "a");
    let b = commit(&t.store, &[("a", b"2")], vec![a], "b");
    let c = commit(&t.store, &[("a", b"3")], vec![b], "c");
    let r = t.store.reader().unwrap();
    let log: Vec<_> = r
        .log(c, None)
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(log, vec![c, b, a]);
    assert_eq!(r.log(c, Some(2)).unwrap().len(), 2);
}

#[test]
fn missing_store_and_foreign_database_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let root = Utf8Path::from_path(dir.path()).unwrap().join("nope");
    let err = Store::open(&root, &OpenOptions::default()).unwrap_err();
    assert!(matches!(err, OpenError::Missing { .. }));
    assert!(err.to_string().contains(root.as_str()), "{err}");
    assert!(!root.exists(), "a read-only open creates nothing");

    let junk = Utf8Path::from_path(dir.path()).unwrap().join("junk");
    std::fs::create_dir_all(&junk).unwrap();
    std::fs::write(junk.join(DATABASE_FILE), b"not a database at all").unwrap();
    let err = Store::open(&junk, &OpenOptions::default()).unwrap_err();
    assert!(err.to_string().contains(junk.as_str()), "{err}");
}

/// The second process of `two_processes_share_a_store`: holds the store, writes, waits,
/// writes again, exits. Ignored, so a plain `cargo test` does not count it as a pass;
/// the parent runs it with `--ignored --exact`, and on its own it fails.
#[test]
#[ignore = "child process of two_processes_share_a_store, which runs it"]
fn holder_process() {
    let root = std::env::var("CAS_TEST_HOLD")
        .expect("CAS_TEST_HOLD names the store: two_processes_share_a_store runs this");
    let store = Store::open(Utf8Path::new(&root), &OpenOptions::default()).unwrap();
    commit(&store, &[("held", b"1")], vec![], "first from holder");
    std::fs::write(format!("{root}.holding"), b"").unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let id = commit(&store, &[("held", b"2")], vec![], "second from holder");
    store.set_ref("holder", id).unwrap();
}

#[test]
fn two_processes_share_a_store() {
    let t = temp_store();
    drop(t.store);
    let flag = format!("{}.holding", t.root);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "store::holder_process",
            "--nocapture",
        ])
        .env("CAS_TEST_HOLD", t.root.as_str())
        .spawn()
        .unwrap();
    while !Utf8Path::new(&flag).exists() {
        assert!(child.try_wait().unwrap().is_none(), "holder exited early");
        std::thread::sleep(Duration::from_millis(10));
    }
    // A short timeout gives up, naming the store.
    let short = OpenOptions {
        lock_timeout: Duration::from_millis(200),
        ..OpenOptions::default()
    };
    let err = Store::open(&t.root, &short).unwrap_err();
    assert!(matches!(err, OpenError::LockTimeout { .. }), "{err}");
    assert!(err.to_string().contains(t.root.as_str()), "{err}");
    // A longer one waits for the holder and then sees everything it wrote.
    let store = Store::open(&t.root, &OpenOptions::default()).unwrap();
    assert!(child.wait().unwrap().success());
    let r = store.reader().unwrap();
    let held = r.ref_target("holder").unwrap().expect("holder's ref");
    assert_eq!(r.snapshot(held).unwrap().message, "second from holder");
}

/// The child of the next two tests: stores blobs, printing each id once the call
/// returned, then waits to be killed. Ignored, so a plain `cargo test` does not count it as
/// a pass; its parents run it with `--ignored --exact`, and on its own it fails.
#[test]
#[ignore = "child process of ids_survive_a_kill_right_after_they_are_handed_out and a_read_only_open_repairs_a_store_left_by_a_crash, which run it"]
fn durable_writer_process() {
    let root = std::env::var("CAS_TEST_DURABLE")
        .expect("CAS_TEST_DURABLE names the store: the tests that kill this process run it");
    let store = Store::open(
        Utf8Path::new(&root),
        &OpenOptions {
            create: true,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for i in 0..40u64 {
        let id = store.put_blob(&noise(i, 3000 + i as usize * 100)).unwrap();
        writeln!(out, "{id}").unwrap();
        out.flush().unwrap();
    }
    std::thread::sleep(Duration::from_secs(120));
}

#[test]
fn ids_survive_a_kill_right_after_they_are_handed_out() {
    use std::io::BufRead;
    let t = temp_store();
    drop(t.store);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "store::durable_writer_process",
            "--nocapture",
            "--quiet",
        ])
        .env("CAS_TEST_DURABLE", t.root.as_str())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let ids: Vec<BlobId> = stdout
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| l.trim().parse().ok())
        .take(40)
        .collect();
    child.kill().unwrap(); // SIGKILL: no destructors, no clean shutdown
    child.wait().unwrap();
    assert_eq!(ids.len(), 40);
    let store = Store::open(&t.root, &OpenOptions::default()).unwrap();
    let r = store.reader().unwrap();
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(
            r.blob(*id).unwrap(),
            noise(i as u64, 3000 + i * 100),
            "blob {i}"
        );
    }
    drop(r);
    assert!(
        store
            .fsck(&StoreFsckOptions::default(), &[])
            .unwrap()
            .problems
            .is_empty()
    );
}

#[test]
fn a_read_only_open_repairs_a_store_left_by_a_crash() {
    use std::io::BufRead;
    let t = temp_store();
    drop(t.store);
    // A writer killed mid-life leaves the file not cleanly closed.
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "store::durable_writer_process",
            "--nocapture",
            "--quiet",
        ])
        .env("CAS_TEST_DURABLE", t.root.as_str())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let first: BlobId = std::io::BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .find_map(|l| l.trim().parse().ok())
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let store = Store::open(
        &t.root,
        &OpenOptions {
            read_only: true,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    assert_eq!(store.reader().unwrap().blob(first).unwrap(), noise(0, 3000));
}
