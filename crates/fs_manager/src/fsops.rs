//! The only code that writes into worktrees. It never writes through a symlink: files are
//! created with `O_EXCL` or as a temporary file renamed over the target (which replaces a
//! link instead of following it), and leading directories are checked with `lstat`.

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use cas::{BlobId, EntryKind, Reader};

/// `root` joined with a tree path.
pub(crate) fn join(root: &Path, rel: &[u8]) -> PathBuf {
    if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(OsStr::from_bytes(rel))
    }
}

fn mode_of(kind: EntryKind) -> u32 {
    if kind == EntryKind::Executable {
        0o777
    } else {
        0o666
    }
}

/// Failure to materialize one path.
#[derive(Debug)]
pub(crate) enum WriteFailure {
    Io(PathBuf, std::io::Error),
    Store(cas::ReadError),
    /// A non-directory stands where a directory must be.
    Blocked(PathBuf, &'static str),
}

impl WriteFailure {
    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> WriteFailure + '_ {
        move |e| WriteFailure::Io(path.to_owned(), e)
    }
}

/// Creates the directories of `rel_dir` under `root` that are missing. Each existing
/// component must be a real directory: a symlink or file there is refused, never followed.
pub(crate) fn ensure_dir(root: &Path, rel_dir: &[u8]) -> Result<(), WriteFailure> {
    let mut path = root.to_path_buf();
    for component in rel_dir.split(|&b| b == b'/').filter(|c| !c.is_empty()) {
        path.push(OsStr::from_bytes(component));
        match path.symlink_metadata() {
            Ok(m) if m.is_dir() => {}
            Ok(m) if m.file_type().is_symlink() => {
                return Err(WriteFailure::Blocked(
                    path,
                    "a symlink stands where a directory must be",
                ));
            }
            Ok(_) => {
                return Err(WriteFailure::Blocked(
                    path,
                    "a file stands where a directory must be",
                ));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir(&path).map_err(WriteFailure::io(&path))?;
            }
            Err(e) => return Err(WriteFailure::Io(path, e)),
        }
    }
    Ok(())
}

fn write_content(
    file: &mut std::fs::File,
    reader: &Reader,
    blob: BlobId,
) -> Result<(), cas::ReadError> {
    let mut out = std::io::BufWriter::with_capacity(256 << 10, file);
    reader.write_blob_to(blob, &mut out)?;
    out.flush().map_err(|source| cas::ReadError::Sink {
        id: blob.into(),
        source,
    })?;
    Ok(())
}

/// Writes a new file or symlink where nothing exists yet (`O_EXCL`: an existing path or
/// link makes it fail). Returns its metadata.
pub(crate) fn create(
    root: &Path,
    rel: &[u8],
    kind: EntryKind,
    blob: BlobId,
    reader: &Reader,
) -> Result<std::fs::Metadata, WriteFailure> {
    let path = join(root, rel);
    if kind == EntryKind::Symlink {
        let target = reader.blob(blob).map_err(WriteFailure::Store)?;
        std::os::unix::fs::symlink(OsStr::from_bytes(&target), &path)
            .map_err(WriteFailure::io(&path))?;
        return path.symlink_metadata().map_err(WriteFailure::io(&path));
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode_of(kind))
        .open(&path)
        .map_err(WriteFailure::io(&path))?;
    if let Err(e) = write_content(&mut file, reader, blob) {
        drop(file);
        let _ = std::fs::remove_file(&path);
        return Err(WriteFailure::Store(e));
    }
    file.metadata().map_err(WriteFailure::io(&path))
}

/// Replaces whatever file or symlink is at `rel` (or nothing) with the blob, atomically:
/// written beside it under a temporary name, then renamed over it.
pub(crate) fn replace(
    root: &Path,
    rel: &[u8],
    kind: EntryKind,
    blob: BlobId,
    reader: &Reader,
) -> Result<std::fs::Metadata, WriteFailure> {
    let path = join(root, rel);
    let parent = path.parent().unwrap_or(root).to_path_buf();
    if kind == EntryKind::Symlink {
        let target = reader.blob(blob).map_err(WriteFailure::Store)?;
        let temp = temp_name(&parent);
        std::os::unix::fs::symlink(OsStr::from_bytes(&target), &temp)
            .map_err(WriteFailure::io(&temp))?;
        if let Err(e) = std::fs::rename(&temp, &path) {
            let _ = std::fs::remove_file(&temp);
            return Err(WriteFailure::Io(path, e));
        }
        return path.symlink_metadata().map_err(WriteFailure::io(&path));
    }
    let mut temp = tempfile::Builder::new()
        .prefix(".cairn-")
        .permissions(std::fs::Permissions::from_mode(mode_of(kind)))
        .tempfile_in(&parent)
        .map_err(WriteFailure::io(&parent))?;
    write_content(temp.as_file_mut(), reader, blob).map_err(WriteFailure::Store)?;
    temp.persist(&path)
        .map_err(|e| WriteFailure::Io(path.clone(), e.error))?;
    path.symlink_metadata().map_err(WriteFailure::io(&path))
}

fn temp_name(dir: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(".cairn-link-{}-{n}", std::process::id()))
}

/// Removes the file or symlink at `rel` (never what a symlink points to); then removes
/// the directories above it that became empty, up to `root`. A missing path is fine.
pub(crate) fn remove(root: &Path, rel: &[u8]) -> Result<(), WriteFailure> {
    let path = join(root, rel);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(WriteFailure::Io(path, e)),
    }
    let mut dir = path.parent().map(Path::to_path_buf);
    while let Some(d) = dir {
        if d == root || !d.starts_with(root) || std::fs::remove_dir(&d).is_err() {
            break;
        }
        dir = d.parent().map(Path::to_path_buf);
    }
    Ok(())
}
