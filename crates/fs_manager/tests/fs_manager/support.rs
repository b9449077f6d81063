use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;

use camino::{Utf8Path, Utf8PathBuf};
use cas::{EntryKind, OpenOptions, SnapshotId, Store};

pub struct Env {
    pub dir: tempfile::TempDir,
    pub store: Store,
    pub worktrees: fs_manager::Worktrees,
}

impl Env {
    pub fn new() -> Env {
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
        Env {
            dir,
            store,
            worktrees: fs_manager::Worktrees::new(),
        }
    }

    pub fn path(&self, rel: &str) -> Utf8PathBuf {
        Utf8Path::from_path(self.dir.path()).unwrap().join(rel)
    }
}

/// What a path holds, for comparisons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    File(Vec<u8>),
    Exec(Vec<u8>),
    Link(Vec<u8>),
}

/// Writes `spec` under `root`: `name -> Node`; `/` in names makes directories.
/// A path inside a tree, for comparing with outcomes.
pub fn repo(text: &str) -> path_policy::RepoPathBuf {
    path_policy::RepoPathBuf::new(text).unwrap()
}

pub fn write_tree(root: &Utf8Path, spec: &[(&str, Node)]) {
    for (name, node) in spec {
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let _ = std::fs::remove_file(&path);
        match node {
            Node::File(c) | Node::Exec(c) => {
                std::fs::write(&path, c).unwrap();
                let mode = if matches!(node, Node::Exec(_)) {
                    0o755
                } else {
                    0o644
                };
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            }
            Node::Link(t) => std::os::unix::fs::symlink(OsStr::from_bytes(t), &path).unwrap(),
        }
    }
}

pub fn file(c: &str) -> Node {
    Node::File(c.as_bytes().to_vec())
}

/// Every non-directory under `root` (not following links), except below the given
/// top-level names.
pub fn disk(root: &Utf8Path, except: &[&str]) -> BTreeMap<Vec<u8>, Node> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.as_std_path().to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p
                .strip_prefix(root)
                .unwrap()
                .as_os_str()
                .as_bytes()
                .to_vec();
            if except
                .iter()
                .any(|x| rel == x.as_bytes() || rel.starts_with(format!("{x}/").as_bytes()))
            {
                continue;
            }
            let meta = p.symlink_metadata().unwrap();
            if meta.file_type().is_symlink() {
                out.insert(
                    rel,
                    Node::Link(
                        std::fs::read_link(&p)
                            .unwrap()
                            .as_os_str()
                            .as_bytes()
                            .to_vec(),
                    ),
                );
            } else if meta.is_dir() {
                stack.push(p);
            } else {
                let c = std::fs::read(&p).unwrap();
                out.insert(
                    rel,
                    if meta.permissions().mode() & 0o100 != 0 {
                        Node::Exec(c)
                    } else {
                        Node::File(c)
                    },
                );
            }
        }
    }
    out
}

/// Every file of a snapshot.
pub fn snapshot_files(store: &Store, id: SnapshotId) -> BTreeMap<Vec<u8>, Node> {
    let r = store.reader().unwrap();
    let mut out = BTreeMap::new();
    let mut stack = vec![(Vec::new(), r.snapshot(id).unwrap().tree)];
    while let Some((prefix, tree)) = stack.pop() {
        for e in r.tree(tree).unwrap().entries() {
            let mut path = prefix.clone();
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(&e.name);
            match e.kind {
                EntryKind::Tree => stack.push((path, e.id.as_tree())),
                EntryKind::File => {
                    drop(out.insert(path, Node::File(r.blob(e.id.as_blob()).unwrap())))
                }
                EntryKind::Executable => {
                    drop(out.insert(path, Node::Exec(r.blob(e.id.as_blob()).unwrap())))
                }
                EntryKind::Symlink => {
                    drop(out.insert(path, Node::Link(r.blob(e.id.as_blob()).unwrap())))
                }
            }
        }
    }
    out
}

pub fn keys(m: &BTreeMap<Vec<u8>, Node>) -> Vec<String> {
    m.keys()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect()
}

/// Sleeps past the racy-timestamp margin so the stat cache is trusted again.
pub fn settle() {
    std::thread::sleep(fs_manager::RACY_MARGIN + std::time::Duration::from_millis(20));
}
