//! `cairn onboard SRC --git REV`: a git commit's tree as a snapshot.

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};
use cas::{
    EntryKind, GitSource, ObjectId, PreparedBlob, Snapshot, SnapshotId, Source, Store, Tree,
    TreeEntry, TreeId, WriteBatch,
};

use crate::git::BoxError;

/// What [`import`] stored.
#[derive(Debug, Clone)]
pub struct ImportedCommit {
    /// The new snapshot.
    pub snapshot: SnapshotId,
    /// Its tree.
    pub tree: TreeId,
    /// The commit, as hex.
    pub commit: String,
    /// Files and symlinks imported.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Entries left out (submodules), with reasons.
    pub skipped: Vec<(Vec<u8>, String)>,
}

/// Importing failed; nothing was recorded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// The path is not a git repository.
    #[error("{path}: not a git repository ({source})")]
    NotARepository {
        /// The path given.
        path: Utf8PathBuf,
        /// What gitoxide said.
        source: BoxError,
    },
    /// The revision does not name a commit.
    #[error("{path}: no commit '{rev}' ({source})")]
    UnknownRevision {
        /// The repository.
        path: Utf8PathBuf,
        /// The revision.
        rev: String,
        /// What gitoxide said.
        source: BoxError,
    },
    /// The commit's tree holds a name cairn refuses; the whole tree is refused.
    #[error("{path}: commit {commit} has a path cairn refuses: {name}: {reason}")]
    Refused {
        /// The repository.
        path: Utf8PathBuf,
        /// The commit.
        commit: String,
        /// The offending path.
        name: String,
        /// The rule.
        #[source]
        reason: cas::ObjectError,
    },
    /// Reading from the repository failed.
    #[error("{path}: {source}")]
    Git {
        /// The repository.
        path: Utf8PathBuf,
        /// What gitoxide said.
        source: BoxError,
    },
    /// The caller's records for the snapshot could not be added.
    #[error("{path}: recording the import: {source}")]
    Record {
        /// The repository.
        path: Utf8PathBuf,
        /// Why.
        source: BoxError,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] cas::StoreError),
}

/// One directory being imported: its git entries, and the cairn entries built so far.
struct Frame {
    prefix: Vec<u8>,
    entries: Vec<(Vec<u8>, gix::objs::tree::EntryKind, gix::ObjectId)>,
    next: usize,
    built: Vec<TreeEntry>,
}

/// Imports the tree of commit `rev` of the repository at `repo` as a snapshot whose source is
/// that commit; registers no worktree. `records` adds the caller's records about the new
/// snapshot to the batch that stores it (an op-log entry under the repository's path, which
/// keeps it alive for gc), so they commit together. Modes map 100644 → file, 100755 → executable, 120000 → symlink,
/// 040000 → tree; submodules (160000) are reported in `skipped`. Every name passes the tree
/// rules or the import is refused whole.
/// Paths `deny` matches (secrets) stay out, reported in `skipped`, as in any scope.
pub fn import(
    store: &Store,
    repo_path: &Utf8Path,
    rev: &str,
    message: &str,
    labels: &BTreeMap<String, String>,
    deny: &path_policy::DenyList,
    records: &dyn Fn(&mut WriteBatch, SnapshotId) -> Result<(), BoxError>,
) -> Result<ImportedCommit, ImportError> {
    let git_err = |source: BoxError| ImportError::Git {
        path: repo_path.to_owned(),
        source,
    };
    let repo = gix::open(repo_path.as_std_path()).map_err(|e| ImportError::NotARepository {
        path: repo_path.to_owned(),
        source: e.into(),
    })?;
    let unknown = |source: BoxError| ImportError::UnknownRevision {
        path: repo_path.to_owned(),
        rev: rev.to_owned(),
        source,
    };
    let commit = repo
        .rev_parse_single(rev)
        .map_err(|e| unknown(e.into()))?
        .object()
        .map_err(|e| unknown(e.into()))?
        .peel_to_commit()
        .map_err(|e| unknown(e.into()))?;
    let commit_hex = commit.id.to_string();
    let root = commit.tree_id().map_err(|e| git_err(e.into()))?.detach();

    let refuse = |name: &[u8], reason: cas::ObjectError| ImportError::Refused {
        path: repo_path.to_owned(),
        commit: commit_hex.clone(),
        name: String::from_utf8_lossy(name).into_owned(),
        reason,
    };
    let mut batch = WriteBatch::new();
    let how = TreeImport {
        deny,
        known: &|_| None,
    };
    let stored = store_tree(store, &repo, root, &how, &mut batch).map_err(|e| match e {
        TreeImportError::Git(source) => git_err(source),
        TreeImportError::Refused { name, reason } => refuse(&name, reason),
        TreeImportError::Store(e) => ImportError::Store(e),
    })?;
    let (root_tree, files, bytes, skipped) =
        (stored.root, stored.files, stored.bytes, stored.skipped);

    let snapshot = Snapshot {
        tree: root_tree,
        parents: Vec::new(),
        created: jiff::Timestamp::now(),
        message: message.to_owned(),
        labels: labels.clone(),
        source: Some(Source {
            path: repo_path.to_owned(),
            git: Some(GitSource {
                commit: commit_hex.clone(),
                dirty: false,
            }),
        }),
    };
    let id = batch.add_snapshot(snapshot);
    records(&mut batch, id).map_err(|source| ImportError::Record {
        path: repo_path.to_owned(),
        source,
    })?;
    store.write(&batch).map_err(cas::StoreError::from)?;
    Ok(ImportedCommit {
        snapshot: id,
        tree: root_tree,
        commit: commit_hex,
        files,
        bytes,
        skipped,
    })
}

/// How [`store_tree`] treats what it meets.
pub(crate) struct TreeImport<'a> {
    /// Paths left out (secrets), reported as skipped.
    pub(crate) deny: &'a path_policy::DenyList,
    /// The store object (and entry size) a git object is already known as, if any: taken as
    /// it is, neither read nor hashed, nor (a tree) walked.
    pub(crate) known: &'a dyn Fn(&gix::ObjectId) -> Option<(ObjectId, u64)>,
}

/// What [`store_tree`] added.
pub(crate) struct StoredTree {
    /// The root tree, in the batch (or in the store).
    pub(crate) root: TreeId,
    /// Files and symlinks read from the repository.
    pub(crate) files: u64,
    /// Their bytes.
    pub(crate) bytes: u64,
    /// Entries left out (submodules, denied paths), with reasons.
    pub(crate) skipped: Vec<(Vec<u8>, String)>,
}

/// Why [`store_tree`] failed; each caller names its repository or commit around it.
#[derive(Debug)]
pub(crate) enum TreeImportError {
    /// Reading from the repository failed.
    Git(BoxError),
    /// A path cairn refuses; the whole tree is refused.
    Refused {
        /// The offending path.
        name: Vec<u8>,
        /// The rule.
        reason: cas::ObjectError,
    },
    /// The store failed.
    Store(cas::StoreError),
}

/// Adds the git tree `root` of `repo` (with every blob and subtree below it) to `batch` as a
/// store tree, writing the batch to the store whenever it holds more than 64 MiB (blobs and
/// trees only, which nothing references until the caller writes the rest). Modes map 100644
/// → file, 100755 → executable, 120000 → symlink, 040000 → tree; submodules (160000) and the
/// paths `deny` matches are skipped; a directory left empty by skipping is not kept, as git
/// keeps no empty trees. Every name passes the tree rules or the whole tree is refused.
pub(crate) fn store_tree(
    store: &Store,
    repo: &gix::Repository,
    root: gix::ObjectId,
    how: &TreeImport<'_>,
    batch: &mut WriteBatch,
) -> Result<StoredTree, TreeImportError> {
    let git_err = TreeImportError::Git;
    let read_tree = |id: gix::ObjectId| -> Result<
        Vec<(Vec<u8>, gix::objs::tree::EntryKind, gix::ObjectId)>,
        TreeImportError,
    > {
        let tree = repo.find_tree(id).map_err(|e| git_err(e.into()))?;
        let decoded = tree.decode().map_err(|e| git_err(e.into()))?;
        Ok(decoded
            .entries
            .iter()
            .map(|e| (e.filename.to_vec(), e.mode.kind(), e.oid.to_owned()))
            .collect())
    };
    let refuse = |name: &[u8], reason: cas::ObjectError| TreeImportError::Refused {
        name: name.to_vec(),
        reason,
    };
    let store_err = |e: cas::StoreError| TreeImportError::Store(e);

    let mut skipped = Vec::new();
    let (mut files, mut bytes) = (0u64, 0u64);
    let mut stack = vec![Frame {
        prefix: Vec::new(),
        entries: read_tree(root)?,
        next: 0,
        built: Vec::new(),
    }];
    let root_tree = loop {
        let Some(frame) = stack.last_mut() else {
            return Err(git_err("empty import stack".into()));
        };
        if frame.next == frame.entries.len() {
            let Some(done) = stack.pop() else {
                return Err(git_err("empty import stack".into()));
            };
            let tree = Tree::new(done.built).map_err(|e| refuse(&done.prefix, e))?;
            let size = tree.size();
            let empty = tree.entries().is_empty();
            let id = batch.add_tree(tree);
            match stack.last_mut() {
                None => break id,
                Some(parent) if !empty => {
                    let name = done
                        .prefix
                        .rsplit(|&b| b == b'/')
                        .next()
                        .unwrap_or_default()
                        .to_vec();
                    parent.built.push(TreeEntry {
                        name,
                        kind: EntryKind::Tree,
                        id: id.into(),
                        size,
                    });
                }
                Some(_) => {} // nothing but submodules below: not kept, as git keeps no empty trees
            }
            continue;
        }
        let (name, kind, oid) = frame.entries[frame.next].clone();
        frame.next += 1;
        let mut path = frame.prefix.clone();
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(&name);
        cas::validate_name(&name).map_err(|e| refuse(&path, e))?;
        use gix::objs::tree::EntryKind as G;
        if let Some(pattern) = how.deny.denied(&path, kind == G::Tree) {
            skipped.push((path, format!("denied by pattern {pattern}")));
            continue;
        }
        let kind = match kind {
            G::Commit => {
                skipped.push((path, "submodule (gitlink) not imported".to_owned()));
                continue;
            }
            G::Tree => EntryKind::Tree,
            G::Blob => EntryKind::File,
            G::BlobExecutable => EntryKind::Executable,
            G::Link => EntryKind::Symlink,
        };
        let (id, size) = match (how.known)(&oid) {
            Some(known) => known,
            None if kind == EntryKind::Tree => {
                let entries = read_tree(oid)?;
                stack.push(Frame {
                    prefix: path,
                    entries,
                    next: 0,
                    built: Vec::new(),
                });
                continue;
            }
            None => {
                let object = repo.find_object(oid).map_err(|e| git_err(e.into()))?;
                let prepared = PreparedBlob::new(&object.data);
                let size = prepared.size();
                files += 1;
                bytes += size;
                (batch.add_blob(prepared).into(), size)
            }
        };
        if let Some(frame) = stack.last_mut() {
            frame.built.push(TreeEntry {
                name,
                kind,
                id,
                size,
            });
        }
        if batch.stored_bytes() > 64 << 20 {
            store.write(batch).map_err(|e| store_err(e.into()))?;
            *batch = WriteBatch::new();
        }
    };
    Ok(StoredTree {
        root: root_tree,
        files,
        bytes,
        skipped,
    })
}
