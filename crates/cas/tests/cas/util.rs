use camino::{Utf8Path, Utf8PathBuf};
use cas::*;

pub struct TempStore {
    pub _dir: tempfile::TempDir,
    pub root: Utf8PathBuf,
    pub store: Store,
}

pub fn temp_store() -> TempStore {
    let dir = tempfile::tempdir().unwrap();
    let root = Utf8Path::from_path(dir.path()).unwrap().join("store");
    let store = Store::open(
        &root,
        &OpenOptions {
            create: true,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    TempStore {
        _dir: dir,
        root,
        store,
    }
}

/// Deterministic pseudo-random bytes (incompressible).
pub fn noise(seed: u64, n: usize) -> Vec<u8> {
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
pub fn commit(
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
