//! Finishing an operation that was interrupted part way, from its intent journal.

use crate::registry::RegistryWrite;
use std::collections::BTreeSet;

use camino::{Utf8Path, Utf8PathBuf};
use cas::{Store, TreeId, WriteBatch};
use rustix::fs::AtFlags;

use crate::error::RecoverError;
use crate::fsops::{self, WriteFailure};
use crate::journal::{Journal, remove_staging};
use crate::paths::{split_parent, tree_order};
use crate::shared::Worktrees;

/// What [`recover`](crate::Worktrees::recover) did.
#[derive(Debug, Clone)]
pub struct RecoverOutcome {
    /// The worktree root.
    pub root: Utf8PathBuf,
    /// The command that was interrupted and is now finished; `None` if nothing was.
    pub op: Option<String>,
    /// Paths made equal to the operation's result.
    pub paths: u64,
}

impl From<WriteFailure> for RecoverError {
    fn from(e: WriteFailure) -> Self {
        match e {
            WriteFailure::Io(path, source) => RecoverError::Io { path, source },
            WriteFailure::Store(e) => RecoverError::Store(e.into()),
            WriteFailure::Record(e) => RecoverError::Store(e),
            WriteFailure::Registry(e) => RecoverError::Registry(e),
            WriteFailure::Blocked(path, reason) => RecoverError::Blocked {
                path,
                reason: reason.to_owned(),
            },
        }
    }
}

/// Finishes the interrupted operation of the worktree at or above `path`: every path it
/// was changing is made equal to its result, its temporary files are removed, and its
/// record and op-log entry are committed. With nothing interrupted it does nothing.
pub(crate) fn recover(
    ws: &Worktrees,
    store: &Store,
    path: &Utf8Path,
) -> Result<RecoverOutcome, RecoverError> {
    let canonical = std::fs::canonicalize(path)
        .ok()
        .and_then(|p| Utf8PathBuf::from_path_buf(p).ok())
        .unwrap_or_else(|| path.to_owned());
    let reader = store.reader()?;
    let mut found = None;
    for dir in canonical.ancestors().chain(path.ancestors()) {
        if let Some(bytes) = reader.journal(dir)? {
            found = Some((dir.to_owned(), bytes));
            break;
        }
    }
    let Some((root, _)) = found else {
        let root = crate::worktree::find(&reader, path)?
            .map(|r| r.root)
            .unwrap_or(canonical);
        return Ok(RecoverOutcome {
            root,
            op: None,
            paths: 0,
        });
    };
    let _busy = ws.locks.lock(&root);
    // Read again under the lock: the step may have been under way, and has finished now.
    drop(reader);
    let reader = store.reader()?;
    let Some(bytes) = reader.journal(&root)? else {
        return Ok(RecoverOutcome {
            root,
            op: None,
            paths: 0,
        });
    };
    let journal = Journal::decode(&root, &bytes)?;
    // Never finish a step in a directory swapped in since it began.
    crate::root::verify_root(&mut journal.record.clone())?;
    if !root.is_dir() {
        // The folder is gone, and with it what was half written: record the step as done
        // (a later checkout re-hydrates a registered worktree's missing folder).
        drop(reader);
        store.write(&finished(&journal, &root)?)?;
        return Ok(RecoverOutcome {
            root,
            op: Some(journal.op),
            paths: 0,
        });
    }
    let handle = path_policy::Root::open(root.as_std_path()).map_err(WriteFailure::from)?;
    let entries: Vec<(Vec<u8>, Option<diff::FileEntry>)> = match &journal.paths {
        None => crate::build::flatten(&reader, journal.target)?
            .into_iter()
            .map(|f| {
                let entry = diff::FileEntry {
                    kind: f.kind,
                    id: f.blob.into(),
                    size: f.size,
                };
                // As the journal holds them: bytes, read back unchecked from the store.
                (f.path.into_bytes(), Some(entry))
            })
            .collect(),
        Some(paths) => paths
            .iter()
            .map(|p| Ok((p.clone(), lookup(&reader, journal.target, p)?)))
            .collect::<Result<_, cas::ReadError>>()?,
    };
    let mut removals: Vec<&Vec<u8>> = entries
        .iter()
        .filter(|(_, e)| e.is_none())
        .map(|(p, _)| p)
        .collect();
    removals.sort_by(|a, b| tree_order(b, a));
    for p in removals {
        fsops::remove(&handle, p)?;
    }
    for (p, e) in &entries {
        let Some(e) = e else { continue };
        let (dir, _) = split_parent(p);
        fsops::ensure_dir(&handle, dir)?;
        fsops::remove_empty_dir(&handle, p)?;
        fsops::replace(&handle, p, e.kind, e.id.as_blob(), &reader)?;
    }
    if let Some(name) = &journal.staging {
        remove_staging(&handle, name);
    }
    remove_temporaries(&handle, journal.pid, &entries);
    drop(reader);
    store.write(&finished(&journal, &root)?)?;
    Ok(RecoverOutcome {
        root,
        op: Some(journal.op),
        paths: entries.len() as u64,
    })
}

/// The recovered step recorded as done: its registry record and op-log entry, the journal
/// dropped, and the stat cache too (what it said about the step's paths is stale: the next
/// capture reads everything).
fn finished(journal: &Journal, root: &Utf8Path) -> Result<WriteBatch, crate::RegistryError> {
    let mut batch = WriteBatch::new();
    batch.put_worktree(&journal.record)?;
    if let Some(entry) = &journal.entry {
        batch.append_op(root, entry)?;
    }
    batch.clear_file_states(root);
    batch.set_journal(root, None);
    Ok(batch)
}

/// Removes the interrupted process's temporary files (`.cairn-<pid>-…`) beside `entries`.
fn remove_temporaries(
    root: &path_policy::Root,
    pid: u32,
    entries: &[(Vec<u8>, Option<diff::FileEntry>)],
) {
    let prefix = format!(".cairn-{pid}-");
    let dirs: BTreeSet<&[u8]> = entries.iter().map(|(p, _)| split_parent(p).0).collect();
    for dir in dirs {
        let Ok(fd) = root.open_dir(dir) else { continue };
        let Ok(mut listing) = rustix::fs::Dir::read_from(&fd) else {
            continue;
        };
        let mut stale = Vec::new();
        while let Some(Ok(entry)) = listing.next() {
            if entry.file_name().to_bytes().starts_with(prefix.as_bytes()) {
                stale.push(entry.file_name().to_owned());
            }
        }
        for name in stale {
            let _ = rustix::fs::unlinkat(&fd, name.as_c_str(), AtFlags::empty());
        }
    }
}

/// What `tree` holds at `path`: a file entry, or `None` (absent or a directory).
pub(crate) fn lookup(
    source: &dyn diff::TreeSource,
    tree: TreeId,
    path: &[u8],
) -> Result<Option<diff::FileEntry>, cas::ReadError> {
    let mut current = tree;
    let parts: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
    for (i, name) in parts.iter().enumerate() {
        let t = source.tree(current)?;
        let Some(e) = t.get(name) else {
            return Ok(None);
        };
        match e.tree() {
            Some(sub) if i + 1 < parts.len() => current = sub,
            Some(_) => return Ok(None),
            None if i + 1 == parts.len() => {
                return Ok(Some(diff::FileEntry {
                    kind: e.kind,
                    id: e.id,
                    size: e.size,
                }));
            }
            None => return Ok(None),
        }
    }
    Ok(None)
}
