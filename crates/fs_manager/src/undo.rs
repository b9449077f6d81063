//! `undo` and `redo`: revert or re-apply one change set of a worktree's op log, only if
//! every file it touches still holds what the change left there.

use crate::RegistryRead;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use worktree_state::Kept;

use camino::{Utf8Path, Utf8PathBuf};
use cas::{BlobId, EntryKind, SnapshotId, Source, Store, TreeId};
use path_policy::{RepoPath, RepoPathBuf};
use rayon::prelude::*;
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use worktree_registry::{OpRecord, undo_stacks};

use crate::error::UndoError;
use worktree_scope::file_state::Stat;
use worktree_state::journal::{self, Plan};
use worktree_state::pending::Pending;

/// A file that stops an undo or redo, and why (`hash mismatch`, `missing`,
/// `is a directory`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Path from the worktree root.
    pub path: RepoPathBuf,
    /// Why.
    pub reason: String,
}

/// What [`undo`](crate::Worktrees::undo) or [`redo`](crate::Worktrees::redo) did; with refusals, nothing changed.
#[derive(Debug, Clone)]
pub struct WorktreeUndoOutcome {
    /// The worktree root.
    pub root: Utf8PathBuf,
    /// The op-log entry whose change was reverted or re-applied.
    pub change: u64,
    /// Paths written or removed, in tree order (empty when refused).
    pub paths: Vec<RepoPathBuf>,
    /// Why it refused, per file; empty on success.
    pub refused: Vec<Refusal>,
    /// The worktree's head afterwards.
    pub snapshot: Option<SnapshotId>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Undo,
    Redo,
}

/// Reverts the newest change set of the worktree holding `path` that is not undone yet.
pub(crate) fn undo(
    ws: &Kept,
    store: &Store,
    path: &Utf8Path,
) -> Result<WorktreeUndoOutcome, UndoError> {
    step(ws, store, path, Direction::Undo)
}

/// Re-applies the newest undone change set of the worktree holding `path`.
pub(crate) fn redo(
    ws: &Kept,
    store: &Store,
    path: &Utf8Path,
) -> Result<WorktreeUndoOutcome, UndoError> {
    step(ws, store, path, Direction::Redo)
}

fn step(
    ws: &Kept,
    store: &Store,
    path: &Utf8Path,
    direction: Direction,
) -> Result<WorktreeUndoOutcome, UndoError> {
    let held = worktree_state::held::hold(ws, store, path)?;
    let record = held.record.clone();
    let root = record.root.clone();
    let reader = store.reader()?;
    let ops = reader.ops(&root)?;
    let stacks = undo_stacks(&ops);
    let stack = match direction {
        Direction::Undo => &stacks.undo,
        Direction::Redo => &stacks.redo,
    };
    let Some(&seq) = stack.last() else {
        return Err(match direction {
            Direction::Undo => UndoError::NothingToUndo { root },
            Direction::Redo => UndoError::NothingToRedo { root },
        });
    };
    let change = ops
        .iter()
        .find(|o| o.seq == seq)
        .ok_or_else(|| UndoError::NothingToUndo { root: root.clone() })?;
    let (Some(before), Some(after)) = (change.before, change.after) else {
        return Err(UndoError::NothingToUndo { root });
    };
    // Undo goes from the change's result back to its start; redo the other way.
    let (from, to) = match direction {
        Direction::Undo => (after, before),
        Direction::Redo => (before, after),
    };
    let from_tree = reader.snapshot(from)?.tree;
    let to_tree = reader.snapshot(to)?.tree;
    // Secrets are outside scope: never touched, whatever the change did to them.
    let deny =
        worktree_state::capture::deny_list(store, &record).map_err(|e| UndoError::Write {
            cause: Box::new(e.into()),
            interrupted: false,
        })?;
    let changes: Vec<diff::TreeChange> =
        diff::tree_changes(&reader, Some(from_tree), Some(to_tree))?
            .into_iter()
            .filter(|c| deny.denied(c.path.as_bytes(), false).is_none())
            .collect();
    let paths: Vec<RepoPathBuf> = changes.iter().map(|c| c.path.clone()).collect();

    let handle = path_policy::Root::open(root.as_std_path()).map_err(|e| UndoError::Io {
        path: root.as_std_path().to_owned(),
        source: std::io::Error::other(e),
    })?;
    let cap = record.max_file_size;
    // Files and symlinks the change left (where the other side may have directories).
    let left_files: HashSet<&RepoPath> = changes
        .iter()
        .filter(|c| c.old.is_some())
        .map(|c| c.path.as_repo_path())
        .collect();
    let mut refused: Vec<Refusal> = changes
        .par_iter()
        .map(|c| check(&handle, &reader, from_tree, c, &left_files, cap))
        .collect::<Result<Vec<Option<Refusal>>, UndoError>>()?
        .into_iter()
        .flatten()
        .collect();
    let plan = Plan::from_changes(&changes);
    if refused.is_empty() {
        match worktree_state::rollback::check_obstacles(
            root.as_std_path(),
            &plan.deleted,
            &plan.writes,
        ) {
            Ok(()) => {}
            Err(worktree_state::error::RollbackError::Blocked { path: p, reason }) => {
                // The path of a write or a directory above it, below the root.
                let rel = p
                    .strip_prefix(root.as_std_path())
                    .ok()
                    .and_then(|r| RepoPathBuf::new(r.as_os_str().as_bytes()).ok());
                let Some(rel) = rel else {
                    return Err(UndoError::Write {
                        cause: Box::new(worktree_state::error::RollbackError::Blocked {
                            path: p,
                            reason,
                        }),
                        interrupted: false,
                    });
                };
                refused.push(Refusal { path: rel, reason });
            }
            Err(other) => {
                return Err(UndoError::Write {
                    cause: Box::new(other),
                    interrupted: false,
                });
            }
        }
    }
    if !refused.is_empty() {
        return Ok(WorktreeUndoOutcome {
            root,
            change: seq,
            paths: Vec::new(),
            refused,
            snapshot: record.head,
        });
    }

    // The head after: the change's other end if the head was this end, else the head with
    // these paths set as the change had them.
    let head_tree = match record.head {
        Some(h) => Some(reader.snapshot(h)?.tree),
        None => None,
    };
    // A patched head goes into the store with the intent journal.
    let mut first = Pending::default();
    let new_head = if head_tree == Some(from_tree) {
        to
    } else {
        let patched: Vec<(RepoPathBuf, Option<diff::FileEntry>)> =
            changes.iter().map(|c| (c.path.clone(), c.new)).collect();
        let base = head_tree.unwrap_or(from_tree);
        let built = worktree_scope::build::patch(&reader, base, &patched)?;
        for t in built.trees.into_values() {
            first.add_tree(t);
        }
        let verb = if direction == Direction::Undo {
            "undo"
        } else {
            "redo"
        };
        first.add_snapshot(cas::Snapshot {
            tree: built.root,
            parents: record.head.into_iter().collect(),
            created: jiff::Timestamp::now(),
            message: format!("{verb} of op {seq}"),
            labels: Default::default(),
            source: Some(Source {
                path: root.clone(),
                git: None,
            }),
        })
    };
    drop(reader);

    let op = match direction {
        Direction::Undo => "undo",
        Direction::Redo => "redo",
    };
    let mut entry = OpRecord::new(op, record.head, Some(new_head));
    match direction {
        Direction::Undo => entry.undoes = Some(seq),
        Direction::Redo => entry.redoes = Some(seq),
    }
    let mut after = record;
    after.head = Some(new_head);
    journal::apply(ws, store, op, to_tree, &plan, after, Some(entry), first).map_err(|e| {
        let interrupted = e.interrupted;
        let cause = worktree_state::rollback::failure(e.cause);
        UndoError::Write {
            cause: Box::new(cause),
            interrupted,
        }
    })?;
    Ok(WorktreeUndoOutcome {
        root,
        change: seq,
        paths,
        refused: Vec::new(),
        snapshot: Some(new_head),
    })
}

/// Whether the file at `c.path` still holds what the `old` side of the change says (absent
/// if it has none; a directory of `old_tree` counts as absent).
fn check(
    root: &path_policy::Root,
    reader: &cas::Reader,
    old_tree: TreeId,
    c: &diff::TreeChange,
    left_files: &HashSet<&RepoPath>,
    cap: Option<u64>,
) -> Result<Option<Refusal>, UndoError> {
    let refuse = |reason: &str| {
        Ok(Some(Refusal {
            path: c.path.clone(),
            reason: reason.to_owned(),
        }))
    };
    let (dir_rel, name) = c.path.split_parent();
    let name = OsStr::from_bytes(name);
    let dir = match root.open_dir(dir_rel.as_bytes()) {
        Ok(d) => Some(d),
        Err(e) if e.is_not_found() => None,
        // The change left a file or symlink where this path's directories go (a kind
        // change): nothing is here, as the change left it; that file is checked on its own.
        Err(path_policy::BeneathError::Refused { .. })
            if c.old.is_none() && c.path.ancestors().skip(1).any(|a| left_files.contains(a)) =>
        {
            None
        }
        Err(path_policy::BeneathError::Refused { reason, .. }) => return refuse(reason),
        // The error alone: its path is named once, in the quoted form.
        Err(path_policy::BeneathError::Io { source, .. }) => {
            return Err(UndoError::Io {
                path: root.display(c.path.as_bytes()),
                source,
            });
        }
        Err(e) => {
            return Err(UndoError::Io {
                path: root.display(c.path.as_bytes()),
                source: std::io::Error::other(e),
            });
        }
    };
    let stat = match &dir {
        None => None,
        Some(d) => match rustix::fs::statat(d, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Some(Stat::from_rustix(&st)),
            Err(Errno::NOENT) => None,
            Err(e) => {
                return Err(UndoError::Io {
                    path: root.display(c.path.as_bytes()),
                    source: e.into(),
                });
            }
        },
    };
    let Some(expected) = c.old else {
        // The change left no file here: still nothing (or the directory it made) is fine.
        return match stat {
            None => Ok(None),
            Some(st) if st.kind().is_none() => {
                if is_dir_in(reader, old_tree, &c.path)? {
                    Ok(None)
                } else {
                    refuse("is a directory")
                }
            }
            Some(_) => refuse("exists (the change removed it)"),
        };
    };
    let (Some(st), Some(dir)) = (stat, dir) else {
        return refuse("missing");
    };
    let Some(kind) = st.kind() else {
        return refuse(if st.mode & 0o170000 == 0o040000 {
            "is a directory"
        } else {
            "not a regular file or symlink"
        });
    };
    if kind != EntryKind::Symlink && cap.is_some_and(|cap| st.size > cap) {
        return refuse("larger than the size cap: out of scope");
    }
    if (kind == EntryKind::Symlink) != (expected.kind == EntryKind::Symlink) {
        return refuse("hash mismatch");
    }
    if st.size != expected.size {
        return refuse("hash mismatch");
    }
    let io = |e: std::io::Error| UndoError::Io {
        path: root.display(c.path.as_bytes()),
        source: e,
    };
    let id = if kind == EntryKind::Symlink {
        let target = rustix::fs::readlinkat(&dir, name, Vec::new()).map_err(|e| io(e.into()))?;
        BlobId::of(target.as_bytes())
    } else {
        let fd = rustix::fs::openat(
            &dir,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io(e.into()))?;
        let mut hasher = blake3::Hasher::new();
        let mut file = std::fs::File::from(fd);
        let mut buf = vec![0u8; 256 << 10];
        loop {
            let n = file.read(&mut buf).map_err(io)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        BlobId::from_bytes(*hasher.finalize().as_bytes())
    };
    if id != expected.id.as_blob() {
        return refuse("hash mismatch");
    }
    if kind != expected.kind {
        return refuse("mode changed");
    }
    Ok(None)
}

fn is_dir_in(reader: &cas::Reader, tree: TreeId, path: &RepoPath) -> Result<bool, cas::ReadError> {
    let mut current = tree;
    for name in path.components() {
        let t = diff::TreeSource::tree(reader, current)?;
        match t.get(name).and_then(|e| e.tree()) {
            Some(sub) => current = sub,
            None => return Ok(false),
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::UndoStacks;

    fn snap(n: u8) -> Option<SnapshotId> {
        Some(SnapshotId::from_bytes([n; 32]))
    }

    fn op(seq: u64, name: &str, before: Option<SnapshotId>, after: Option<SnapshotId>) -> OpRecord {
        OpRecord {
            seq,
            ..OpRecord::new(name, before, after)
        }
    }

    #[test]
    fn pruned_entries_and_re_registration_leave_nothing_dangling() {
        // Entry 2 was pruned; its undo (3) is still in the log.
        let mut u = op(3, "undo", snap(2), snap(1));
        u.undoes = Some(2);
        let log = vec![u, op(4, "snapshot", snap(1), snap(5))];
        assert_eq!(
            undo_stacks(&log),
            UndoStacks {
                undo: vec![4],
                redo: vec![]
            }
        );
        // Removed and onboarded again: a first capture clears what came before.
        let log = vec![
            op(1, "onboard", None, snap(1)),
            op(2, "snapshot", snap(1), snap(2)),
            op(3, "onboard", None, snap(3)),
        ];
        assert_eq!(undo_stacks(&log), UndoStacks::default());
    }

    #[test]
    fn undo_and_redo_stacks_follow_the_log() {
        let mut log = vec![
            op(1, "checkout", None, snap(1)),
            op(2, "snapshot", snap(1), snap(2)),
            op(3, "snapshot", snap(2), snap(3)),
            op(4, "snapshot", snap(3), snap(3)),
        ];
        assert_eq!(
            undo_stacks(&log).undo,
            vec![2, 3],
            "first capture and no-ops excluded"
        );
        let mut u = op(5, "undo", snap(3), snap(2));
        u.undoes = Some(3);
        log.push(u);
        assert_eq!(
            undo_stacks(&log),
            UndoStacks {
                undo: vec![2],
                redo: vec![3]
            }
        );
        let mut r = op(6, "redo", snap(2), snap(3));
        r.redoes = Some(3);
        log.push(r);
        assert_eq!(undo_stacks(&log).undo, vec![2, 3]);
        let mut u = op(7, "undo", snap(3), snap(2));
        u.undoes = Some(3);
        log.push(u);
        log.push(op(8, "snapshot", snap(2), snap(4)));
        assert_eq!(
            undo_stacks(&log),
            UndoStacks {
                undo: vec![2, 8],
                redo: vec![]
            },
            "a new change set clears the redo stack"
        );
    }
}
