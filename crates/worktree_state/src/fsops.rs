//! The only code that writes into worktrees. Every operation opens its directory through
//! [`path_policy::Root`] (beneath the root, no symlink on the way) and acts on a name inside
//! that handle: files are created with `O_EXCL | O_NOFOLLOW`, or written under a temporary
//! name and renamed over the target (which replaces a link instead of following it).

use std::ffi::OsStr;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use cas::{BlobId, EntryKind, Reader};
use path_policy::{BeneathError, Root};
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use worktree_scope::file_state::Stat;

fn mode_of(kind: EntryKind) -> Mode {
    Mode::from_raw_mode(if kind == EntryKind::Executable {
        0o777
    } else {
        0o666
    })
}

fn split(rel: &[u8]) -> (&[u8], &OsStr) {
    let (dir, name) = worktree_scope::paths::split_parent(rel);
    (dir, OsStr::from_bytes(name))
}

/// Failure to materialize one path.
#[derive(Debug)]
pub enum WriteFailure {
    /// Writing the path failed.
    Io(PathBuf, std::io::Error),
    /// Reading its content from the store failed.
    Store(cas::ReadError),
    /// Recording in the store failed.
    Record(cas::StoreError),
    /// A registry record could not be written.
    Registry(worktree_registry::RegistryError),
    /// Something that is not a directory (or a link) stands where a directory must be.
    Blocked(PathBuf, &'static str),
}

impl From<BeneathError> for WriteFailure {
    fn from(e: BeneathError) -> Self {
        match e {
            BeneathError::Refused { path, reason } => WriteFailure::Blocked(path, reason),
            BeneathError::Io { path, source } => WriteFailure::Io(path, source),
            other => WriteFailure::Io(PathBuf::new(), std::io::Error::other(other)),
        }
    }
}

/// Every change to a worktree asks here first, so a test built with the `failpoints`
/// feature can fail the Nth one (`worktree-write`) and check what recovery makes of it.
/// Without the feature this is nothing.
pub(crate) fn fault(root: &Root, rel: &[u8]) -> Result<(), WriteFailure> {
    fail::fail_point!("worktree-write", |_| Err(WriteFailure::Io(
        root.display(rel),
        std::io::Error::other("injected I/O error")
    )));
    let _ = (root, rel);
    Ok(())
}

/// Creates the directories of `rel_dir` that are missing; a symlink or file in the way is
/// refused, never followed.
pub(crate) fn ensure_dir(root: &Root, rel_dir: &[u8]) -> Result<(), WriteFailure> {
    fault(root, rel_dir)?;
    root.create_dir_all(rel_dir)?;
    Ok(())
}

fn stat_at(root: &Root, dir: &OwnedFd, name: &OsStr, rel: &[u8]) -> Result<Stat, WriteFailure> {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .map(|st| Stat::from_rustix(&st))
        .map_err(|e| WriteFailure::Io(root.display(rel), e.into()))
}

/// A failed [`write_blob`] of `rel`: failing to write the file (a full disk) names its path.
fn blob_failure(root: &Root, rel: &[u8], e: cas::ReadError) -> WriteFailure {
    match e {
        cas::ReadError::Sink { source, .. } => WriteFailure::Io(root.display(rel), source),
        // The tree being written names it: missing means damaged.
        other => WriteFailure::Store(other.as_referenced()),
    }
}

fn write_blob(file: OwnedFd, reader: &Reader, blob: BlobId) -> Result<(), cas::ReadError> {
    let mut out = std::io::BufWriter::with_capacity(256 << 10, std::fs::File::from(file));
    reader.write_blob_to(blob, &mut out)?;
    out.flush().map_err(|source| cas::ReadError::Sink {
        id: blob.into(),
        source,
    })
}

/// Writes a new file or symlink where nothing exists yet, in `dir` (the handle of `rel`'s
/// directory, from [`Root::open_dir`]). A regular file, made empty, is first offered to
/// `fill`, which may write its content (a reflink) and says whether it did; if not, it is
/// written from the store. Returns its stat.
pub(crate) fn create(
    root: &Root,
    dir: &OwnedFd,
    rel: &[u8],
    kind: EntryKind,
    blob: BlobId,
    reader: &Reader,
    fill: &dyn Fn(&OwnedFd) -> bool,
) -> Result<Stat, WriteFailure> {
    let (_, name) = split(rel);
    let io = |e: Errno| WriteFailure::Io(root.display(rel), e.into());
    fault(root, rel)?;
    if kind == EntryKind::Symlink {
        let target = reader
            .blob(blob)
            .map_err(|e| WriteFailure::Store(e.as_referenced()))?;
        rustix::fs::symlinkat(OsStr::from_bytes(&target), dir, name).map_err(io)?;
        return stat_at(root, dir, name, rel);
    }
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name, flags, mode_of(kind)).map_err(io)?;
    let filled = fill(&fd);
    let written = fault(root, rel).and_then(|()| {
        if filled {
            Ok(())
        } else {
            write_blob(fd, reader, blob).map_err(|e| blob_failure(root, rel, e))
        }
    });
    if let Err(e) = written {
        let _ = rustix::fs::unlinkat(dir, name, AtFlags::empty());
        return Err(e);
    }
    stat_at(root, dir, name, rel)
}

fn temp_name(name: &OsStr, attempt: u32) -> std::ffi::OsString {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut t = std::ffi::OsString::from(format!(".cairn-{}-{n}-{attempt}-", std::process::id()));
    t.push(name);
    t
}

/// Replaces whatever file or symlink is at `rel` (or nothing) with the blob, atomically:
/// written beside it under a temporary name, then renamed over it.
pub(crate) fn replace(
    root: &Root,
    rel: &[u8],
    kind: EntryKind,
    blob: BlobId,
    reader: &Reader,
) -> Result<Stat, WriteFailure> {
    let (dir_rel, name) = split(rel);
    let dir = root.open_dir(dir_rel)?;
    let io = |e: Errno| WriteFailure::Io(root.display(rel), e.into());
    let target = (kind == EntryKind::Symlink)
        .then(|| reader.blob(blob))
        .transpose()
        .map_err(|e| WriteFailure::Store(e.as_referenced()))?;
    fault(root, rel)?;
    // A fresh name beside the target: a symlink, or an empty file to fill.
    let mut attempt = 0;
    let (temp, file) = loop {
        let temp = temp_name(name, attempt);
        let made = match &target {
            Some(t) => {
                rustix::fs::symlinkat(OsStr::from_bytes(t), &dir, temp.as_os_str()).map(|()| None)
            }
            None => {
                let flags = OFlags::WRONLY
                    | OFlags::CREATE
                    | OFlags::EXCL
                    | OFlags::NOFOLLOW
                    | OFlags::CLOEXEC;
                rustix::fs::openat(&dir, temp.as_os_str(), flags, mode_of(kind)).map(Some)
            }
        };
        match made {
            Ok(file) => break (temp, file),
            Err(Errno::EXIST) if attempt < 8 => attempt += 1,
            Err(e) => return Err(io(e)),
        }
    };
    if let Some(file) = file
        && let Err(e) = write_blob(file, reader, blob)
    {
        let _ = rustix::fs::unlinkat(&dir, temp.as_os_str(), AtFlags::empty());
        return Err(blob_failure(root, rel, e));
    }
    let renamed = fault(root, rel)
        .and_then(|()| rustix::fs::renameat(&dir, temp.as_os_str(), &dir, name).map_err(io));
    if let Err(e) = renamed {
        let _ = rustix::fs::unlinkat(&dir, temp.as_os_str(), AtFlags::empty());
        return Err(e);
    }
    stat_at(root, &dir, name, rel)
}

/// Removes the empty directory at `rel`, if a directory is there.
pub(crate) fn remove_empty_dir(root: &Root, rel: &[u8]) -> Result<(), WriteFailure> {
    let (dir_rel, name) = split(rel);
    let dir = root.open_dir(dir_rel)?;
    fault(root, rel)?;
    match rustix::fs::unlinkat(&dir, name, AtFlags::REMOVEDIR) {
        // Removed, or nothing there, or a file (replaced by the rename that follows).
        Ok(()) | Err(Errno::NOENT | Errno::NOTDIR) => Ok(()),
        Err(e) => Err(WriteFailure::Io(root.display(rel), e.into())),
    }
}

/// Removes the file or symlink at `rel` (never what a symlink points to); then removes
/// the directories above it that became empty. A missing path is fine.
pub fn remove(root: &Root, rel: &[u8]) -> Result<(), WriteFailure> {
    let (dir_rel, name) = split(rel);
    let dir = match root.open_dir(dir_rel) {
        Ok(d) => d,
        // No directory there, or a file or symlink where it was: nothing of `rel` beneath
        // the root to remove.
        Err(e) if e.is_not_found() => return Ok(()),
        Err(BeneathError::Refused { .. }) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    fault(root, rel)?;
    match rustix::fs::unlinkat(&dir, name, AtFlags::empty()) {
        // Gone, or already the directory a finished step puts there (recovering a step
        // that turned this file into a directory meets its own work).
        Ok(()) | Err(Errno::NOENT | Errno::ISDIR) => {}
        Err(e) => return Err(WriteFailure::Io(root.display(rel), e.into())),
    }
    let mut up = dir_rel;
    while !up.is_empty() {
        let (parent, leaf) = split(up);
        let Ok(parent_fd) = root.open_dir(parent) else {
            break;
        };
        if rustix::fs::unlinkat(&parent_fd, leaf, AtFlags::REMOVEDIR).is_err() {
            break;
        }
        up = parent;
    }
    Ok(())
}
