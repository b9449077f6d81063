//! Moving a repository's index and working files from `HEAD`'s tree to a merge result, only
//! where both are clean.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;

use path_policy::Root;
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use gix::bstr::{BStr, BString, ByteSlice};
use gix::objs::tree::EntryKind;

/// A file-level entry of a tree: blob (or link) id and kind.
type Entry = (gix::ObjectId, EntryKind);

/// One path the checkout must change: its entry in `HEAD`'s tree and in the result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    pub(crate) path: BString,
    pub(crate) old: Option<Entry>,
    pub(crate) new: Option<Entry>,
}

pub(crate) type Fail = crate::git::BoxError;

/// A working file could not be written or removed.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
struct FileError {
    path: PathBuf,
    source: std::io::Error,
}

/// Every non-tree entry below `tree`, by full path.
fn flatten(repo: &gix::Repository, tree: gix::ObjectId) -> Result<BTreeMap<BString, Entry>, Fail> {
    let mut recorder = gix::traverse::tree::Recorder::default();
    repo.find_tree(tree)?
        .traverse()
        .breadthfirst(&mut recorder)?;
    Ok(recorder
        .records
        .into_iter()
        .filter(|e| !e.mode.is_tree())
        .map(|e| (e.filepath, (e.oid, e.mode.kind())))
        .collect())
}

/// The paths whose entries differ between `old` and `new`.
pub(crate) fn changes(
    repo: &gix::Repository,
    old: gix::ObjectId,
    new: gix::ObjectId,
) -> Result<Vec<Change>, Fail> {
    let old = flatten(repo, old)?;
    let mut new = flatten(repo, new)?;
    let mut out = Vec::new();
    for (path, entry) in old {
        let after = new.remove(&path);
        if after != Some(entry) {
            out.push(Change {
                path,
                old: Some(entry),
                new: after,
            });
        }
    }
    out.extend(new.into_iter().map(|(path, entry)| Change {
        path,
        old: None,
        new: Some(entry),
    }));
    Ok(out)
}

fn full(workdir: &Path, rel: &BStr) -> Result<PathBuf, Fail> {
    Ok(workdir.join(rel.to_path()?))
}

/// True if every existing leading directory of `rel` is a real directory (no symlink, no
/// file), so writing `rel` stays inside `workdir`.
fn reachable(workdir: &Path, rel: &BStr) -> bool {
    let mut at = workdir.to_path_buf();
    let parts: Vec<&[u8]> = rel.split(|&b| b == b'/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        at.push(OsStr::from_bytes(part));
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return false,
            Err(_) => return true,
        }
    }
    true
}

/// What the working file at `path` is, as a tree entry; `None` if nothing is there.
fn on_disk(path: &Path) -> Result<Option<Entry>, Fail> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let (bytes, kind) = if meta.is_symlink() {
        let target = std::fs::read_link(path)?;
        (
            target.into_os_string().into_encoded_bytes(),
            EntryKind::Link,
        )
    } else if meta.is_file() {
        let kind = if meta.permissions().mode() & 0o111 != 0 {
            EntryKind::BlobExecutable
        } else {
            EntryKind::Blob
        };
        (std::fs::read(path)?, kind)
    } else {
        // A directory (or something stranger) where the tree has a file.
        return Ok(Some((
            gix::ObjectId::null(gix::hash::Kind::Sha1),
            EntryKind::Tree,
        )));
    };
    let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, &bytes)?;
    Ok(Some((id, kind)))
}

/// The changed paths whose index entry or working file differs from `HEAD`'s entry: a
/// checkout would overwrite or lose what is there. A submodule that changes is listed too:
/// cairn does not check out submodules.
pub(crate) fn dirty(
    workdir: &Path,
    index: &gix::index::File,
    changes: &[Change],
) -> Result<Vec<BString>, Fail> {
    let mut dirty = Vec::new();
    for change in changes {
        let path = change.path.as_bstr();
        let staged = index
            .entry_by_path(path)
            .map(|e| (e.id, e.mode.to_tree_entry_mode().map(|m| m.kind())));
        let staged_ok = match (staged, change.old) {
            (None, None) => true,
            (Some((id, Some(kind))), Some((old_id, old_kind))) => id == old_id && kind == old_kind,
            _ => false,
        };
        let submodule = [change.old, change.new]
            .iter()
            .any(|e| matches!(e, Some((_, EntryKind::Commit))));
        let clean = staged_ok
            && !submodule
            && reachable(workdir, path)
            && on_disk(&full(workdir, path)?)? == change.old;
        if !clean {
            dirty.push(change.path.clone());
        }
    }
    dirty.sort();
    Ok(dirty)
}

/// `rel`'s directory and last name.
fn split(rel: &BStr) -> (&[u8], &OsStr) {
    match rel.iter().rposition(|&b| b == b'/') {
        Some(i) => (&rel[..i], OsStr::from_bytes(&rel[i + 1..])),
        None => (&[][..], OsStr::from_bytes(rel)),
    }
}

/// Removes `rel` and then each parent directory left empty, through handles beneath the
/// root (a symlink on the way is refused, never followed).
fn remove(root: &Root, rel: &BStr) -> Result<(), Fail> {
    let (dir_rel, name) = split(rel);
    let dir = match root.open_dir(dir_rel) {
        Ok(d) => d,
        Err(e) if e.is_not_found() => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    match rustix::fs::unlinkat(&dir, name, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => {}
        Err(e) => {
            return Err(FileError {
                path: root.display(rel),
                source: e.into(),
            }
            .into());
        }
    }
    let mut up = dir_rel;
    while !up.is_empty() {
        let (parent, leaf) = split(up.as_bstr());
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

/// The prefix of every temporary name a checkout writes beside its target.
pub(crate) const TEMP_PREFIX: &str = ".cairn-merge-";

/// Writes the blob `id` at `rel` as `kind`, atomically (a temporary file beside it, renamed
/// over it), in a directory opened beneath the root.
fn write(repo: &gix::Repository, root: &Root, rel: &BStr, (id, kind): Entry) -> Result<(), Fail> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let (dir_rel, name) = split(rel);
    let dir = root.create_dir_all(dir_rel)?;
    let blob = repo.find_blob(id)?;
    let fail = |source: std::io::Error| FileError {
        path: root.display(rel),
        source,
    };
    let mut temp = std::ffi::OsString::from(format!(
        "{TEMP_PREFIX}{}-{}-",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    temp.push(name);
    if kind == EntryKind::Link {
        rustix::fs::symlinkat(OsStr::from_bytes(&blob.data), &dir, &temp)
            .map_err(|e| fail(e.into()))?;
    } else {
        let mode = if kind == EntryKind::BlobExecutable {
            0o755
        } else {
            0o644
        };
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&dir, &temp, flags, Mode::from_raw_mode(mode))
            .map_err(|e| fail(e.into()))?;
        let mut file = std::fs::File::from(fd);
        let written = file
            .write_all(&blob.data)
            .and_then(|()| file.set_permissions(std::fs::Permissions::from_mode(mode)));
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(&dir, &temp, AtFlags::empty());
            return Err(fail(e).into());
        }
    }
    if let Err(e) = rustix::fs::renameat(&dir, &temp, &dir, name) {
        let _ = rustix::fs::unlinkat(&dir, &temp, AtFlags::empty());
        return Err(fail(e.into()).into());
    }
    Ok(())
}

/// Removes the temporary files an interrupted checkout left beside the paths it changes.
pub(crate) fn remove_temporaries(root: &Root, changes: &[Change]) {
    let dirs: std::collections::BTreeSet<&[u8]> =
        changes.iter().map(|c| split(c.path.as_bstr()).0).collect();
    for dir_rel in dirs {
        let Ok(dir) = root.open_dir(dir_rel) else {
            continue;
        };
        let Ok(listing) = rustix::fs::Dir::read_from(&dir) else {
            continue;
        };
        for entry in listing.flatten() {
            let name = entry.file_name().to_bytes();
            if name.starts_with(TEMP_PREFIX.as_bytes()) {
                let _ = rustix::fs::unlinkat(&dir, OsStr::from_bytes(name), AtFlags::empty());
            }
        }
    }
}

/// Applies `changes` to the working files, then to the index (entries replaced with fresh
/// stat data; the tree cache dropped, as it no longer describes the index). Running it
/// again after an interruption finishes the same result.
pub(crate) fn apply(
    repo: &gix::Repository,
    workdir: &Path,
    mut index: gix::index::File,
    changes: &[Change],
) -> Result<(), Fail> {
    let root = Root::open(workdir)?;
    for change in changes.iter().filter(|c| c.new.is_none()) {
        remove(&root, change.path.as_bstr())?;
    }
    for change in changes {
        if let Some(entry) = change.new {
            write(repo, &root, change.path.as_bstr(), entry)?;
        }
    }
    let changed: std::collections::HashSet<&BStr> =
        changes.iter().map(|c| c.path.as_bstr()).collect();
    index.remove_entries(|_, path, _| changed.contains(path));
    for change in changes {
        let Some((id, kind)) = change.new else {
            continue;
        };
        let path = full(workdir, change.path.as_bstr())?;
        let meta = gix::index::fs::Metadata::from_path_no_follow(&path)?;
        let stat = gix::index::entry::Stat::from_fs(&meta)?;
        let mode = match kind {
            EntryKind::BlobExecutable => gix::index::entry::Mode::FILE_EXECUTABLE,
            EntryKind::Link => gix::index::entry::Mode::SYMLINK,
            EntryKind::Commit => gix::index::entry::Mode::COMMIT,
            _ => gix::index::entry::Mode::FILE,
        };
        index.dangerously_push_entry(
            stat,
            id,
            gix::index::entry::Flags::empty(),
            mode,
            change.path.as_bstr(),
        );
    }
    index.sort_entries();
    index.remove_tree();
    index.remove_resolve_undo();
    index.write(gix::index::write::Options::default())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A working file that cannot be removed names its path, and the errno stays reachable
    /// as the source (it was flattened into the message before).
    #[test]
    fn a_failed_removal_keeps_the_io_error_as_its_source() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("d/inner")).expect("a directory");
        let root = Root::open(dir.path()).expect("root");
        // unlink(2) of a directory fails, for root too.
        let err = remove(&root, BStr::new("d")).expect_err("a directory is not unlinked");
        let io = std::error::Error::source(&*err)
            .and_then(|e| e.downcast_ref::<std::io::Error>())
            .expect("the io error as the source");
        assert_eq!(
            io.raw_os_error(),
            Some(rustix::io::Errno::ISDIR.raw_os_error())
        );
        assert_eq!(
            err.to_string(),
            format!("{}/d: {}", dir.path().display(), Errno::ISDIR)
        );
    }
}
