//! The fixture and helpers every group of tests uses.

use camino::{Utf8Path, Utf8PathBuf};
use cas::*;
use remote::{Probe, Remote, RemoteConfig, RemoteGcOptions, probe};

pub(crate) struct Fixture {
    pub(crate) _dir: tempfile::TempDir,
    pub(crate) root: Utf8PathBuf,
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(dir.path()).unwrap().to_owned();
        Fixture { _dir: dir, root }
    }

    pub(crate) fn store(&self, name: &str) -> Store {
        Store::open(
            &self.root.join(name),
            &OpenOptions {
                create: true,
                ..OpenOptions::default()
            },
        )
        .unwrap()
    }

    pub(crate) fn remote(&self) -> Remote {
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
pub(crate) const NOW: RemoteGcOptions = RemoteGcOptions {
    grace_seconds: 0,
    dry_run: false,
};

/// Files as path components and content.
pub(crate) type Split<'a> = Vec<(Vec<&'a str>, &'a Vec<u8>)>;

/// A snapshot of `files` (nested paths allowed) with `parents`.
pub(crate) fn commit(
    store: &Store,
    files: &[(&str, Vec<u8>)],
    parents: Vec<SnapshotId>,
) -> SnapshotId {
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

pub(crate) fn files(seed: u8) -> Vec<(&'static str, Vec<u8>)> {
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

/// Rewrites every index of the remote with `edit` applied to each entry's bytes, keeping
/// the checksum right, so only the entry's meaning is hostile.
pub(crate) fn rewrite_indexes(root: &Utf8Path, edit: impl Fn(&mut [u8])) {
    const FIXED: usize = 8 + 32 + 4;
    const ENTRY: usize = 1 + 1 + 32 + 8 + 8 + 4 + 4;
    for path in index_files(root) {
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

/// A thousand small generated source files in ten directories (as
/// `fixtures/remote-format-1/README.md`'s measurement by hand made them).
pub(crate) fn small_files() -> Vec<(String, Vec<u8>)> {
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

pub(crate) fn as_map(files: &[(&str, Vec<u8>)]) -> std::collections::BTreeMap<String, Vec<u8>> {
    files
        .iter()
        .map(|(p, c)| ((*p).to_owned(), c.clone()))
        .collect()
}

pub(crate) fn as_files(files: &[(String, Vec<u8>)]) -> Vec<(&str, Vec<u8>)> {
    files.iter().map(|(p, c)| (p.as_str(), c.clone())).collect()
}

/// Every file of snapshot `id` in `store`, by path.
pub(crate) fn files_of(
    store: &Store,
    id: SnapshotId,
) -> std::collections::BTreeMap<String, Vec<u8>> {
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
pub(crate) fn remote_packs(root: &Utf8Path) -> Vec<(String, remote::layout::PackEntry, Vec<u8>)> {
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

/// The files of `fixtures/remote-format-1` (its README): `second` adds its second
/// snapshot's changes.
pub(crate) fn fixture_files(second: bool) -> std::collections::BTreeMap<String, Vec<u8>> {
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

pub(crate) fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
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

pub(crate) fn as_map_files(
    files: &std::collections::BTreeMap<String, Vec<u8>>,
) -> Vec<(&str, Vec<u8>)> {
    files.iter().map(|(p, c)| (p.as_str(), c.clone())).collect()
}

/// Incompressible bytes.
pub(crate) fn noise(seed: u64, n: usize) -> Vec<u8> {
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

/// Every file under the remote's `index/` (in its folders, version 5's names).
pub(crate) fn index_files(root: &Utf8Path) -> Vec<camino::Utf8PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![root.join("remote/index")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = camino::Utf8PathBuf::from_path_buf(entry.unwrap().path()).unwrap();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}

/// The file of the index of `pack` on the remote under `root`, whatever its name's layout.
pub(crate) fn index_path(root: &Utf8Path, pack: &str) -> camino::Utf8PathBuf {
    index_files(root)
        .into_iter()
        .find(|path| path.as_str().ends_with(pack))
        .unwrap_or_else(|| panic!("no index of pack {pack}"))
}
