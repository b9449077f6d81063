//! Whether a registered worktree's root is still the directory cairn registered.

use std::os::unix::fs::MetadataExt;

use camino::{Utf8Path, Utf8PathBuf};
use worktree_registry::{DirIdentity, WorktreeRecord};

/// A registered worktree's root is no longer the directory cairn registered: it was swapped
/// for a symlink or another directory behind cairn's back. Nothing is read or recorded.
#[derive(Debug, thiserror::Error)]
#[error("worktree {root} {reason}; nothing was read or recorded: {advice}")]
pub struct RootChanged {
    /// The registered root.
    pub root: Utf8PathBuf,
    /// What it is now.
    pub reason: &'static str,
    /// What the user can do.
    pub advice: String,
}

fn identity(meta: &std::fs::Metadata) -> DirIdentity {
    DirIdentity {
        dev: meta.dev(),
        ino: meta.ino(),
    }
}

/// The identity of the directory at `root` (not following a symlink), if it is one.
pub(crate) fn identity_of(root: &Utf8Path) -> Option<DirIdentity> {
    root.symlink_metadata()
        .ok()
        .filter(std::fs::Metadata::is_dir)
        .map(|m| identity(&m))
}

/// Checks that `record`'s root is still the directory it registered, and lies apart from
/// the store's folder (see [`worktree_registry::apart`]): every operation on a worktree, onboard
/// included, passes here before it reads or writes. A root that is gone passes the first
/// check (the caller reports it, or `checkout` fills it again); a record from before
/// identities were kept takes the directory's now.
pub(crate) fn verify_root<E>(record: &mut WorktreeRecord, store: &cas::Store) -> Result<(), E>
where
    E: From<RootChanged> + From<worktree_registry::apart::StoreOverlap>,
{
    same_directory(record)?;
    // A live mount's root is served by this process: only the path to it is looked at.
    let mounted = record.kind == worktree_registry::WorktreeKind::Mounted;
    worktree_registry::apart::check_at(store, &record.root, !mounted)?;
    Ok(())
}

/// The first half of [`verify_root`].
fn same_directory(record: &mut WorktreeRecord) -> Result<(), RootChanged> {
    // A mount's root is another directory each time it is mounted (and the mount point
    // when not): its layer, not the directory, is the worktree.
    if record.kind == worktree_registry::WorktreeKind::Mounted {
        record.identity = None;
        return Ok(());
    }
    let root = &record.root;
    let refuse = |reason, advice: String| {
        Err(RootChanged {
            root: root.clone(),
            reason,
            advice,
        })
    };
    let meta = match root.symlink_metadata() {
        Ok(m) => m,
        Err(_) => return Ok(()),
    };
    if meta.file_type().is_symlink() {
        return refuse(
            "is now a symlink (cairn never follows one)",
            format!(
                "put the directory back at {root}, or `cairn worktree remove {root}` and onboard the directory the link points to"
            ),
        );
    }
    if !meta.is_dir() {
        return refuse(
            "is no longer a directory",
            format!("put the directory back at {root}, or `cairn worktree remove {root}`"),
        );
    }
    match record.identity {
        Some(known) if known != identity(&meta) => refuse(
            "is another directory than the one registered (it was replaced or moved)",
            format!("if this directory is the worktree now, run `cairn worktree rebind {root}`"),
        ),
        Some(_) => Ok(()),
        None => {
            record.identity = Some(identity(&meta));
            Ok(())
        }
    }
}
