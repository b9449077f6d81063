//! Push, fetch, refs and gc against a `file://` remote (object_store's folder backend):
//! the protocol without an S3 engine. The engines themselves are tested end to end in
//! `tests/cli/remote_commands.rs`.

use camino::{Utf8Path, Utf8PathBuf};
use cas::*;
use remote::{
    Need, Probe, RefUpdate, Remote, RemoteConfig, RemoteError, RemoteGcOptions, Silent, fetch, gc,
    probe, push, refs,
};

struct Fixture {
    _dir: tempfile::TempDir,
    root: Utf8PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(dir.path()).unwrap().to_owned();
        Fixture { _dir: dir, root }
    }

    fn store(&self, name: &str) -> Store {
        Store::open(
            &self.root.join(name),
            &OpenOptions {
                create: true,
                ..OpenOptions::default()
            },
        )
        .unwrap()
    }

    fn remote(&self) -> Remote {
        let config = RemoteConfig {
            name: "origin".into(),
            url: format!("file://{}", self.root.join("remote")),
            endpoint: None,
            region: None,
            conditional: remote::Conditional {
                create: false,
                stale_update: Probe::Unsupported,
            },
            ranged_reads: true,
        };
        let probed = probe(&config).unwrap();
        Remote::connect(&probed).unwrap()
    }
}

/// Remote gc without a grace period.
const NOW: RemoteGcOptions = RemoteGcOptions {
    grace_seconds: 0,
    dry_run: false,
};

/// Files as path components and content.
type Split<'a> = Vec<(Vec<&'a str>, &'a Vec<u8>)>;

/// A snapshot of `files` (nested paths allowed) with `parents`.
fn commit(store: &Store, files: &[(&str, Vec<u8>)], parents: Vec<SnapshotId>) -> SnapshotId {
    fn tree_of(batch: &mut WriteBatch, files: &Split) -> (TreeId, u64) {
        let mut entries = Vec::new();
        let mut dirs: std::collections::BTreeMap<&str, Split> = Default::default();
        for (parts, content) in files {
            if parts.len() == 1 {
                let id = batch.add_blob(PreparedBlob::new(content));
                entries.push(TreeEntry {
                    name: parts[0].as_bytes().to_vec(),
                    kind: EntryKind::File,
                    id: id.into(),
                    size: content.len() as u64,
                });
            } else {
                dirs.entry(parts[0])
                    .or_default()
                    .push((parts[1..].to_vec(), content));
            }
        }
        for (name, sub) in dirs {
            let (tree, size) = tree_of(batch, &sub);
            entries.push(TreeEntry {
                name: name.as_bytes().to_vec(),
                kind: EntryKind::Tree,
                id: tree.into(),
                size,
            });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let tree = Tree::new(entries).unwrap();
        let size = tree.size();
        (batch.add_tree(tree), size)
    }
    let mut batch = WriteBatch::new();
    let split: Split = files
        .iter()
        .map(|(p, c)| (p.split('/').collect(), c))
        .collect();
    let (tree, _) = tree_of(&mut batch, &split);
    let id = batch.add_snapshot(Snapshot {
        tree,
        parents,
        created: jiff::Timestamp::now(),
        message: "test".into(),
        labels: Default::default(),
        source: None,
    });
    store.write(&batch).unwrap();
    id
}

fn files(seed: u8) -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("README", format!("readme {seed}\n").into_bytes()),
        ("src/lib.rs", b"fn main() {}\n".repeat(100)),
        (
            "src/big.bin",
            (0..3_000_000u32).map(|i| (i % 251) as u8 ^ seed).collect(),
        ),
        ("docs/a/b/c.txt", format!("deep {seed}").into_bytes()),
    ]
}

#[test]
fn a_snapshot_pushed_from_one_store_checks_out_whole_in_another_and_only_what_is_missing_moves() {
    let f = Fixture::new();
    let a = f.store("a");
    let first = commit(&a, &files(1), vec![]);
    let second = commit(&a, &files(2), vec![first]);
    let remote = f.remote();

    let pushed = push(&remote, &a, &[second], &Silent).unwrap();
    assert_eq!(pushed.pushed, vec![second]);
    assert!(pushed.objects_sent > 10, "{pushed:?}");
    assert_eq!(pushed.objects_present, 0);
    // Again: nothing is sent.
    let again = push(&remote, &a, &[second], &Silent).unwrap();
    assert_eq!((again.objects_sent, again.bytes_sent), (0, 0), "{again:?}");
    assert_eq!(
        again.objects_present, 1,
        "the snapshot itself, with all it reaches"
    );

    // Store B fetches the second snapshot alone: its parent stays on the remote.
    let b = f.store("b");
    let got = fetch(&remote, &b, &[second], Need::Closure, &Silent).unwrap();
    assert!(got.objects_received > 0);
    let reader = b.reader().unwrap();
    assert!(reader.has_snapshot(second).unwrap());
    assert!(!reader.has_snapshot(first).unwrap());
    assert_eq!(
        reader.promised(first.into()).unwrap().as_deref(),
        Some("origin")
    );
    let from = a.reader().unwrap();
    let tree = reader.tree(reader.snapshot(second).unwrap().tree).unwrap();
    assert_eq!(
        tree,
        from.tree(from.snapshot(second).unwrap().tree).unwrap()
    );
    for (path, content) in files(2) {
        let id = BlobId::of(&content);
        assert_eq!(reader.blob(id).unwrap(), content, "{path}");
    }
    drop(reader);
    let fsck = b.fsck(&FsckOptions::default(), &[]).unwrap();
    assert!(fsck.problems.is_empty(), "{:?}", fsck.problems);

    // Then the history: only the first snapshot's own objects come.
    let before = got.objects_received;
    let history = fetch(&remote, &b, &[second], Need::History, &Silent).unwrap();
    assert!(
        history.objects_received < before,
        "{history:?} after {got:?}"
    );
    assert!(b.reader().unwrap().has_snapshot(first).unwrap());
    assert_eq!(b.reader().unwrap().promised(first.into()).unwrap(), None);

    // B's new snapshot goes back; A fetches it, sending and receiving only the change.
    let third = commit(&b, &files(3), vec![second]);
    let back = push(&remote, &b, &[third], &Silent).unwrap();
    assert!(back.objects_present >= 1, "{back:?}");
    assert!(
        back.objects_sent < pushed.objects_sent,
        "{back:?} vs {pushed:?}"
    );
    let pulled = fetch(&remote, &a, &[third], Need::History, &Silent).unwrap();
    assert_eq!(pulled.objects_received, back.objects_sent);
}

#[test]
fn an_unknown_id_is_not_on_the_remote_and_nothing_is_stored() {
    let f = Fixture::new();
    let a = f.store("a");
    let remote = f.remote();
    let id = commit(&a, &files(1), vec![]);
    let b = f.store("b");
    let err = fetch(&remote, &b, &[id], Need::Closure, &Silent).unwrap_err();
    assert!(matches!(err, RemoteError::NotOnRemote { .. }), "{err}");
    assert!(err.to_string().contains(&id.to_string()), "{err}");
}

#[test]
fn a_flipped_byte_in_a_pack_is_refused_naming_the_object_and_the_remote() {
    let f = Fixture::new();
    let a = f.store("a");
    let id = commit(&a, &files(1), vec![]);
    let remote = f.remote();
    push(&remote, &a, &[id], &Silent).unwrap();
    // Flip one byte near the end of every pack (inside the last object's payload).
    for pack in std::fs::read_dir(f.root.join("remote/packs")).unwrap() {
        let path = pack.unwrap().path();
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes.len() - 3;
        bytes[at] ^= 0x40;
        std::fs::write(&path, bytes).unwrap();
    }
    let b = f.store("b");
    let err = fetch(&remote, &b, &[id], Need::Closure, &Silent).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, RemoteError::Corrupt { .. }), "{text}");
    assert!(
        text.contains("origin") && text.contains("object "),
        "{text}"
    );
    let reader = b.reader().unwrap();
    assert!(
        !reader.has_snapshot(id).unwrap(),
        "nothing of it is visible"
    );
}

#[test]
fn refs_on_a_folder_remote_move_only_from_the_value_expected_and_one_racer_wins() {
    let f = Fixture::new();
    let a = f.store("a");
    let one = commit(&a, &files(1), vec![]);
    let two = commit(&a, &files(2), vec![one]);
    let remote = f.remote();
    assert!(
        remote.config().conditional.create,
        "a folder refuses a second create"
    );
    assert_eq!(remote.config().conditional.stale_update, Probe::Unsupported);
    push(&remote, &a, &[two], &Silent).unwrap();

    refs::update(&remote, "main", RefUpdate::Set(one), None).unwrap();
    assert_eq!(refs::get(&remote, "main").unwrap(), Some(one));
    // Without the right expectation: refused, naming the value.
    let err = refs::update(&remote, "main", RefUpdate::Set(two), None).unwrap_err();
    assert!(err.is_refusal(), "{err}");
    assert!(err.to_string().contains(&one.to_string()), "{err}");
    refs::update(&remote, "main", RefUpdate::Set(two), Some(one)).unwrap();

    // Eight threads race from one value: exactly one wins.
    let results: Vec<Result<(), RemoteError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let remote = &remote;
                s.spawn(move || {
                    let target = if i % 2 == 0 { one } else { two };
                    refs::update(remote, "race", RefUpdate::Set(target), None)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let winners = results.iter().filter(|r| r.is_ok()).count();
    let value = refs::get(&remote, "race").unwrap().unwrap();
    // Racers that wanted the winner's value see it there already and succeed too.
    let same_as_winner = results.len()
        - results
            .iter()
            .filter(
                |r| matches!(r, Err(RemoteError::RefMoved { current: Some(c), .. }) if *c == value),
            )
            .count();
    assert!(winners >= 1 && winners == same_as_winner, "{results:?}");
    assert_eq!(
        std::fs::read_dir(f.root.join("remote/refs/race"))
            .unwrap()
            .count(),
        1,
        "one entry was created"
    );

    refs::update(&remote, "main", RefUpdate::Remove, Some(two)).unwrap();
    assert_eq!(refs::get(&remote, "main").unwrap(), None);
    let listed: Vec<String> = refs::list(&remote)
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(listed, vec!["race".to_owned()]);
}

#[test]
fn remote_gc_deletes_only_what_no_ref_or_pin_reaches_after_the_grace() {
    let f = Fixture::new();
    let a = f.store("a");
    let kept = commit(&a, &files(1), vec![]);
    let dropped = commit(
        &a,
        &[("lonely.txt", b"nobody keeps me".repeat(1000))],
        vec![],
    );
    let remote = f.remote();
    push(&remote, &a, &[kept], &Silent).unwrap();
    refs::update(&remote, "main", RefUpdate::Set(kept), None).unwrap();
    push(&remote, &a, &[dropped], &Silent).unwrap();
    let packs = || {
        std::fs::read_dir(f.root.join("remote/packs"))
            .unwrap()
            .count()
    };
    let before = packs();

    // With a grace period: condemned, not deleted; a dry run says so and changes nothing.
    let day = RemoteGcOptions {
        grace_seconds: 86_400,
        dry_run: false,
    };
    let dry = gc(
        &remote,
        &a,
        &RemoteGcOptions {
            dry_run: true,
            ..day
        },
    )
    .unwrap();
    assert_eq!(dry.packs_condemned, 2, "{dry:?}");
    let first = gc(&remote, &a, &day).unwrap();
    assert_eq!(
        (first.packs_condemned, first.packs_removed),
        (2, 0),
        "{first:?}"
    );
    assert_eq!(packs(), before);

    // Pinning it again (a push by id) rescues it.
    refs::pin(&remote, dropped).unwrap();
    let rescued = gc(&remote, &a, &day).unwrap();
    assert_eq!(rescued.packs_rescued, 2, "{rescued:?}");
    refs::unpin(&remote, dropped).unwrap();

    let now = gc(&remote, &a, &NOW).unwrap();
    assert_eq!(now.packs_removed, 2, "{now:?}");
    assert_eq!(packs(), before - 2);
    // What the ref keeps still checks out in a fresh store.
    let b = f.store("b");
    fetch(&remote, &b, &[kept], Need::History, &Silent).unwrap();
    let err = fetch(&remote, &b, &[dropped], Need::Closure, &Silent).unwrap_err();
    assert!(matches!(err, RemoteError::NotOnRemote { .. }), "{err}");
}

#[test]
fn a_snapshot_still_shown_by_a_kept_pack_stays_whole_after_remote_gc() {
    let f = Fixture::new();
    let a = f.store("a");
    let remote = f.remote();
    // Z's files go to the remote in a push of their own (pinned, for now).
    let z = commit(&a, &files(1), vec![]);
    push(&remote, &a, &[z], &Silent).unwrap();
    refs::pin(&remote, z).unwrap();
    // X has Z's tree; it goes in one push with Y, so one snapshot pack shows both, while
    // X's files are only in Z's pack.
    std::thread::sleep(std::time::Duration::from_millis(5));
    let x = commit(&a, &files(1), vec![]);
    assert_ne!(x, z);
    let y = commit(&a, &[("y.txt", b"kept by main".to_vec())], vec![]);
    push(&remote, &a, &[x, y], &Silent).unwrap();
    refs::update(&remote, "main", RefUpdate::Set(y), None).unwrap();
    refs::unpin(&remote, z).unwrap();
    gc(&remote, &a, &NOW).unwrap();
    // X's pack is kept for Y and still shows X, so X must still be whole.
    let b = f.store("b");
    fetch(&remote, &b, &[x], Need::History, &Silent).unwrap();
    let reader = b.reader().unwrap();
    for (_, content) in files(1) {
        assert_eq!(reader.blob(BlobId::of(&content)).unwrap(), content);
    }
}

/// Rewrites every index of the remote with `edit` applied to each entry's bytes, keeping
/// the checksum right, so only the entry's meaning is hostile.
fn rewrite_indexes(root: &Utf8Path, edit: impl Fn(&mut [u8])) {
    const FIXED: usize = 8 + 32 + 4;
    const ENTRY: usize = 1 + 1 + 32 + 8 + 8 + 4 + 4;
    for index in std::fs::read_dir(root.join("remote/index")).unwrap() {
        let path = index.unwrap().path();
        let mut bytes = std::fs::read(&path).unwrap();
        let body_len = bytes.len() - 32;
        for entry in bytes[FIXED..body_len].chunks_exact_mut(ENTRY) {
            edit(entry);
        }
        let check = *blake3::hash(&bytes[..body_len]).as_bytes();
        bytes[body_len..].copy_from_slice(&check);
        std::fs::write(&path, bytes).unwrap();
    }
}

#[test]
fn an_index_placing_an_object_past_the_end_of_any_pack_is_refused_not_a_panic() {
    let f = Fixture::new();
    let a = f.store("a");
    let id = commit(&a, &files(1), vec![]);
    let remote = f.remote();
    push(&remote, &a, &[id], &Silent).unwrap();
    // offset = u64::MAX - 2: offset + len overflows.
    rewrite_indexes(&f.root, |entry| {
        entry[42..50].copy_from_slice(&(u64::MAX - 2).to_le_bytes())
    });
    let b = f.store("b");
    // Every index is skipped, each named with what is wrong with it: nothing is on the
    // remote any more.
    let catalog = remote::Catalog::sync(&remote, &b).unwrap();
    assert!(catalog.is_empty());
    assert!(!catalog.warnings().is_empty());
    for warning in catalog.warnings() {
        assert!(warning.contains("past the end"), "{warning}");
    }
    let err = fetch(&remote, &b, &[id], Need::Closure, &Silent).unwrap_err();
    assert!(matches!(err, RemoteError::NotOnRemote { .. }), "{err}");
    assert!(!b.reader().unwrap().has_snapshot(id).unwrap());
}

#[test]
fn an_index_or_ref_larger_than_any_cairn_writes_is_refused_unread() {
    let f = Fixture::new();
    let a = f.store("a");
    let id = commit(&a, &files(1), vec![]);
    let remote = f.remote();
    push(&remote, &a, &[id], &Silent).unwrap();
    refs::update(&remote, "main", RefUpdate::Set(id), None).unwrap();

    // A sparse 1 TiB index: reading it whole would exhaust memory. It is skipped unread,
    // named with its size, and the rest of the remote still serves.
    let huge = f.root.join("remote/index").join("f".repeat(64));
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    let b = f.store("b");
    let got = fetch(&remote, &b, &[id], Need::Closure, &Silent).unwrap();
    assert_eq!(got.warnings.len(), 1, "{:?}", got.warnings);
    let text = &got.warnings[0];
    assert!(
        text.contains(&"f".repeat(64)) && text.contains("1099511627776 bytes"),
        "{text}"
    );
    assert_eq!(files_of(&b, id), as_map(&files(1)));
    std::fs::remove_file(&huge).unwrap();

    let entry = std::fs::read_dir(f.root.join("remote/refs/main"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::File::options()
        .write(true)
        .open(&entry)
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    let err = refs::get(&remote, "main").unwrap_err();
    assert!(matches!(err, RemoteError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("refs/main"), "{err}");
}

#[test]
fn a_ref_name_that_would_leave_refs_is_refused_before_any_request() {
    let f = Fixture::new();
    let a = f.store("a");
    let id = commit(&a, &files(1), vec![]);
    let remote = f.remote();
    push(&remote, &a, &[id], &Silent).unwrap();
    for name in ["../packs", "a//b", "", "-x"] {
        let err = refs::update(&remote, name, RefUpdate::Set(id), None).unwrap_err();
        assert!(matches!(err, RemoteError::Invalid(_)), "{name}: {err}");
        let err = refs::get(&remote, name).unwrap_err();
        assert!(matches!(err, RemoteError::Invalid(_)), "{name}: {err}");
    }
    assert!(!f.root.join("remote/packs/0000000000000001").exists());
    assert!(!f.root.join("remote/0000000000000001").exists());
}

#[test]
fn a_blob_id_asked_for_as_a_snapshot_is_not_on_the_remote() {
    let f = Fixture::new();
    let a = f.store("a");
    let id = commit(&a, &files(1), vec![]);
    let remote = f.remote();
    push(&remote, &a, &[id], &Silent).unwrap();
    let reader = a.reader().unwrap();
    let tree = reader.tree(reader.snapshot(id).unwrap().tree).unwrap();
    let blob = tree.entries().iter().find_map(|e| e.blob()).unwrap();
    let as_snapshot = SnapshotId::from_bytes(*blob.as_bytes());
    let b = f.store("b");
    let err = fetch(&remote, &b, &[as_snapshot], Need::Closure, &Silent).unwrap_err();
    assert!(matches!(err, RemoteError::NotOnRemote { .. }), "{err}");
}

/// A thousand small generated source files in ten directories (as
/// `fixtures/remote-format-1/README.md`'s measurement by hand made them).
fn small_files() -> Vec<(String, Vec<u8>)> {
    (0..1000)
        .map(|n| {
            let content = format!(
                "// generated file {n}\nconst VALUE_{n}: u64 = {};\npub fn value_{n}() -> u64 {{ VALUE_{n} * 2 }}\n",
                n * 31
            );
            (format!("d{}/f{n}.rs", n / 100), content.into_bytes())
        })
        .collect()
}

fn as_map(files: &[(&str, Vec<u8>)]) -> std::collections::BTreeMap<String, Vec<u8>> {
    files
        .iter()
        .map(|(p, c)| ((*p).to_owned(), c.clone()))
        .collect()
}

fn as_files(files: &[(String, Vec<u8>)]) -> Vec<(&str, Vec<u8>)> {
    files.iter().map(|(p, c)| (p.as_str(), c.clone())).collect()
}

/// Every file of snapshot `id` in `store`, by path.
fn files_of(store: &Store, id: SnapshotId) -> std::collections::BTreeMap<String, Vec<u8>> {
    fn walk(
        r: &Reader,
        tree: TreeId,
        prefix: &str,
        out: &mut std::collections::BTreeMap<String, Vec<u8>>,
    ) {
        for entry in r.tree(tree).unwrap().entries() {
            let name = format!("{prefix}{}", String::from_utf8_lossy(&entry.name));
            match (entry.blob(), entry.tree()) {
                (Some(b), _) => {
                    out.insert(name, r.blob(b).unwrap());
                }
                (_, Some(t)) => walk(r, t, &format!("{name}/"), out),
                _ => {}
            }
        }
    }
    let r = store.reader().unwrap();
    let mut out = Default::default();
    walk(&r, r.snapshot(id).unwrap().tree, "", &mut out);
    out
}

/// Every pack of the remote, decoded: (pack id, entry, payload).
fn remote_packs(root: &Utf8Path) -> Vec<(String, remote::layout::PackEntry, Vec<u8>)> {
    let mut out = Vec::new();
    for pack in std::fs::read_dir(root.join("remote/packs")).unwrap() {
        let path = pack.unwrap().path();
        let id = path.file_name().unwrap().to_str().unwrap().to_owned();
        let bytes = std::fs::read(&path).unwrap();
        for (e, payload) in remote::layout::decode_pack(&bytes, &id).unwrap() {
            out.push((id.clone(), e, payload.to_vec()));
        }
    }
    out
}

#[test]
fn a_thousand_small_files_travel_as_the_stores_frames_and_come_back_byte_identical() {
    use remote::layout::Encoding;
    let f = Fixture::new();
    let a = f.store("a");
    let files = small_files();
    let id = commit(&a, &as_files(&files), vec![]);
    let remote = f.remote();
    let pushed = push(&remote, &a, &[id], &Silent).unwrap();
    assert_eq!(pushed.objects_sent, 1000 + 11 + 1, "{pushed:?}");

    // On the remote: one entry per object in the indexes, but the blobs' payloads are a
    // few group frames, each byte for byte a frame store A holds.
    let packs = remote_packs(&f.root);
    assert_eq!(packs.len(), 1012);
    let payloads: std::collections::HashSet<(&str, u64)> = packs
        .iter()
        .map(|(p, e, _)| (p.as_str(), e.offset))
        .collect();
    let frames: Vec<&(String, remote::layout::PackEntry, Vec<u8>)> = packs
        .iter()
        .filter(|(_, e, _)| e.encoding == Encoding::Frame)
        .collect();
    assert_eq!(frames.len(), 1000, "every file is a frame's member");
    assert!(
        payloads.len() < 30,
        "{} payloads for 1012 objects",
        payloads.len()
    );
    let reader = a.reader().unwrap();
    for (_, e, payload) in &frames {
        let BlobSource::Member { frame, member } = reader.blob_source(e.id.as_blob()).unwrap()
        else {
            panic!("{} is stored in a frame", e.id);
        };
        assert_eq!((member.start, u64::from(member.size)), (e.start, e.size));
        let stored = reader.frame(frame, vec![member]).unwrap();
        // One member of its frame: too little to read it whole; the payload is checked
        // against the frame's other members below, by the fetch.
        assert!(stored.is_none() || stored.unwrap().bytes() == payload.as_slice());
    }

    // What layout version 1 sent for the same objects: per object a 46-byte pack header,
    // a 54-byte index entry and its payload alone (a blob's as `blob_payload` gives it),
    // per pack its magic and the index's fixed 76 bytes.
    let blob_payloads: u64 = files
        .iter()
        .map(|(_, c)| reader.blob_payload(BlobId::of(c)).unwrap().bytes.len() as u64)
        .sum();
    let others: u64 = packs
        .iter()
        .filter(|(_, e, _)| e.kind != ObjectKind::Blob)
        .map(|(_, e, _)| u64::from(e.len))
        .sum();
    let pack_count = payloads
        .iter()
        .map(|(p, _)| *p)
        .collect::<std::collections::HashSet<_>>()
        .len() as u64;
    let v1 = 1012 * (46 + 54) + blob_payloads + others + pack_count * (8 + 76);
    eprintln!(
        "1000 small files: version 2 sent {} bytes in {} payloads; version 1: {v1} bytes in 1012",
        pushed.bytes_sent,
        payloads.len()
    );
    assert!(
        pushed.bytes_sent < v1 * 3 / 4,
        "{} vs {v1}",
        pushed.bytes_sent
    );
    drop(reader);

    // Back into a fresh store: byte for byte, the frames kept as they came.
    let b = f.store("b");
    let got = fetch(&remote, &b, &[id], Need::History, &Silent).unwrap();
    assert_eq!(got.objects_received, 1012);
    assert!(got.bytes_received < v1 / 2, "{got:?}");
    let expected: std::collections::BTreeMap<String, Vec<u8>> = files.into_iter().collect();
    assert_eq!(files_of(&b, id), expected);
    let back = b.reader().unwrap();
    let mut frames_here = std::collections::HashSet::new();
    for content in expected.values() {
        match back.blob_source(BlobId::of(content)).unwrap() {
            BlobSource::Member { frame, .. } => frames_here.insert(frame),
            other => panic!("{other:?}: a fetched member stays in its frame"),
        };
    }
    assert_eq!(
        frames_here.len(),
        frames
            .iter()
            .map(|(p, e, _)| (p, e.offset))
            .collect::<std::collections::HashSet<_>>()
            .len()
    );
    drop(back);
    let fsck = b.fsck(&FsckOptions::default(), &[]).unwrap();
    assert!(fsck.problems.is_empty(), "{:?}", fsck.problems);
}

#[test]
fn a_damaged_frame_or_member_is_refused_naming_it_and_nothing_of_it_is_stored() {
    use remote::layout::Encoding;
    let f = Fixture::new();
    let a = f.store("a");
    let files = small_files();
    let id = commit(&a, &as_files(&files[..200]), vec![]);
    let remote = f.remote();
    push(&remote, &a, &[id], &Silent).unwrap();
    let members: Vec<remote::layout::PackEntry> = remote_packs(&f.root)
        .into_iter()
        .filter(|(_, e, _)| e.encoding == Encoding::Frame)
        .map(|(_, e, _)| e)
        .collect();
    assert_eq!(members.len(), 200);
    let nothing_stored = |b: &Store| {
        let r = b.reader().unwrap();
        assert!(!r.has_snapshot(id).unwrap());
        for m in &members {
            assert!(!r.has_blob(m.id.as_blob()).unwrap(), "{} was stored", m.id);
        }
    };

    // A member placed one byte off in its index: refused, naming it.
    let moved = members[17].id;
    rewrite_indexes(&f.root, |entry| {
        if entry[2..34] == *moved.as_bytes() {
            let start = u32::from_le_bytes(entry[54..58].try_into().unwrap());
            entry[54..58].copy_from_slice(&(start + 1).to_le_bytes());
        }
    });
    let b = f.store("b");
    let err = fetch(&remote, &b, &[id], Need::Closure, &Silent).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, RemoteError::Corrupt { .. }), "{text}");
    assert!(
        text.contains(&moved.to_string()) && text.contains("origin"),
        "{text}"
    );
    nothing_stored(&b);
    rewrite_indexes(&f.root, |entry| {
        if entry[2..34] == *moved.as_bytes() {
            let start = u32::from_le_bytes(entry[54..58].try_into().unwrap());
            entry[54..58].copy_from_slice(&(start - 1).to_le_bytes());
        }
    });

    // A flipped byte inside the frame on the remote's disk: refused, naming a member.
    let frame = members[0];
    for pack in std::fs::read_dir(f.root.join("remote/packs")).unwrap() {
        let path = pack.unwrap().path();
        let mut bytes = std::fs::read(&path).unwrap();
        if bytes.len() as u64 >= frame.offset + u64::from(frame.len) {
            let at = (frame.offset + u64::from(frame.len) / 2) as usize;
            bytes[at] ^= 0x08;
            std::fs::write(&path, bytes).unwrap();
        }
    }
    let err = fetch(&remote, &b, &[id], Need::Closure, &Silent).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, RemoteError::Corrupt { .. }), "{text}");
    assert!(
        text.contains("origin") && members.iter().any(|m| text.contains(&m.id.to_string())),
        "{text}"
    );
    nothing_stored(&b);
}

/// The files of `fixtures/remote-format-1` (its README): `second` adds its second
/// snapshot's changes.
fn fixture_files(second: bool) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    for i in 1..=60 {
        out.insert(
            format!("dir/f{i}.rs"),
            format!(
                "// generated file {i}\nconst VALUE_{i}: u64 = {};\n",
                i * 31
            )
            .into_bytes(),
        );
    }
    out.insert("a.txt".into(), b"hello\n".to_vec());
    let medium: String = (0..2_000).map(|i| format!("medium line {i}\n")).collect();
    out.insert("medium.txt".into(), medium.into_bytes());
    out.insert("deep/er/c.txt".into(), b"deep\n".to_vec());
    if second {
        out.insert("a.txt".into(), b"hello again\n".to_vec());
        out.insert("dir/f61.rs".into(), b"// generated file 61\n".to_vec());
    }
    out
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

#[test]
fn a_format_1_remote_still_pulls_and_its_first_push_marks_it_format_3() {
    let f = Fixture::new();
    let fixture =
        Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/remote-format-1/remote");
    copy_dir(fixture.as_std_path(), f.root.join("remote").as_std_path());
    let marker = || std::fs::read_to_string(f.root.join("remote/cairn-remote")).unwrap();
    assert_eq!(marker(), r#"{"format":1}"#);
    let remote = f.remote();
    assert_eq!(marker(), r#"{"format":1}"#, "adding it changes nothing");

    let second = refs::get(&remote, "main").unwrap().expect("main");
    assert_eq!(second.to_hex()[..12], *"f03d7a689870");
    let a = f.store("a");
    fetch(&remote, &a, &[second], Need::History, &Silent).unwrap();
    assert_eq!(files_of(&a, second), fixture_files(true));
    let first = a.reader().unwrap().snapshot(second).unwrap().parents[0];
    assert_eq!(first.to_hex()[..12], *"1e94c0ba4026");
    assert_eq!(files_of(&a, first), fixture_files(false));
    let fsck = a.fsck(&FsckOptions::default(), &[]).unwrap();
    assert!(fsck.problems.is_empty(), "{:?}", fsck.problems);

    // This build's push: the marker says 3 before its packs land; the old packs stay.
    let mut files: Vec<(String, Vec<u8>)> = fixture_files(true).into_iter().collect();
    files.extend(small_files().into_iter().take(100));
    let third = commit(&a, &as_files(&files), vec![second]);
    let old_packs: Vec<_> = std::fs::read_dir(f.root.join("remote/packs"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    push(&remote, &a, &[third], &Silent).unwrap();
    assert_eq!(marker(), r#"{"format":3}"#);
    let mut versions = std::collections::BTreeMap::new();
    for pack in std::fs::read_dir(f.root.join("remote/packs")).unwrap() {
        let entry = pack.unwrap();
        let bytes = std::fs::read(entry.path()).unwrap();
        let old = old_packs.contains(&entry.file_name());
        *versions.entry((old, bytes[..8].to_vec())).or_insert(0) += 1;
    }
    assert_eq!(
        versions,
        [
            ((false, b"CAIRNPK3".to_vec()), 2),
            ((true, b"CAIRNPK1".to_vec()), 4)
        ]
        .into(),
    );
    // A fresh store reads across both versions.
    let b = f.store("b");
    fetch(&remote, &b, &[third], Need::History, &Silent).unwrap();
    let expected: std::collections::BTreeMap<String, Vec<u8>> = files.into_iter().collect();
    assert_eq!(files_of(&b, third), expected);
    assert_eq!(files_of(&b, first), fixture_files(false));
}

#[test]
fn remote_gc_keeps_a_pack_while_any_member_of_a_frame_in_it_is_live() {
    let f = Fixture::new();
    let a = f.store("a");
    let files = small_files();
    let all = commit(&a, &as_files(&files[..100]), vec![]);
    // Later, only the first 60 of them: every one already on the remote, in the frame.
    let some = commit(&a, &as_files(&files[..60]), vec![]);
    let remote = f.remote();
    push(&remote, &a, &[all], &Silent).unwrap();
    let frame_pack = remote_packs(&f.root)
        .into_iter()
        .find(|(_, e, _)| e.encoding == remote::layout::Encoding::Frame)
        .map(|(p, _, _)| p)
        .unwrap();
    let pushed = push(&remote, &a, &[some], &Silent).unwrap();
    assert_eq!(
        pushed.objects_sent, 3,
        "its two trees (d0 with 60 files, the root) and itself: {pushed:?}"
    );
    refs::update(&remote, "main", RefUpdate::Set(some), None).unwrap();
    let now = gc(&remote, &a, &NOW).unwrap();
    assert_eq!(
        now.packs_removed, 1,
        "the first push's snapshot pack: {now:?}"
    );
    assert!(f.root.join("remote/packs").join(&frame_pack).exists());
    let b = f.store("b");
    fetch(&remote, &b, &[some], Need::History, &Silent).unwrap();
    let expected: std::collections::BTreeMap<String, Vec<u8>> =
        files.into_iter().take(60).collect();
    assert_eq!(files_of(&b, some), expected);
}

#[test]
fn a_few_members_of_a_large_frame_travel_alone_both_ways() {
    use remote::layout::Encoding;
    let f = Fixture::new();
    let a = f.store("a");
    let files = small_files();
    let all = commit(&a, &as_files(&files), vec![]);
    let few = commit(&a, &as_files(&files[..10]), vec![]);
    let remote = f.remote();

    // Push: ten members of a frame of hundreds go alone, not with the whole frame.
    push(&remote, &a, &[few], &Silent).unwrap();
    let packs = remote_packs(&f.root);
    let blobs: Vec<_> = packs
        .iter()
        .filter(|(_, e, _)| e.kind == ObjectKind::Blob)
        .collect();
    assert_eq!(blobs.len(), 10);
    assert!(blobs.iter().all(|(_, e, _)| e.encoding != Encoding::Frame));
    let b = f.store("b");
    fetch(&remote, &b, &[few], Need::History, &Silent).unwrap();
    let expected = |range: std::ops::Range<usize>| -> std::collections::BTreeMap<String, Vec<u8>> {
        files[range].iter().cloned().collect()
    };
    assert_eq!(files_of(&b, few), expected(0..10));

    // Fetch: ten members of a frame the remote holds whole are kept apart, in a frame of
    // this store's own, not with the other members' bytes.
    push(&remote, &a, &[all], &Silent).unwrap();
    let middle = commit(&a, &as_files(&files[500..510]), vec![]);
    let pushed = push(&remote, &a, &[middle], &Silent).unwrap();
    assert_eq!(
        pushed.objects_sent, 3,
        "two trees and the snapshot: {pushed:?}"
    );
    let remote_frame = remote_packs(&f.root)
        .into_iter()
        .find(|(_, e, _)| e.id == BlobId::of(&files[505].1).into())
        .map(|(_, e, _)| e)
        .unwrap();
    assert_eq!(remote_frame.encoding, Encoding::Frame);
    let c = f.store("c");
    fetch(&remote, &c, &[middle], Need::History, &Silent).unwrap();
    assert_eq!(files_of(&c, middle), expected(500..510));
    let reader = c.reader().unwrap();
    let mut here = Vec::new();
    for (_, content) in &files[500..510] {
        let BlobSource::Member { frame, member } = reader.blob_source(BlobId::of(content)).unwrap()
        else {
            panic!("ten small files written together make a frame");
        };
        here.push((frame, member));
    }
    let frame = reader
        .frame(here[0].0, here.iter().map(|(_, m)| *m).collect())
        .unwrap()
        .expect("all ten of it");
    assert!(
        (frame.bytes().len() as u32) < remote_frame.len / 4,
        "{} bytes here, the remote's frame {}",
        frame.bytes().len(),
        remote_frame.len
    );
}

#[test]
fn a_ref_named_like_another_refs_entry_never_blocks_it() {
    let f = Fixture::new();
    let a = f.store("a");
    let one = commit(&a, &files(1), vec![]);
    let two = commit(&a, &files(2), vec![one]);
    let remote = f.remote();
    push(&remote, &a, &[two], &Silent).unwrap();
    refs::update(&remote, "x", RefUpdate::Set(one), None).unwrap();
    // Names whose parts read as `x`'s next entries, of either case.
    for name in ["x/0000000000000002", "x/000000000000000A/0000000000000001"] {
        refs::update(&remote, name, RefUpdate::Set(two), None).unwrap();
    }
    refs::update(&remote, "x", RefUpdate::Set(two), Some(one)).unwrap();
    refs::update(&remote, "x", RefUpdate::Set(one), Some(two)).unwrap();
    assert_eq!(refs::get(&remote, "x").unwrap(), Some(one));
    assert_eq!(refs::get(&remote, "x/0000000000000002").unwrap(), Some(two));
    refs::update(
        &remote,
        "x/0000000000000002",
        RefUpdate::Set(one),
        Some(two),
    )
    .unwrap();
    let listed: Vec<(String, SnapshotId)> = refs::list(&remote)
        .unwrap()
        .into_iter()
        .map(|r| (r.name, r.snapshot))
        .collect();
    assert_eq!(
        listed,
        [
            ("x".to_owned(), one),
            ("x/0000000000000002".to_owned(), one),
            ("x/000000000000000A/0000000000000001".to_owned(), two),
        ]
    );
    // Remote gc drops each ref's old entries and keeps every ref's latest.
    let out = gc(&remote, &a, &NOW).unwrap();
    assert_eq!(out.ref_entries_dropped, 3, "{out:?}");
    let again: Vec<String> = refs::list(&remote)
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(again.len(), 3, "{again:?}");
    assert_eq!(refs::get(&remote, "x").unwrap(), Some(one));
}

#[test]
fn junk_under_index_is_skipped_and_named_and_every_pull_and_push_goes_on() {
    let f = Fixture::new();
    let a = f.store("a");
    let one = commit(&a, &files(1), vec![]);
    let remote = f.remote();
    push(&remote, &a, &[one], &Silent).unwrap();
    let index = f.root.join("remote/index");
    // A damaged index of a pack that is not there, a stray file, and a name no key can
    // have.
    let junk = "ab".repeat(32);
    std::fs::write(index.join(&junk), b"not an index").unwrap();
    std::fs::write(index.join("README"), b"notes").unwrap();
    std::fs::write(index.join("bad\u{1}name"), b"x").unwrap();

    let b = f.store("b");
    let got = fetch(&remote, &b, &[one], Need::History, &Silent).unwrap();
    assert_eq!(files_of(&b, one), as_map(&files(1)));
    assert_eq!(got.warnings.len(), 3, "{:?}", got.warnings);
    for name in [junk.as_str(), "README", "bad"] {
        assert!(
            got.warnings
                .iter()
                .any(|w| w.contains(name) && w.contains("origin")),
            "{name}: {:?}",
            got.warnings
        );
    }
    let two = commit(&a, &files(2), vec![one]);
    let pushed = push(&remote, &a, &[two], &Silent).unwrap();
    assert_eq!(pushed.warnings.len(), 3, "{pushed:?}");
    fetch(&remote, &b, &[two], Need::History, &Silent).unwrap();
    assert_eq!(files_of(&b, two), as_map(&files(2)));

    // Two snapshots no ref reaches, the index of one's pack damaged: remote gc deletes
    // the other's pack and leaves the pack it cannot read alone.
    let lone = [
        commit(&a, &[("lone", b"1".to_vec())], vec![]),
        commit(&a, &[("lone", b"2".to_vec())], vec![]),
    ];
    for id in lone {
        push(&remote, &a, &[id], &Silent).unwrap();
    }
    let pack_of = |id: SnapshotId| {
        remote_packs(&f.root)
            .into_iter()
            .find(|(_, e, _)| e.kind == ObjectKind::Snapshot && e.id == id.into())
            .map(|(p, _, _)| p)
            .unwrap()
    };
    let (damaged, deleted) = (pack_of(lone[0]), pack_of(lone[1]));
    std::fs::write(index.join(&damaged), b"damaged").unwrap();
    refs::update(&remote, "main", RefUpdate::Set(two), None).unwrap();
    // From a store that never read that index: the pushing one knows it from its push.
    gc(&remote, &f.store("c"), &NOW).unwrap();
    assert!(f.root.join("remote/packs").join(&damaged).exists());
    assert!(index.join(&damaged).exists());
    assert!(!f.root.join("remote/packs").join(&deleted).exists());
    assert!(index.join(&junk).exists(), "junk is not cairn's to delete");
}

#[test]
fn a_format_2_remote_streams_its_whole_large_blobs_and_its_crossed_refs_update_again() {
    let f = Fixture::new();
    let fixture =
        Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/remote-format-2/remote");
    copy_dir(fixture.as_std_path(), f.root.join("remote").as_std_path());
    let marker = || std::fs::read_to_string(f.root.join("remote/cairn-remote")).unwrap();
    assert_eq!(marker(), r#"{"format":2}"#);
    let remote = f.remote();
    let expected = |second: bool| {
        let mut out = std::collections::BTreeMap::new();
        for i in 1..=20 {
            out.insert(
                format!("dir/f{i}.rs"),
                format!("// file {i}\n").into_bytes(),
            );
        }
        let a = if second { "again\n" } else { "hello\n" };
        out.insert("a.txt".to_owned(), a.as_bytes().to_vec());
        let big: String = (0..17000)
            .map(|i| format!("{i:08}{}\n", ".".repeat(55)))
            .collect();
        out.insert("big.bin".to_owned(), big.into_bytes());
        out
    };
    let listed: Vec<(String, String)> = refs::list(&remote)
        .unwrap()
        .into_iter()
        .map(|r| (r.name, r.snapshot.to_hex()[..12].to_owned()))
        .collect();
    assert_eq!(
        listed,
        [
            ("main".to_owned(), "711f3e201f26".to_owned()),
            (
                "main/0000000000000003".to_owned(),
                "fd42c75ca8cc".to_owned()
            )
        ]
    );
    let second = refs::get(&remote, "main").unwrap().unwrap();
    let first = refs::get(&remote, "main/0000000000000003")
        .unwrap()
        .unwrap();
    let a = f.store("a");
    fetch(&remote, &a, &[second], Need::History, &Silent).unwrap();
    assert_eq!(files_of(&a, second), expected(true));
    assert_eq!(files_of(&a, first), expected(false));
    // The large blob is stored in chunks, as a local write stores it.
    let big = BlobId::of(&expected(true)["big.bin"]);
    assert_eq!(a.reader().unwrap().blob_chunks(big).unwrap().ids().len(), 2);
    let fsck = a.fsck(&FsckOptions::default(), &[]).unwrap();
    assert!(fsck.problems.is_empty(), "{:?}", fsck.problems);

    // `main`'s next entry, 3, is the folder of the ref that build set: it is stepped past.
    refs::update(&remote, "main", RefUpdate::Set(first), Some(second)).unwrap();
    assert_eq!(refs::get(&remote, "main").unwrap(), Some(first));
    assert!(f.root.join("remote/refs/main/0000000000000004").is_file());
    refs::update(
        &remote,
        "main/0000000000000003",
        RefUpdate::Set(second),
        Some(first),
    )
    .unwrap();
    assert_eq!(
        refs::get(&remote, "main/0000000000000003").unwrap(),
        Some(second)
    );
    assert!(
        f.root
            .join("remote/refs/main/=0000000000000003/0000000000000002")
            .is_file()
    );

    // A push marks it format 3 first; a fresh store reads across both versions.
    let third = commit(&a, &as_map_files(&expected(false)), vec![second]);
    push(&remote, &a, &[third], &Silent).unwrap();
    assert_eq!(marker(), r#"{"format":3}"#);
    let b = f.store("b");
    fetch(&remote, &b, &[third], Need::History, &Silent).unwrap();
    assert_eq!(files_of(&b, third), expected(false));
    assert_eq!(files_of(&b, first), expected(false));
}

fn as_map_files(files: &std::collections::BTreeMap<String, Vec<u8>>) -> Vec<(&str, Vec<u8>)> {
    files.iter().map(|(p, c)| (p.as_str(), c.clone())).collect()
}

/// Incompressible bytes.
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
        std::fs::remove_file(f.root.join("remote/index").join(pack)).unwrap();
    }
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
    let index_path = f.root.join("remote/index").join(&pack);
    let mut index = std::fs::read(&index_path).unwrap();
    index[8..40].copy_from_slice(blake3::hash(&bytes).as_bytes());
    let body = index.len() - 32;
    let check = *blake3::hash(&index[..body]).as_bytes();
    index[body..].copy_from_slice(&check);
    std::fs::write(f.root.join("remote/index").join(&new_id), index).unwrap();
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
