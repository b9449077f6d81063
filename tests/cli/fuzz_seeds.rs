//! Seed corpora for the fuzz targets in `fuzz/`: real records of a real store, so each
//! fuzzer starts from valid structure. Not a test; run it before fuzzing (README,
//! "Fuzzing"):
//!
//!     cargo test --test cli write_fuzz_seeds -- --ignored
//!
//! Every seed is checked to decode here, so the generator cannot silently rot.

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};
use cas::{OpenOptions, Store, Tree, TreeEntry};
use fs_manager::RegistryRead as _;
use serde_json::json;

use crate::support::Env;

struct Corpus {
    root: Utf8PathBuf,
    written: BTreeMap<&'static str, usize>,
}

impl Corpus {
    fn add(&mut self, target: &'static str, bytes: &[u8]) {
        let dir = self.root.join(target);
        std::fs::create_dir_all(&dir).unwrap();
        let name = blake3::hash(bytes).to_hex();
        std::fs::write(dir.join(&name[..16]), bytes).unwrap();
        *self.written.entry(target).or_default() += 1;
    }
}

fn with_prefix(prefix: u8, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![prefix];
    out.extend_from_slice(bytes);
    out
}

#[test]
#[ignore = "writes fuzz/corpus; run by hand before fuzzing"]
fn write_fuzz_seeds() {
    let mut corpus = Corpus {
        root: Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus"),
        written: BTreeMap::new(),
    };

    // A worktree with a subdirectory, a symlink, an executable, a checkpoint and a task.
    let env = Env::new();
    let wt = env.path().join("wt");
    std::fs::create_dir_all(wt.join("src/deep")).unwrap();
    std::fs::write(wt.join("README.md"), "# seed\n").unwrap();
    std::fs::write(wt.join("src/lib.rs"), "pub fn f() {}\n".repeat(40)).unwrap();
    std::fs::write(wt.join("src/deep/data.bin"), [0u8, 1, 2, 255]).unwrap();
    std::os::unix::fs::symlink("README.md", wt.join("link")).unwrap();
    let (code, _) = env.json(&["init"]);
    assert_eq!(code, 0);
    let (code, out) = env.json(&["checkpoint", wt.as_str(), "--name", "first"]);
    assert_eq!(code, 0, "{out}");
    std::fs::write(wt.join("README.md"), "# seed, changed\n").unwrap();
    let (code, out) = env.json(&["snapshot", wt.as_str(), "--message", "second"]);
    assert_eq!(code, 0, "{out}");

    let store = Store::open(&env.store(), &OpenOptions::default()).unwrap();
    // A tree large enough to be stored compressed.
    let wide = Tree::new(
        (0..40)
            .map(|i| TreeEntry {
                name: format!("file-{i:03}.txt").into_bytes(),
                kind: cas::EntryKind::File,
                id: cas::BlobId::of(format!("{i}").as_bytes()).into(),
                size: i,
            })
            .collect(),
    )
    .unwrap();
    let reader = store.reader().unwrap();
    let root = Utf8PathBuf::from_path_buf(std::fs::canonicalize(&wt).unwrap()).unwrap();
    let record = reader.worktree(&root).unwrap().expect("registered");
    let head = record.head.expect("a head");

    // Objects: every snapshot and tree, in their encodings and as stored.
    let mut trees = vec![wide.clone()];
    let mut blobs = Vec::new();
    let mut snapshots = Vec::new();
    for (id, snap) in reader.log(head, None).unwrap() {
        assert_eq!(snap.id(), id);
        let mut pending = vec![snap.tree];
        while let Some(t) = pending.pop() {
            let tree = reader.tree(t).unwrap();
            for e in tree.entries() {
                match e.tree() {
                    Some(sub) => pending.push(sub),
                    None => blobs.push(reader.blob(e.id.as_blob()).unwrap()),
                }
            }
            trees.push(tree);
        }
        snapshots.push(snap);
    }
    for tree in &trees {
        let encoded = tree.encode();
        corpus.add("tree", &encoded);
        corpus.add("tree_record", &cas::fuzzing::encode_tree_record(tree));
        corpus.add("serve_put_objects", &with_prefix(1, &encoded));
    }
    for snap in &snapshots {
        corpus.add("snapshot", &snap.encode());
        corpus.add("serve_put_objects", &with_prefix(2, &snap.encode()));
    }
    for blob in &blobs {
        corpus.add("serve_put_objects", &with_prefix(0, blob));
        // A raw payload, whose content is itself.
        corpus.add("blob_record", &with_prefix(0, blob));
    }
    // A zstd payload: the compressed body of the wide tree's record.
    let compressed = cas::fuzzing::encode_tree_record(&wide);
    assert_eq!(compressed[0], 1, "the wide tree is stored compressed");
    corpus.add("blob_record", &with_prefix(1, &compressed[1..]));
    // Location records: packed raw, packed zstd, chunked (docs/design.md).
    let mut packed = vec![0u8];
    packed.extend_from_slice(&4096u64.to_le_bytes());
    packed.extend_from_slice(&57u32.to_le_bytes());
    packed.extend_from_slice(&57u64.to_le_bytes());
    for codec in [0u8, 1] {
        let mut record = packed.clone();
        record.push(codec);
        assert!(cas::fuzzing::BlobLocation::decode(&record).is_some());
        corpus.add("blob_record", &record);
    }
    let mut chunked = vec![1u8];
    chunked.extend_from_slice(&(3u64 << 20).to_le_bytes());
    for i in 0..3u8 {
        chunked.extend_from_slice(cas::BlobId::of(&[i]).as_bytes());
    }
    assert!(cas::fuzzing::BlobLocation::decode(&chunked).is_some());
    corpus.add("blob_record", &chunked);
    // Format 3's member of a frame of small blobs (varints); and a frame (flag 4: read a
    // member of it).
    let member = [2u8, 0x80, 0x20, 90, 4, 57];
    assert!(cas::fuzzing::BlobLocation::decode(&member).is_some());
    corpus.add("blob_record", &member);
    corpus.add("blob_record", &with_prefix(4, &compressed[1..]));
    // A tree record in the blob log: codec 2, offset 0 and length as varints, then the log.
    let mut in_log = vec![2u8, 0];
    let mut len = compressed.len() as u64 - 1;
    while len >= 0x80 {
        in_log.push((len as u8 & 0x7f) | 0x80);
        len >>= 7;
    }
    in_log.push(len as u8);
    let record_len = in_log.len();
    in_log.extend_from_slice(&compressed[1..]);
    let read =
        cas::fuzzing::decode_tree_record(wide.id(), &in_log[..record_len], &in_log[record_len..]);
    assert_eq!(read.ok().as_ref(), Some(&wide));
    corpus.add("tree_record", &in_log);

    // A remote's pack of these objects and its index (without the checksum, which the
    // target appends).
    let mut builder = remote::layout::PackBuilder::default();
    for blob in &blobs {
        builder
            .add(
                cas::ObjectKind::Blob,
                cas::BlobId::of(blob).into(),
                false,
                blob.len() as u64,
                blob,
            )
            .unwrap();
    }
    for tree in &trees {
        let encoded = tree.encode();
        builder
            .add(
                cas::ObjectKind::Tree,
                tree.id().into(),
                false,
                encoded.len() as u64,
                &encoded,
            )
            .unwrap();
    }
    // The store's group frame of the first snapshot's small files, as a push sends it.
    let mut frames: Vec<(cas::FrameRef, Vec<cas::FrameMember>)> = Vec::new();
    for blob in &blobs {
        if let cas::BlobSource::Member { frame, member } =
            reader.blob_source(cas::BlobId::of(blob)).unwrap()
        {
            match frames.iter_mut().find(|(f, _)| *f == frame) {
                Some((_, members)) if !members.contains(&member) => members.push(member),
                Some(_) => {}
                None => frames.push((frame, vec![member])),
            }
        }
    }
    assert!(
        !frames.is_empty(),
        "small files written together make a frame"
    );
    for (at, members) in frames {
        let frame = reader.frame(at, members).unwrap().expect("all its members");
        builder.add_frame(frame.bytes(), frame.members()).unwrap();
    }
    let pack = builder.finish();
    let entries = remote::layout::decode_index(&pack.index, &pack.id).unwrap();
    assert!(
        entries
            .iter()
            .any(|e| e.encoding == remote::layout::Encoding::Frame)
    );
    assert!(remote::layout::decode_pack(&pack.bytes, &pack.id).is_ok());
    corpus.add("remote_layout", &pack.index[..pack.index.len() - 32]);
    corpus.add("remote_layout", &pack.bytes);
    // Layout version 1, as `fixtures/remote-format-1` holds it.
    let v1 =
        Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/remote-format-1/remote");
    for entry in std::fs::read_dir(v1.join("index")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let index = std::fs::read(v1.join("index").join(&name)).unwrap();
        let pack = std::fs::read(v1.join("packs").join(&name)).unwrap();
        assert!(remote::layout::decode_index(&index, &name).is_ok());
        assert!(remote::layout::decode_pack(&pack, &name).is_ok());
        corpus.add("remote_layout", &index[..index.len() - 32]);
        corpus.add("remote_layout", &pack);
    }

    // The registry record, the op log and the stat cache of the worktree.
    let record_json = serde_json::to_vec(&record).unwrap();
    corpus.add("registry_record", &record_json);
    let ops = reader.ops(&root).unwrap();
    assert!(!ops.is_empty());
    for op in &ops {
        corpus.add("registry_record", &serde_json::to_vec(op).unwrap());
    }
    let states = reader.file_states(&root).unwrap();
    assert!(states.len() > 1, "a cache record per directory");
    for (_, value) in &states {
        corpus.add("stat_cache", value);
    }

    // An intent journal, as a rollback of one path writes it.
    let journal = json!({
        "op": "rollback",
        "pid": 4242,
        "staging": ".cairn-staging-4242-1",
        "target": snapshots[0].tree,
        "paths": [b"README.md".to_vec(), b"src/lib.rs".to_vec()],
        "record": record,
        "entry": ops.last(),
        "started": "2026-11-23T10:00:00Z",
    });
    let journal = serde_json::to_vec(&journal).unwrap();
    fs_manager::fuzzing::reencode_journal(&journal).expect("a journal");
    corpus.add("journal", &journal);

    // Names and ids.
    for text in [
        "main".to_owned(),
        "agents/run-1".to_owned(),
        head.to_hex(),
        head.short(10),
        "task=42".to_owned(),
        "README.md".to_owned(),
    ] {
        corpus.add("refs_and_ids", text.as_bytes());
    }

    // Request bodies of `cairn serve`.
    let objects: Vec<cairn_client::Object> = [
        (cairn_client::WireObjectKind::Blob, blobs[0].clone()),
        (cairn_client::WireObjectKind::Tree, trees[1].encode()),
        (
            cairn_client::WireObjectKind::Snapshot,
            snapshots[0].encode(),
        ),
    ]
    .into_iter()
    .map(|(kind, data)| cairn_client::Object {
        kind,
        id: match kind {
            cairn_client::WireObjectKind::Blob => cas::BlobId::of(&data).to_hex(),
            cairn_client::WireObjectKind::Tree => Tree::decode(&data).unwrap().id().to_hex(),
            cairn_client::WireObjectKind::Snapshot => {
                cas::Snapshot::decode(&data).unwrap().id().to_hex()
            }
        },
        data,
    })
    .collect();
    let body = serde_json::to_vec(&json!({ "objects": objects })).unwrap();
    corpus.add("serve_put_objects", &body);
    for args in [
        json!({ "worktree": "/w", "message": "turn 3" }),
        json!({ "worktree": "/w", "snapshot": "abc123", "dry_run": true, "paths": ["a", "b/c"] }),
        json!({ "snapshot": "main", "into": "/repo", "branch": "agent", "checkout": false }),
        json!({ "target": "/w", "max_count": 5 }),
        json!({ "dir": "/w", "to": "first" }),
    ] {
        corpus.add("serve_verb_args", &serde_json::to_vec(&args).unwrap());
    }
    let request = json!({
        "cwd": env.path(),
        "request": { "verb": "status", "args": { "worktree": "wt" } },
    });
    corpus.add("serve_call", &serde_json::to_vec(&request).unwrap());
    let reply = cairn_client::StreamLine::Reply {
        status: 409,
        body: json!({ "exit": 1, "outcome": { "verb": "fsck", "outcome": { "message": "\u{ff}" } } }),
    };
    corpus.add("serve_call", &serde_json::to_vec(&reply).unwrap());
    let line = cairn_client::StreamLine::Progress(cairn_client::ProgressEvent {
        what: "checkout".into(),
        files: 1,
        total_files: 2,
        bytes: 3,
        total_bytes: 4,
        done: false,
    });
    corpus.add("serve_call", &serde_json::to_vec(&line).unwrap());

    eprintln!("seeds written to {}: {:?}", corpus.root, corpus.written);
}
