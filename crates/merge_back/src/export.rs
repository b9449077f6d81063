//! Writing a snapshot's tree into a git object database.

use std::collections::HashMap;

use camino::{Utf8Path, Utf8PathBuf};
use cas::{EntryKind, ObjectId, Store, Tree, TreeId, WriteBatch};

use crate::git::BoxError;

/// Object id → the id of the same object in git repositories (SHA-1 bytes), so exports
/// skip what was exported before. Entries go with their objects in `gc`.
pub const GIT_OIDS: cas::SideTable = cas::SideTable::keyed_by_object("git.oids");

/// Where a format 1 store kept [`GIT_OIDS`], so opening one moves them here
/// ([`cas::OpenOptions::format_1_tables`]).
pub const FORMAT_1_TABLES: [cas::Format1Table; 1] = [cas::Format1Table {
    name: "git_oids",
    keys: cas::Format1Keys::Object,
    now: GIT_OIDS,
}];

/// What [`export`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportOutcome {
    /// The git tree of the snapshot's root, as hex.
    pub tree: String,
    /// Objects read from the store and handed to git.
    pub written: u64,
    /// Objects known from an earlier export and present in the repository.
    pub reused: u64,
}

/// Exporting failed; the repository holds at most some unreferenced objects.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The path is not a git repository.
    #[error("{path}: not a git repository ({source})")]
    NotARepository {
        /// The path given.
        path: Utf8PathBuf,
        /// What gitoxide said.
        source: BoxError,
    },
    /// Writing to the repository failed.
    #[error("{path}: {source}")]
    Git {
        /// The repository.
        path: Utf8PathBuf,
        /// What gitoxide said.
        source: BoxError,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] cas::StoreError),
}

fn mode(kind: EntryKind) -> gix::objs::tree::EntryMode {
    use gix::objs::tree::EntryKind as G;
    match kind {
        EntryKind::File => G::Blob,
        EntryKind::Executable => G::BlobExecutable,
        EntryKind::Symlink => G::Link,
        EntryKind::Tree => G::Tree,
    }
    .into()
}

/// One tree being exported: its entries and the git entries made so far.
struct Frame {
    id: TreeId,
    tree: Tree,
    next: usize,
    made: Vec<gix::objs::tree::Entry>,
}

/// Writes the tree `root` (with every blob and subtree below it) into the object database
/// of the repository at `repo_path`, and returns the git tree id. Objects an earlier export
/// recorded (BLAKE3 → git id, kept in the store) and that the repository has are neither read
/// nor hashed again, so re-exporting a similar tree costs what changed.
pub fn export(
    store: &Store,
    repo_path: &Utf8Path,
    root: TreeId,
) -> Result<ExportOutcome, ExportError> {
    let repo = gix::open(repo_path.as_std_path()).map_err(|e| ExportError::NotARepository {
        path: repo_path.to_owned(),
        source: e.into(),
    })?;
    export_into(store, &repo, repo_path, root)
}

/// [`export`] into an open repository (`repo_path` names it in errors).
pub(crate) fn export_into(
    store: &Store,
    repo: &gix::Repository,
    repo_path: &Utf8Path,
    root: TreeId,
) -> Result<ExportOutcome, ExportError> {
    let (outcome, map) = export_objects(store, repo, repo_path, root, &mut Exported::default())?;
    store.write(&map).map_err(cas::StoreError::from)?;
    Ok(outcome)
}

/// What exports into one repository learned: the git id of each store object written or
/// found there, and back (with the entry's size), so that a later export skips them and a
/// git tree made of them is read back without reading or hashing their bytes again.
#[derive(Debug, Default)]
pub(crate) struct Exported {
    to_git: HashMap<ObjectId, gix::ObjectId>,
    from_git: HashMap<gix::ObjectId, (ObjectId, u64)>,
}

impl Exported {
    fn learn(&mut self, id: ObjectId, size: u64, oid: gix::ObjectId) {
        self.to_git.insert(id, oid);
        self.from_git.insert(oid, (id, size));
    }

    /// The store object (and its entry size) exported as the git object `oid`, if any.
    pub(crate) fn stored_as(&self, oid: &gix::ObjectId) -> Option<(ObjectId, u64)> {
        self.from_git.get(oid).copied()
    }
}

/// The work of [`export_into`], which learns into `memo` and leaves the store unchanged: the
/// git ids to remember are returned as a batch, for the caller to write or drop.
pub(crate) fn export_objects(
    store: &Store,
    repo: &gix::Repository,
    repo_path: &Utf8Path,
    root: TreeId,
    memo: &mut Exported,
) -> Result<(ExportOutcome, WriteBatch), ExportError> {
    let git_err = |source: BoxError| ExportError::Git {
        path: repo_path.to_owned(),
        source,
    };
    let reader = store
        .reader()
        .map_err(|e| cas::StoreError::from(cas::ReadError::from(e)))?;
    let known = |memo: &Exported, id: ObjectId| -> Result<Option<gix::ObjectId>, ExportError> {
        if let Some(oid) = memo.to_git.get(&id) {
            return Ok(Some(*oid));
        }
        let mapped = reader
            .side_of_object(GIT_OIDS, id)
            .map_err(|e| cas::StoreError::from(cas::ReadError::from(e)))?;
        Ok(mapped
            .and_then(|raw| gix::ObjectId::try_from(raw.as_slice()).ok())
            .filter(|oid| repo.has_object(oid)))
    };
    let mut outcome = ExportOutcome {
        tree: String::new(),
        written: 0,
        reused: 0,
    };
    let mut map = WriteBatch::new();
    if let Some(oid) = known(memo, root.into())? {
        outcome.reused += 1;
        outcome.tree = oid.to_string();
        return Ok((outcome, map));
    }
    let tree = reader.tree(root).map_err(cas::StoreError::from)?;
    let mut stack = vec![Frame {
        id: root,
        tree,
        next: 0,
        made: Vec::new(),
    }];
    let root_oid = loop {
        let Some(frame) = stack.last_mut() else {
            return Err(git_err("empty export stack".into()));
        };
        if frame.next == frame.tree.entries().len() {
            let Some(mut done) = stack.pop() else {
                return Err(git_err("empty export stack".into()));
            };
            done.made.sort();
            let oid = repo
                .write_object(gix::objs::Tree { entries: done.made })
                .map_err(|e| git_err(e.into()))?
                .detach();
            outcome.written += 1;
            memo.learn(done.id.into(), done.tree.size(), oid);
            map.put_side(GIT_OIDS, "", done.id.as_bytes(), oid.as_bytes().to_vec());
            let name = stack
                .last()
                .and_then(|parent| parent.tree.entries().get(parent.next - 1))
                .map(|e| e.name.clone());
            match (stack.last_mut(), name) {
                (Some(parent), Some(name)) => {
                    parent.made.push(gix::objs::tree::Entry {
                        mode: mode(EntryKind::Tree),
                        filename: name.into(),
                        oid,
                    });
                }
                _ => break oid,
            }
            continue;
        }
        let entry = frame.tree.entries()[frame.next].clone();
        frame.next += 1;
        let oid = match known(memo, entry.id)? {
            Some(oid) => {
                outcome.reused += 1;
                memo.learn(entry.id, entry.size, oid);
                oid
            }
            None if entry.kind == EntryKind::Tree => {
                let tree = reader
                    .tree(entry.id.as_tree())
                    .map_err(cas::StoreError::from)?;
                stack.push(Frame {
                    id: entry.id.as_tree(),
                    tree,
                    next: 0,
                    made: Vec::new(),
                });
                continue;
            }
            None => {
                let bytes = reader
                    .blob(entry.id.as_blob())
                    .map_err(cas::StoreError::from)?;
                let oid = repo
                    .write_blob(&bytes)
                    .map_err(|e| git_err(e.into()))?
                    .detach();
                outcome.written += 1;
                memo.learn(entry.id, entry.size, oid);
                map.put_side(GIT_OIDS, "", entry.id.as_bytes(), oid.as_bytes().to_vec());
                oid
            }
        };
        if let Some(frame) = stack.last_mut() {
            frame.made.push(gix::objs::tree::Entry {
                mode: mode(entry.kind),
                filename: entry.name.clone().into(),
                oid,
            });
        }
    };
    outcome.tree = root_oid.to_string();
    Ok((outcome, map))
}

#[cfg(test)]
mod tests {
    #[test]
    fn git_ids_are_where_format_1_moved_them() {
        let moves: Vec<_> = super::FORMAT_1_TABLES
            .iter()
            .map(|t| (t.name, t.now))
            .collect();
        assert_eq!(moves, [("git_oids", super::GIT_OIDS)]);
    }
}
