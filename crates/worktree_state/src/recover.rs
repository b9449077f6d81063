//! Finishing an operation that was interrupted part way, from its intent journal.

use std::collections::BTreeSet;
use worktree_registry::RegistryWrite;

use camino::{Utf8Path, Utf8PathBuf};
use cas::{Store, TreeId, WriteBatch};
use rustix::fs::AtFlags;

use crate::error::RecoverError;
use crate::fsops::{self, WriteFailure};
use crate::journal::{Journal, remove_staging};
use crate::kept::Kept;
use worktree_scope::build::{TreeDirs, child};
use worktree_scope::paths::{split_parent, tree_order};

/// What [`recover`] did.
#[derive(Debug, Clone)]
pub struct WorktreeRecoverOutcome {
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
pub fn recover(
    ws: &Kept,
    store: &Store,
    path: &Utf8Path,
) -> Result<WorktreeRecoverOutcome, RecoverError> {
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
        let root = crate::records::find(&reader, path)?
            .map(|r| r.root)
            .unwrap_or(canonical);
        return Ok(WorktreeRecoverOutcome {
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
        return Ok(WorktreeRecoverOutcome {
            root,
            op: None,
            paths: 0,
        });
    };
    let journal = Journal::decode(&root, &bytes)?;
    // Never finish a step in a directory swapped in since it began.
    crate::root::verify_root::<RecoverError>(&mut journal.record.clone(), store)?;
    if !root.is_dir() {
        // The folder is gone, and with it what was half written: record the step as done
        // (a later checkout re-hydrates a registered worktree's missing folder).
        drop(reader);
        store.write(&finished(&journal, &root)?)?;
        return Ok(WorktreeRecoverOutcome {
            root,
            op: Some(journal.op),
            paths: 0,
        });
    }
    let handle = path_policy::Root::open(root.as_std_path()).map_err(WriteFailure::from)?;
    let paths = match &journal.paths {
        // A whole tree (a checkout): directory by directory, one tree held at a time.
        None => restore_tree(&handle, &reader, journal.target, journal.pid)?,
        Some(paths) => restore_paths(&handle, &reader, journal.target, journal.pid, paths)?,
    };
    if let Some(name) = &journal.staging {
        remove_staging(&handle, name);
    }
    drop(reader);
    store.write(&finished(&journal, &root)?)?;
    Ok(WorktreeRecoverOutcome {
        root,
        op: Some(journal.op),
        paths,
    })
}

/// Makes every file of `target` as it is there, and removes the interrupted process's
/// temporary files beside them: how many files.
fn restore_tree(
    handle: &path_policy::Root,
    reader: &cas::Reader,
    target: TreeId,
    pid: u32,
) -> Result<u64, RecoverError> {
    let mut restored = 0;
    for dir in TreeDirs::new(reader, target) {
        let (dir, tree) = dir?;
        let mut files = tree
            .entries()
            .iter()
            .filter(|e| e.tree().is_none())
            .peekable();
        if files.peek().is_none() {
            continue;
        }
        fsops::ensure_dir(handle, dir.as_bytes())?;
        for e in files {
            let path = child(&dir, &e.name);
            fsops::remove_empty_dir(handle, path.as_bytes())?;
            fsops::replace(handle, path.as_bytes(), e.kind, e.id.as_blob(), reader)?;
            restored += 1;
        }
        remove_temporaries_in(handle, pid, dir.as_bytes());
    }
    Ok(restored)
}

/// Makes each of `paths` as it is in `target` (removed where it holds none), and removes
/// the interrupted process's temporary files beside them: how many paths.
fn restore_paths(
    handle: &path_policy::Root,
    reader: &cas::Reader,
    target: TreeId,
    pid: u32,
    paths: &[Vec<u8>],
) -> Result<u64, RecoverError> {
    let entries: Vec<(&[u8], Option<diff::FileEntry>)> = paths
        .iter()
        .map(|p| Ok((p.as_slice(), lookup(reader, target, p)?)))
        .collect::<Result<_, cas::ReadError>>()?;
    let mut removals: Vec<&[u8]> = entries
        .iter()
        .filter(|(_, e)| e.is_none())
        .map(|(p, _)| *p)
        .collect();
    removals.sort_by(|a, b| tree_order(b, a));
    for p in removals {
        fsops::remove(handle, p)?;
    }
    for (p, e) in &entries {
        let Some(e) = e else { continue };
        let (dir, _) = split_parent(p);
        fsops::ensure_dir(handle, dir)?;
        fsops::remove_empty_dir(handle, p)?;
        fsops::replace(handle, p, e.kind, e.id.as_blob(), reader)?;
    }
    let dirs: BTreeSet<&[u8]> = paths.iter().map(|p| split_parent(p).0).collect();
    for dir in dirs {
        remove_temporaries_in(handle, pid, dir);
    }
    Ok(entries.len() as u64)
}

/// The recovered step recorded as done: its registry record and op-log entry, the journal
/// dropped, and the stat cache too (what it said about the step's paths is stale: the next
/// capture reads everything).
fn finished(
    journal: &Journal,
    root: &Utf8Path,
) -> Result<WriteBatch, worktree_registry::RegistryError> {
    let mut batch = WriteBatch::new();
    batch.put_worktree(&journal.record)?;
    if let Some(entry) = &journal.entry {
        batch.append_op(root, entry)?;
    }
    batch.clear_file_states(root);
    batch.set_journal(root, None);
    Ok(batch)
}

/// Removes the interrupted process's temporary files (`.cairn-<pid>-…`) in `dir`.
fn remove_temporaries_in(root: &path_policy::Root, pid: u32, dir: &[u8]) {
    let prefix = format!(".cairn-{pid}-");
    let Ok(fd) = root.open_dir(dir) else { return };
    let Ok(mut listing) = rustix::fs::Dir::read_from(&fd) else {
        return;
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

#[cfg(test)]
mod tests {
    use worktree_registry::{OpRecord, RegistryRead as _, WorktreeKind, WorktreeRecord};

    /// A checkout cut short (its journal stored, some files written, one half written, a
    /// temporary file and an empty directory where a file goes): recover writes the whole
    /// tree, directory by directory, and records the worktree.
    #[test]
    fn an_interrupted_checkout_is_finished_from_its_target_tree() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = camino::Utf8Path::from_path(dir.path()).expect("utf8");
        let store = cas::Store::open(
            &base.join("store"),
            &cas::OpenOptions {
                create: true,
                ..cas::OpenOptions::default()
            },
        )
        .expect("store");
        let src = base.join("src");
        let files = ["a.txt", "d/b.txt", "d/e/c.txt", "only/sub/f.txt"];
        for f in files {
            let p = src.join(f);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, format!("body of {f}")).expect("write");
        }
        let ws = crate::kept::Kept::new();
        let snap = crate::capture::onboard(&ws, &store, &src, &Default::default())
            .expect("onboard")
            .snapshot;
        let tree = store
            .reader()
            .expect("reader")
            .snapshot(snap)
            .expect("snap")
            .tree;

        let root = base.join("dest");
        std::fs::create_dir_all(root.join("d/e/c.txt")).expect("mkdir");
        std::fs::write(root.join("a.txt"), "body of a.txt").expect("write");
        std::fs::write(root.join("d/b.txt"), "half").expect("write");
        std::fs::write(root.join("d/.cairn-4242-tmp"), "temporary").expect("write");
        let record = WorktreeRecord {
            head: Some(snap),
            identity: crate::root::identity_of(&root),
            ..WorktreeRecord::new(root.clone(), WorktreeKind::Isolated)
        };
        let journal = crate::journal::Journal {
            op: "checkout".into(),
            pid: 4242,
            staging: None,
            target: tree,
            paths: None,
            record,
            entry: Some(OpRecord::new("checkout", None, Some(snap))),
            started: jiff::Timestamp::now(),
        };
        crate::journal::Step::begin(&store, &root, &journal, crate::pending::Pending::default())
            .expect("journal");

        let out = crate::recover::recover(&ws, &store, &root).expect("recover");
        assert_eq!(out.op.as_deref(), Some("checkout"));
        assert_eq!(out.paths, files.len() as u64);
        for f in files {
            assert_eq!(
                std::fs::read_to_string(root.join(f)).expect("restored"),
                format!("body of {f}"),
                "{f}"
            );
        }
        assert!(!root.join("d/.cairn-4242-tmp").exists(), "temporary left");
        let reader = store.reader().expect("reader");
        assert!(reader.journal(&root).expect("journal").is_none());
        let registered = reader
            .worktree(&root)
            .expect("registry")
            .expect("registered");
        assert_eq!(registered.head, Some(snap));
    }
}
