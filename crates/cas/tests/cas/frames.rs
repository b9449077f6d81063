//! Format 3: small blobs compressed together in frames, varint records, large tree records
//! in the blob log; and format 2 stores read as they are.

use std::collections::BTreeMap;

use camino::Utf8Path;
use cas::*;
use redb::{ReadableDatabase, ReadableTable, TableDefinition};

use crate::util::{commit, noise, temp_store};

const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const BLOBS: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("blobs");
const SEGMENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("segments");
const TREES: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("trees");

fn generated(i: usize) -> Vec<u8> {
    format!(
        "// generated file {i}\nconst VALUE_{i}: u64 = {};\n",
        i * 31
    )
    .into_bytes()
}

/// A batch of `contents`' blobs, in order.
fn batch_of<'c>(contents: impl IntoIterator<Item = &'c Vec<u8>>) -> WriteBatch {
    let mut batch = WriteBatch::new();
    for c in contents {
        batch.add_blob(PreparedBlob::new(c));
    }
    batch
}

/// `files` as `commit` takes them.
fn named(files: &[(String, Vec<u8>)]) -> Vec<(&str, &[u8])> {
    files
        .iter()
        .map(|(n, c)| (n.as_str(), c.as_slice()))
        .collect()
}

fn varints(mut bytes: &[u8]) -> Vec<u64> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let b = bytes[0];
            bytes = &bytes[1..];
            v |= u64::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        out.push(v);
    }
    out
}

fn put_varints(values: &[u64]) -> Vec<u8> {
    let mut out = Vec::new();
    for &v in values {
        let mut v = v;
        loop {
            let low = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(low);
                break;
            }
            out.push(low | 0x80);
        }
    }
    out
}

/// Every record of the `blobs` table, and the bytes of the blob log's segments.
fn records(root: &Utf8Path) -> (BTreeMap<BlobId, Vec<u8>>, u64) {
    let db = redb::Database::open(root.join(DATABASE_FILE).as_std_path()).unwrap();
    let txn = db.begin_read().unwrap();
    let blobs = txn.open_table(BLOBS).unwrap();
    let records = blobs
        .iter()
        .unwrap()
        .map(|item| {
            let (k, v) = item.unwrap();
            (BlobId::from_bytes(k.value()), v.value().to_vec())
        })
        .collect();
    let segments = txn.open_table(SEGMENTS).unwrap();
    let log_bytes = segments
        .iter()
        .unwrap()
        .map(|item| item.unwrap().1.value().len() as u64)
        .sum();
    (records, log_bytes)
}

fn with_db(root: &Utf8Path, edit: impl FnOnce(&redb::WriteTransaction)) {
    let db = redb::Database::open(root.join(DATABASE_FILE).as_std_path()).unwrap();
    let txn = db.begin_write().unwrap();
    edit(&txn);
    txn.commit().unwrap();
}

fn open(root: &Utf8Path) -> Store {
    Store::open(root, &OpenOptions::default()).unwrap()
}

#[test]
fn many_small_blobs_of_one_batch_read_back_in_any_order() {
    let t = temp_store();
    let contents: Vec<Vec<u8>> = (0..5000).map(generated).collect();
    let out = t.store.write(&batch_of(&contents)).unwrap();
    assert_eq!(out.blobs_written, 5000);
    let reader = t.store.reader().unwrap();
    // A stride through the batch: each read lands in another frame than the last.
    for k in 0..contents.len() {
        let c = &contents[(k * 2_777) % contents.len()];
        assert_eq!(&reader.blob(BlobId::of(c)).unwrap(), c);
        assert_eq!(reader.blob_size(BlobId::of(c)).unwrap(), c.len() as u64);
    }
    drop(reader);
    // From many threads through one reader, as checkout does.
    let reader = t.store.reader().unwrap();
    std::thread::scope(|s| {
        for part in contents.chunks(700) {
            let reader = &reader;
            s.spawn(move || {
                for c in part.iter().rev() {
                    assert_eq!(&reader.blob(BlobId::of(c)).unwrap(), c);
                }
            });
        }
    });
    drop(reader);
    let (records, _) = {
        drop(t.store);
        records(&t.root)
    };
    let members = records.values().filter(|r| r[0] == 2).count();
    assert_eq!(members, 5000, "every small blob is a member of a frame");
    assert!(records.values().all(|r| r.len() <= 12), "varint records");
}

#[test]
fn small_medium_and_chunked_blobs_mix_in_a_batch_and_duplicates_are_stored_once() {
    let t = temp_store();
    let small: Vec<Vec<u8>> = (0..50).map(generated).collect();
    let medium = b"medium, above the small blob size ".repeat(1_000);
    let chunked: Vec<u8> = (0..(5 * CHUNK_BYTES / 2))
        .map(|i| (i % 251) as u8 ^ (i / 4096) as u8)
        .collect();
    let incompressible = noise(3, 3_000);
    let mut batch = batch_of(small.iter().chain([&medium, &chunked, &incompressible]));
    // The same small content twice in the batch.
    batch.add_blob(PreparedBlob::new(&small[7]));
    batch.add_blob(PreparedBlob::new(&small[0]));
    let out = t.store.write(&batch).unwrap();
    // 51 small, 1 medium, 3 chunks and the chunked blob's entry.
    assert_eq!(out.blobs_written, 51 + 1 + 3 + 1);

    // Across batches: stored ones are not written again, new ones are.
    let mut again = WriteBatch::new();
    for c in small.iter().take(10) {
        again.add_blob(PreparedBlob::new(c));
    }
    again.add_blob(PreparedBlob::new(b"new one"));
    again.add_blob(PreparedBlob::new(b"another new one"));
    let out = t.store.write(&again).unwrap();
    assert_eq!(out.blobs_written, 2);

    let reader = t.store.reader().unwrap();
    for c in small.iter().chain([&medium, &chunked, &incompressible]) {
        assert_eq!(&reader.blob(BlobId::of(c)).unwrap(), c);
    }
    assert_eq!(reader.blob(BlobId::of(b"new one")).unwrap(), b"new one");
    // A member goes out on its own, as a payload a remote takes.
    let payload = reader.blob_payload(BlobId::of(&small[3])).unwrap();
    let back = PreparedBlob::from_payload(BlobId::of(&small[3]), payload).unwrap();
    assert_eq!(back.id(), BlobId::of(&small[3]));
    drop(reader);
    let out = t.store.fsck(&StoreFsckOptions::default(), &[]).unwrap();
    assert!(out.problems.is_empty(), "{:?}", out.problems);
    assert_eq!(out.blobs, 51 + 1 + 3 + 1 + 2);
}

/// The bytes of ten thousand small similar files: in frames they take a fraction of what
/// one frame (or raw payload) per blob and format 2's 22-byte records took.
#[test]
fn small_similar_blobs_take_far_less_than_one_frame_each() {
    let t = temp_store();
    let contents: Vec<Vec<u8>> = (0..10_000).map(generated).collect();
    for part in contents.chunks(1_000) {
        t.store.write(&batch_of(part)).unwrap();
    }
    drop(t.store);
    let (records, log_bytes) = records(&t.root);
    let record_bytes: u64 = records.values().map(|r| r.len() as u64).sum();

    // Format 2: each blob its own zstd frame (raw where that is no smaller), 22-byte records.
    let old_log: u64 = contents
        .iter()
        .map(|c| {
            let z = zstd::bulk::compress(c, 3).unwrap();
            z.len().min(c.len()) as u64
        })
        .sum();
    let old_records = 22 * contents.len() as u64;
    eprintln!(
        "log {log_bytes} (format 2: {old_log}), records {record_bytes} (format 2: {old_records})"
    );
    assert!(log_bytes * 4 < old_log, "{log_bytes} vs {old_log}");
    assert!(
        record_bytes * 2 < old_records,
        "{record_bytes} vs {old_records}"
    );
}

#[test]
fn damaged_member_records_and_frames_are_errors_naming_the_blob() {
    let t = temp_store();
    // Same size each, so one member's record can point at another's bytes.
    let contents: Vec<Vec<u8>> = (100..400).map(generated).collect();
    t.store.write(&batch_of(&contents)).unwrap();
    drop(t.store);
    let (records, _) = records(&t.root);
    let [a, b, c] = [0, 1, 2].map(|i| BlobId::of(&contents[i]));
    let fields = |id: BlobId| varints(&records[&id][1..]);
    let (fa, fb, fc) = (fields(a), fields(b), fields(c));
    assert_eq!(records[&a][0], 2, "a member");
    assert_eq!(fa[0], fb[0], "in one frame");

    let member = |f: &[u64]| {
        let mut r = vec![2];
        r.extend(put_varints(f));
        r
    };
    with_db(&t.root, |txn| {
        let mut blobs = txn.open_table(BLOBS).unwrap();
        // a: past the end of its frame.
        blobs
            .insert(
                a.as_bytes(),
                member(&[fa[0], fa[1], 1 << 40, fa[3]]).as_slice(),
            )
            .unwrap();
        // b: another member's bytes.
        blobs
            .insert(
                b.as_bytes(),
                member(&[fb[0], fb[1], fc[2], fb[3]]).as_slice(),
            )
            .unwrap();
    });
    let store = open(&t.root);
    let r = store.reader().unwrap();
    for id in [a, b] {
        let e = r.blob(id).unwrap_err();
        assert!(matches!(e, ReadError::Corrupt { .. }), "{e}");
        assert!(e.to_string().contains(&id.to_hex()), "{e}");
    }
    assert_eq!(r.blob(c).unwrap(), contents[2], "its neighbours still read");
    drop(r);
    let out = store.fsck(&StoreFsckOptions::default(), &[]).unwrap();
    let named: Vec<&str> = out.problems.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(named.len(), 2, "{:?}", out.problems);
    assert!(named.contains(&a.to_hex().as_str()) && named.contains(&b.to_hex().as_str()));
    drop(store);

    // The frame itself damaged: every member is an error, none returns wrong bytes.
    let (offset, seg) = (fc[0], 1_048_320);
    with_db(&t.root, |txn| {
        let mut segments = txn.open_table(SEGMENTS).unwrap();
        let mut bytes = segments
            .get(offset / seg)
            .unwrap()
            .unwrap()
            .value()
            .to_vec();
        let at = (offset % seg) as usize;
        for byte in &mut bytes[at..at + 12] {
            *byte ^= 0x5a;
        }
        segments.insert(offset / seg, bytes.as_slice()).unwrap();
    });
    let store = open(&t.root);
    let e = store.reader().unwrap().blob(c).unwrap_err();
    assert!(e.to_string().contains(&c.to_hex()), "{e}");
}

#[test]
fn gc_keeps_the_live_members_of_frames_and_gives_the_rest_back() {
    let mut t = temp_store();
    // Incompressible 1 KiB files: 6,000 of them make frames over several segments.
    let files: Vec<(String, Vec<u8>)> = (0..6_000u64)
        .map(|i| (format!("f{i:05}"), noise(i + 1, 1_000)))
        .collect();
    let all = named(&files);
    let first = commit(&t.store, &all, vec![], "all");
    // A second snapshot keeps one file in ten, and a tree large enough for the log.
    let kept: Vec<(&str, &[u8])> = all.iter().step_by(10).copied().collect();
    let second = commit(&t.store, &kept, vec![], "a tenth");
    t.store.set_ref("main", second).unwrap();
    drop(t.store);
    let (_, log_before) = records(&t.root);
    {
        let db = redb::Database::open(t.root.join(DATABASE_FILE).as_std_path()).unwrap();
        let txn = db.begin_read().unwrap();
        let trees = txn.open_table(TREES).unwrap();
        let in_log = trees
            .iter()
            .unwrap()
            .filter(|i| i.as_ref().unwrap().1.value()[0] == 2)
            .count();
        assert_eq!(in_log, 2, "both large trees are records in the log");
    }
    t.store = open(&t.root);
    assert!(t.store.reader().unwrap().has_snapshot(first).unwrap());

    let out = t.store.gc(&StoreGcOptions::default(), &[]).unwrap();
    assert_eq!(
        out.removed
            .iter()
            .filter(|(k, _)| *k == ObjectKind::Blob)
            .count(),
        5_400
    );
    assert!(out.bytes_freed > 5_300_000, "{}", out.bytes_freed);
    let r = t.store.reader().unwrap();
    assert!(!r.has_snapshot(first).unwrap());
    let tree = r.tree(r.snapshot(second).unwrap().tree).unwrap();
    assert_eq!(tree.entries().len(), 600);
    for (_, content) in &kept {
        assert_eq!(&r.blob(BlobId::of(content)).unwrap(), content);
    }
    drop(r);
    let fsck = t.store.fsck(&StoreFsckOptions::default(), &[]).unwrap();
    assert!(fsck.problems.is_empty(), "{:?}", fsck.problems);
    drop(t.store);
    let (records, log_after) = records(&t.root);
    assert_eq!(records.len(), 600);
    // The log's last segment stays as it is; the rest keeps only live members.
    assert!(
        log_after * 3 < log_before,
        "dead members' bytes came back: {log_after} of {log_before}"
    );
}

#[test]
fn a_damaged_tree_record_in_the_log_is_an_error_naming_the_tree() {
    let t = temp_store();
    let files: Vec<(String, Vec<u8>)> = (0..200)
        .map(|i| (format!("file-{i}"), generated(i)))
        .collect();
    let all = named(&files);
    let snap = commit(&t.store, &all, vec![], "m");
    let tree = t.store.reader().unwrap().snapshot(snap).unwrap().tree;
    drop(t.store);
    with_db(&t.root, |txn| {
        let mut trees = txn.open_table(TREES).unwrap();
        let record = trees
            .get(tree.as_bytes())
            .unwrap()
            .unwrap()
            .value()
            .to_vec();
        assert_eq!(record[0], 2, "in the log");
        let f = varints(&record[1..]);
        let mut bad = vec![2];
        bad.extend(put_varints(&[f[0] + (1 << 30), f[1]]));
        trees.insert(tree.as_bytes(), bad.as_slice()).unwrap();
    });
    let store = open(&t.root);
    let e = store.reader().unwrap().tree(tree).unwrap_err();
    assert!(matches!(e, ReadError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains(&tree.to_hex()), "{e}");
}

fn fixture_format_2() -> (tempfile::TempDir, camino::Utf8PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = Utf8Path::from_path(dir.path()).unwrap().join("store");
    std::fs::create_dir_all(&root).unwrap();
    let fixture = Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/store-format-2");
    std::fs::copy(fixture.join(DATABASE_FILE), root.join(DATABASE_FILE)).unwrap();
    (dir, root)
}

/// The files the fixture's snapshot holds (see fixtures/store-format-2/README.md).
fn fixture_files() -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    out.insert("a.txt".into(), b"hello\n".to_vec());
    let big: String = (0..40_000)
        .map(|i| format!("line {i} of a large compressible file\n"))
        .collect();
    out.insert("big.txt".into(), big.into_bytes());
    let medium: String = (0..2_000).map(|i| format!("medium line {i}\n")).collect();
    out.insert("medium.txt".into(), medium.into_bytes());
    for i in 1..=40 {
        out.insert(format!("dir/f{i}.rs"), generated(i));
    }
    for i in 1..=120 {
        out.insert(
            format!("many/a_rather_long_file_name_number_{i}.txt"),
            format!("entry {i}\n").into_bytes(),
        );
    }
    out
}

fn read_files(r: &Reader, tree: TreeId, prefix: &str, out: &mut BTreeMap<String, Vec<u8>>) {
    for entry in r.tree(tree).unwrap().entries() {
        let name = format!("{prefix}{}", String::from_utf8_lossy(&entry.name));
        match (entry.blob(), entry.tree()) {
            (Some(b), _) => {
                out.insert(name, r.blob(b).unwrap());
            }
            (_, Some(t)) => read_files(r, t, &format!("{name}/"), out),
            _ => {}
        }
    }
}

fn format_version(root: &Utf8Path) -> u64 {
    let db = redb::Database::open(root.join(DATABASE_FILE).as_std_path()).unwrap();
    let txn = db.begin_read().unwrap();
    let meta = txn.open_table(META).unwrap();
    meta.get("format_version").unwrap().unwrap().value()
}

#[test]
fn a_format_2_store_reads_as_it_is_and_a_write_marks_it_format_3() {
    let (_dir, root) = fixture_format_2();
    assert_eq!(format_version(&root), 2);
    let (records, _) = records(&root);
    assert!(records.values().any(|r| r[0] == 0 && r.len() == 22));
    assert!(records.values().any(|r| r[0] == 1), "a chunked blob");

    // Read-only, it stays format 2.
    let read_only = OpenOptions {
        read_only: true,
        ..OpenOptions::default()
    };
    let check = |store: &Store, blobs: u64| {
        let r = store.reader().unwrap();
        let snap = r.ref_target("base").unwrap().expect("ref base");
        assert_eq!(snap.to_hex()[..12], *"59076a0e8acf");
        let mut files = BTreeMap::new();
        read_files(&r, r.snapshot(snap).unwrap().tree, "", &mut files);
        assert_eq!(files, fixture_files());
        drop(r);
        let out = store.fsck(&StoreFsckOptions::default(), &[]).unwrap();
        assert!(out.problems.is_empty(), "{:?}", out.problems);
        assert_eq!(out.blobs, blobs);
    };
    check(&Store::open(&root, &read_only).unwrap(), 165);
    assert_eq!(format_version(&root), 2);

    let store = open(&root);
    check(&store, 165);
    let new: Vec<Vec<u8>> = (1_000..1_100).map(generated).collect();
    assert_eq!(store.write(&batch_of(&new)).unwrap().blobs_written, 100);
    let r = store.reader().unwrap();
    for c in &new {
        assert_eq!(&r.blob(BlobId::of(c)).unwrap(), c);
    }
    drop(r);
    check(&store, 265);
    drop(store);
    // Format 3, not the newest: its blob log keeps format 2's segment size.
    assert_eq!(format_version(&root), 3);
    assert_eq!(FORMAT_VERSION, 4);
}

#[test]
fn a_newer_format_is_refused_naming_the_store_and_what_to_do() {
    let (_dir, root) = fixture_format_2();
    with_db(&root, |txn| {
        txn.open_table(META)
            .unwrap()
            .insert("format_version", 5)
            .unwrap();
    });
    let e = Store::open(&root, &OpenOptions::default()).unwrap_err();
    let message = e.to_string();
    assert!(matches!(e, OpenError::UnsupportedFormat { found: 5, .. }));
    assert!(message.contains(root.as_str()), "{message}");
    assert!(message.contains("newer cairn"), "{message}");
}
