//! `rollback`: make a worktree's scope equal a snapshot, touching only what differs.

use std::collections::HashSet;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use camino::{Utf8Path, Utf8PathBuf};
use cas::{EntryKind, OpRecord, SnapshotId, Source, Store, TreeId, WriteBatch};
use rayon::prelude::*;

use crate::capture::{self, CaptureOptions};
use crate::dirstate;
use crate::error::RollbackError;
use crate::fsops::{self, WriteFailure};
use crate::progress::{Progress, Silent};
use crate::scan::tree_order;
use crate::state::FileState;

/// Options of [`rollback`].
#[derive(Clone, Copy)]
pub struct RollbackOptions<'a> {
    /// Restore only these paths (relative to the root, `/`-separated); all if empty.
    pub paths: &'a [Vec<u8>],
    /// Report what would change; change nothing.
    pub dry_run: bool,
    /// Walk threads for the capture: 0 picks, 1 walks sequentially.
    pub threads: usize,
    /// Where progress goes.
    pub progress: &'a dyn Progress,
}

impl Default for RollbackOptions<'_> {
    fn default() -> Self {
        RollbackOptions {
            paths: &[],
            dry_run: false,
            threads: 0,
            progress: &Silent,
        }
    }
}

/// What [`rollback`] did (or would do, on a dry run).
#[derive(Debug, Clone)]
pub struct RollbackOutcome {
    /// The worktree root.
    pub root: Utf8PathBuf,
    /// The worktree's head afterwards: the target, or for a per-path rollback a new
    /// snapshot of the result.
    pub snapshot: SnapshotId,
    /// The live state captured first (the head, if nothing had changed since it).
    pub captured: SnapshotId,
    /// Paths written, in tree order.
    pub written: Vec<Vec<u8>>,
    /// Paths deleted, in tree order.
    pub deleted: Vec<Vec<u8>>,
    /// Paths of the target left alone (secrets outside scope), with reasons.
    pub skipped: Vec<crate::Skipped>,
}

fn failure(e: WriteFailure) -> RollbackError {
    match e {
        WriteFailure::Io(path, source) => RollbackError::Io { path, source },
        WriteFailure::Store(e) => RollbackError::Store(e.into()),
        WriteFailure::Blocked(path, reason) => RollbackError::Blocked {
            path,
            reason: reason.to_owned(),
        },
    }
}

fn matches(path: &[u8], filters: &[Vec<u8>]) -> bool {
    filters.is_empty() || filters.iter().any(|f| diff::path_is_under(path, f))
}

/// True if `path` names a file or directory in the tree.
fn exists(
    source: &dyn diff::TreeSource,
    root: TreeId,
    path: &[u8],
) -> Result<bool, cas::ReadError> {
    let mut tree = root;
    let parts: Vec<&[u8]> = path
        .split(|&b| b == b'/')
        .filter(|c| !c.is_empty())
        .collect();
    for (i, name) in parts.iter().enumerate() {
        let t = source.tree(tree)?;
        match t.get(name) {
            None => return Ok(false),
            Some(e) => match e.tree() {
                Some(sub) => tree = sub,
                None => return Ok(i + 1 == parts.len()),
            },
        }
    }
    Ok(true)
}

/// Makes the scope of the worktree holding `path` equal `target` (or only `options.paths`
/// of it). The live state is captured first, so edits never snapshotted are kept in the
/// store and op log. Only differing files are written or deleted; ignored files, `.git/`
/// and anything outside scope are never touched, and nothing is written through a symlink.
/// Before changing anything it checks that nothing outside scope is in the way, and
/// refuses (changing nothing) if something is.
pub fn rollback(
    store: &Store,
    path: &Utf8Path,
    target: SnapshotId,
    options: &RollbackOptions<'_>,
) -> Result<RollbackOutcome, RollbackError> {
    let reader = store.reader()?;
    let record =
        crate::worktree::find(&reader, path)?.ok_or_else(|| RollbackError::NotAWorktree {
            path: path.to_owned(),
        })?;
    let target_tree = reader.snapshot(target)?.tree;
    drop(reader);
    let root = record.root.clone();

    let message = format!("live state before rollback to {}", target.short(12));
    let capture_options = CaptureOptions {
        message: &message,
        threads: options.threads,
        progress: options.progress,
        ..CaptureOptions::default()
    };
    let source = Some(Source {
        path: root.clone(),
        git: None,
    });
    let captured = capture::capture(
        store,
        record,
        "capture",
        source,
        &capture_options,
        options.dry_run,
    )?;

    let reader = store.reader()?;
    let trees = diff::Overlay {
        memory: &captured.trees,
        store: &reader,
    };
    for p in options.paths {
        if !exists(&trees, captured.tree, p)? && !exists(&trees, target_tree, p)? {
            return Err(RollbackError::NoSuchPath {
                path: String::from_utf8_lossy(p).into_owned(),
                snapshot: target,
            });
        }
    }
    // Secrets are outside scope: a target that holds one does not bring it back here.
    let deny = crate::capture::deny_list(store, &captured.record)?;
    let mut skipped = Vec::new();
    let changes: Vec<diff::Change> =
        diff::tree_changes(&trees, Some(captured.tree), Some(target_tree))?
            .into_iter()
            .filter(|c| matches(&c.path, options.paths))
            .filter(|c| match deny.denied(&c.path, false) {
                Some(pattern) => {
                    let reason = format!("denied by pattern {pattern}");
                    skipped.push(crate::Skipped {
                        path: c.path.clone(),
                        reason,
                    });
                    false
                }
                None => true,
            })
            .collect();
    let deleted: Vec<Vec<u8>> = changes
        .iter()
        .filter(|c| c.new.is_none())
        .map(|c| c.path.clone())
        .collect();
    let mut writes: Vec<(Vec<u8>, diff::FileEntry)> = changes
        .iter()
        .filter_map(|c| c.new.map(|n| (c.path.clone(), n)))
        .collect();
    writes.sort_by(|a, b| tree_order(&a.0, &b.0));
    let root_path = root.as_std_path();
    for (p, _) in &writes {
        if let Err(e) = path_policy::check_path(p) {
            return Err(RollbackError::Blocked {
                path: fsops::join(root_path, p),
                reason: e.reason().to_owned(),
            });
        }
    }
    check_obstacles(root_path, &deleted, &writes)?;
    let written: Vec<Vec<u8>> = writes.iter().map(|(p, _)| p.clone()).collect();
    if options.dry_run {
        return Ok(RollbackOutcome {
            root,
            snapshot: target,
            captured: captured.snapshot,
            written,
            deleted,
            skipped,
        });
    }

    // From here on every change goes through handles opened beneath the root.
    let handle = path_policy::Root::open(root_path).map_err(|e| failure(e.into()))?;
    let root_handle = &handle;
    // Deepest first, so directories empty out before their parents are looked at.
    let mut order = deleted.clone();
    order.sort_by(|a, b| tree_order(b, a));
    for p in &order {
        fsops::remove(root_handle, p).map_err(failure)?;
    }
    for (p, _) in &writes {
        let (dir, _) = crate::scan::split_parent(p);
        fsops::ensure_dir(root_handle, dir).map_err(failure)?;
        // A directory the target has a file in place of was emptied above.
        fsops::remove_empty_dir(root_handle, p).map_err(failure)?;
    }
    let (links, files): (Vec<_>, Vec<_>) = writes
        .iter()
        .partition(|(_, e)| e.kind == EntryKind::Symlink);
    let mut states: Vec<(Vec<u8>, FileState)> = files
        .par_iter()
        .map(|(p, e)| {
            let meta =
                fsops::replace(root_handle, p, e.kind, e.id.as_blob(), &reader).map_err(failure)?;
            Ok((p.clone(), FileState::from_stat(&meta, e.id.as_blob(), 0)))
        })
        .collect::<Result<_, RollbackError>>()?;
    for (p, e) in links {
        let meta =
            fsops::replace(root_handle, p, e.kind, e.id.as_blob(), &reader).map_err(failure)?;
        states.push((p.clone(), FileState::from_stat(&meta, e.id.as_blob(), 0)));
    }
    drop(reader);

    let mut batch = WriteBatch::new();
    let verified = crate::state::now_ns();
    for (_, s) in &mut states {
        s.verified_ns = verified;
    }
    let mut dirs = captured.dirs.clone();
    let changes = states
        .iter()
        .map(|(p, s)| (p.as_slice(), Some(*s)))
        .chain(deleted.iter().map(|p| (p.as_slice(), None)));
    for dir in dirstate::record_written(&mut dirs, changes) {
        if let Some(state) = dirs.get(&dir) {
            batch.set_file_state(&root, &dirstate::dir_key(&dir), Some(state.encode()));
        }
    }
    let mut record = captured.record.clone();
    let snapshot = if options.paths.is_empty() {
        record.head = Some(target);
        batch.append_op(
            &root,
            OpRecord::new("rollback", Some(captured.snapshot), Some(target)),
        );
        batch.put_worktree(record);
        store.write(&batch)?;
        target
    } else {
        store.write(&batch)?;
        // The result mixes both states: record it as a snapshot of what is now on disk.
        let names: Vec<String> = options
            .paths
            .iter()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        let message = format!("rollback of {} to {}", names.join(", "), target.short(12));
        let after = CaptureOptions {
            message: &message,
            ..capture_options
        };
        let source = Some(Source {
            path: root.clone(),
            git: None,
        });
        capture::capture(store, record, "rollback", source, &after, false)?.snapshot
    };
    Ok(RollbackOutcome {
        root,
        snapshot,
        captured: captured.snapshot,
        written,
        deleted,
        skipped,
    })
}

/// Refuses, before anything changes, if something outside scope stands in the way: a
/// symlink or file (ignored, so not captured) where a directory must be, or a directory
/// that must become a file but holds files outside scope.
fn check_obstacles(
    root: &Path,
    deleted: &[Vec<u8>],
    writes: &[(Vec<u8>, diff::FileEntry)],
) -> Result<(), RollbackError> {
    let deleted: HashSet<&[u8]> = deleted.iter().map(Vec::as_slice).collect();
    let mut checked_dirs: HashSet<&[u8]> = HashSet::new();
    for (p, _) in writes {
        let mut end = 0;
        while let Some(i) = p[end..].iter().position(|&b| b == b'/') {
            let dir = &p[..end + i];
            end += i + 1;
            if !checked_dirs.insert(dir) {
                continue;
            }
            let full = fsops::join(root, dir);
            match full.symlink_metadata() {
                Ok(m) if m.is_dir() => {}
                Ok(m) if !deleted.contains(dir) => {
                    let what = if m.file_type().is_symlink() {
                        "a symlink"
                    } else {
                        "a file"
                    };
                    return Err(RollbackError::Blocked {
                        path: full,
                        reason: format!(
                            "{what} outside cairn's scope stands where a directory must be"
                        ),
                    });
                }
                _ => {}
            }
        }
        let full = fsops::join(root, p);
        if full.symlink_metadata().is_ok_and(|m| m.is_dir()) {
            let mut stack = vec![full.clone()];
            while let Some(dir) = stack.pop() {
                let entries = std::fs::read_dir(&dir).map_err(|source| RollbackError::Io {
                    path: dir.clone(),
                    source,
                })?;
                for entry in entries {
                    let entry = entry.map_err(|source| RollbackError::Io {
                        path: dir.clone(),
                        source,
                    })?;
                    let path = entry.path();
                    if path.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                        stack.push(path);
                        continue;
                    }
                    let rel = path
                        .strip_prefix(root)
                        .map(|r| r.as_os_str().as_bytes())
                        .unwrap_or_default();
                    if !deleted.contains(rel) {
                        return Err(RollbackError::Blocked {
                            path: full,
                            reason: format!(
                                "directory holds {}, outside cairn's scope",
                                path.display()
                            ),
                        });
                    }
                }
            }
        }
    }
    Ok(())
}
