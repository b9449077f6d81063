//! `cairn onboard SRC --git REV`: a git commit's tree as a snapshot.

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};
use cas::{
    EntryKind, GitSource, PreparedBlob, Snapshot, SnapshotId, Source, Store, Tree, TreeEntry,
    TreeId, WriteBatch,
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

    let read_tree = |id: gix::ObjectId| -> Result<
        Vec<(Vec<u8>, gix::objs::tree::EntryKind, gix::ObjectId)>,
        ImportError,
    > {
        let tree = repo.find_tree(id).map_err(|e| git_err(e.into()))?;
        let decoded = tree.decode().map_err(|e| git_err(e.into()))?;
        Ok(decoded
            .entries
            .iter()
            .map(|e| (e.filename.to_vec(), e.mode.kind(), e.oid.to_owned()))
            .collect())
    };
    let refuse = |name: &[u8], reason: cas::ObjectError| ImportError::Refused {
        path: repo_path.to_owned(),
        commit: commit_hex.clone(),
        name: String::from_utf8_lossy(name).into_owned(),
        reason,
    };

    let mut batch = WriteBatch::new();
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
        if let Some(pattern) = deny.denied(&path, kind == G::Tree) {
            skipped.push((path, format!("denied by pattern {pattern}")));
            continue;
        }
        let kind = match kind {
            G::Tree => {
                let entries = read_tree(oid)?;
                stack.push(Frame {
                    prefix: path,
                    entries,
                    next: 0,
                    built: Vec::new(),
                });
                continue;
            }
            G::Commit => {
                skipped.push((path, "submodule (gitlink) not imported".to_owned()));
                continue;
            }
            G::Blob => EntryKind::File,
            G::BlobExecutable => EntryKind::Executable,
            G::Link => EntryKind::Symlink,
        };
        let object = repo.find_object(oid).map_err(|e| git_err(e.into()))?;
        let prepared = PreparedBlob::new(&object.data);
        let size = prepared.size();
        files += 1;
        bytes += size;
        let id = batch.add_blob(prepared);
        if let Some(frame) = stack.last_mut() {
            frame.built.push(TreeEntry {
                name,
                kind,
                id: id.into(),
                size,
            });
        }
        if batch.stored_bytes() > 64 << 20 {
            store.write(&batch).map_err(cas::StoreError::from)?;
            batch = WriteBatch::new();
        }
    };

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
