//! Resolving paths beneath a root through directory handles, never through a symlink.
//!
//! Every operation that writes into a worktree opens the directory it works in through a
//! handle chain that starts at the root: `openat2` with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS` where the kernel has it, else one
//! `openat(O_NOFOLLOW | O_DIRECTORY)` per component. The caller then acts on a name inside
//! that handle (`openat`, `mkdirat`, `unlinkat`, `renameat`, `symlinkat`), so there is no
//! window between checking a path and using it.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use std::ffi::{CStr, OsString};
use std::os::unix::ffi::OsStringExt;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// A path was refused, or the file system failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BeneathError {
    /// The path would leave the root or pass through something that is not a directory.
    #[error("{}: refused: {reason}", path.display())]
    Refused {
        /// The path, as given, below the root.
        path: PathBuf,
        /// Why.
        reason: &'static str,
    },
    /// The file system failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl BeneathError {
    /// True if the path (or a leading directory of it) does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, BeneathError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

/// A worktree root, held open.
#[derive(Debug)]
pub struct Root {
    dir: OwnedFd,
    path: PathBuf,
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

fn components(rel: &[u8]) -> impl Iterator<Item = &[u8]> {
    rel.split(|&b| b == b'/').filter(|c| !c.is_empty())
}

impl Root {
    /// Opens the directory `path` (itself not a symlink).
    pub fn open(path: &Path) -> Result<Root, BeneathError> {
        Root::opened(rustix::fs::open(path, DIR_FLAGS, Mode::empty()), path)
    }

    /// Opens the directory `name` in the directory `dir` (itself not a symlink) as a root;
    /// `path` is its path, for messages.
    pub fn open_at(dir: &OwnedFd, name: &str, path: &Path) -> Result<Root, BeneathError> {
        Root::opened(
            rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty()),
            path,
        )
    }

    fn opened(dir: rustix::io::Result<OwnedFd>, path: &Path) -> Result<Root, BeneathError> {
        Ok(Root {
            dir: dir.map_err(io_err(path.to_owned()))?,
            path: path.to_owned(),
        })
    }

    /// The root's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The full path of `rel`, for messages.
    pub fn display(&self, rel: &[u8]) -> PathBuf {
        if rel.is_empty() {
            self.path.clone()
        } else {
            self.path.join(OsStr::from_bytes(rel))
        }
    }

    fn check(&self, rel: &[u8]) -> Result<(), BeneathError> {
        let refuse = |reason| {
            Err(BeneathError::Refused {
                path: self.display(rel),
                reason,
            })
        };
        if rel.starts_with(b"/") {
            return refuse("absolute path");
        }
        if components(rel).any(|c| c == b".." || c == b".") {
            return refuse("'.' or '..' component");
        }
        Ok(())
    }

    fn map(&self, rel: &[u8], e: Errno) -> BeneathError {
        let reason = match e {
            Errno::LOOP => "a symlink in the path",
            Errno::XDEV => "escapes the root",
            Errno::NOTDIR => "a file where a directory must be",
            _ => {
                return BeneathError::Io {
                    path: self.display(rel),
                    source: e.into(),
                };
            }
        };
        BeneathError::Refused {
            path: self.display(rel),
            reason,
        }
    }

    /// Opens the directory `rel` beneath the root; a symlink anywhere on the way, `..`, or
    /// an absolute path is refused.
    pub fn open_dir(&self, rel: &[u8]) -> Result<OwnedFd, BeneathError> {
        self.check(rel)?;
        let rel_path = if rel.is_empty() { b".".as_slice() } else { rel };
        let how = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        match rustix::fs::openat2(
            &self.dir,
            OsStr::from_bytes(rel_path),
            DIR_FLAGS,
            Mode::empty(),
            how,
        ) {
            Ok(fd) => Ok(fd),
            // No openat2 (old kernel, or filtered): walk one component at a time.
            Err(Errno::NOSYS | Errno::PERM) => self.walk(rel, false),
            Err(e) => Err(self.map(rel, e)),
        }
    }

    /// Opens the directory `rel`, creating what is missing, refusing symlinks and files in
    /// the way.
    pub fn create_dir_all(&self, rel: &[u8]) -> Result<OwnedFd, BeneathError> {
        self.check(rel)?;
        match self.open_dir(rel) {
            Ok(fd) => Ok(fd),
            Err(e) if e.is_not_found() => self.walk(rel, true),
            Err(e) => Err(e),
        }
    }

    /// Removes whatever is at `rel` (a directory with everything in it; a symlink itself,
    /// never what it points to). A missing path, or one whose directory is missing, is fine.
    pub fn remove_all(&self, rel: &[u8]) -> Result<(), BeneathError> {
        self.check(rel)?;
        let (dir, name) = match rel.iter().rposition(|&b| b == b'/') {
            Some(i) => (&rel[..i], &rel[i + 1..]),
            None => (&[][..], rel),
        };
        if name.is_empty() {
            return Err(BeneathError::Refused {
                path: self.display(rel),
                reason: "the root itself",
            });
        }
        let fd = match self.open_dir(dir) {
            Ok(fd) => fd,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e),
        };
        remove_at(&fd, OsStr::from_bytes(name), &self.display(rel))
    }

    /// The names directly in the root.
    pub fn names(&self) -> Result<Vec<OsString>, BeneathError> {
        names(&self.dir).map_err(io_err(self.path.clone()))
    }

    fn walk(&self, rel: &[u8], create: bool) -> Result<OwnedFd, BeneathError> {
        let mut fd = rustix::fs::openat(&self.dir, ".", DIR_FLAGS, Mode::empty())
            .map_err(|e| self.map(rel, e))?;
        for name in components(rel) {
            let name = OsStr::from_bytes(name);
            fd = match rustix::fs::openat(&fd, name, DIR_FLAGS, Mode::empty()) {
                Ok(next) => next,
                Err(Errno::NOENT) if create => {
                    match rustix::fs::mkdirat(&fd, name, Mode::from_raw_mode(0o777)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(self.map(rel, e)),
                    }
                    rustix::fs::openat(&fd, name, DIR_FLAGS, Mode::empty())
                        .map_err(|e| self.map(rel, e))?
                }
                Err(e) => return Err(self.map(rel, e)),
            };
        }
        Ok(fd)
    }
}

/// Turns an errno into a [`BeneathError::Io`] naming `path`.
pub fn io_err(path: PathBuf) -> impl Fn(Errno) -> BeneathError {
    move |e| BeneathError::Io {
        path: path.clone(),
        source: e.into(),
    }
}

/// The status of `name` in `dir`, not following a symlink; `None` if it does not exist.
pub fn stat_at(dir: &OwnedFd, name: &OsStr) -> Result<Option<rustix::fs::Stat>, Errno> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(st)),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The names in a directory, `.` and `..` left out.
pub fn names(dir: &OwnedFd) -> Result<Vec<OsString>, Errno> {
    let mut out = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let name: &CStr = entry.file_name();
        let bytes = name.to_bytes();
        if bytes != b"." && bytes != b".." {
            out.push(OsString::from_vec(bytes.to_vec()));
        }
    }
    out.sort();
    Ok(out)
}

/// Removes `name` in `dir`, a directory with everything in it; a symlink is removed
/// itself, never what it points to.
pub fn remove_at(dir: &OwnedFd, name: &OsStr, path: &Path) -> Result<(), BeneathError> {
    let io = io_err(path.to_owned());
    let Some(st) = stat_at(dir, name).map_err(&io)? else {
        return Ok(());
    };
    if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
        let sub = rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty()).map_err(&io)?;
        for child in names(&sub).map_err(&io)? {
            remove_at(&sub, &child, &path.join(&child))?;
        }
        match rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(io(e)),
        }
    } else {
        match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(io(e)),
        }
    }
}

/// True if `rel` names a place beneath `root` reachable without following a symlink (the
/// place itself need not exist; its directory must).
pub fn is_path_safe(rel: &[u8], root: &Path) -> bool {
    let parent = match rel.iter().rposition(|&b| b == b'/') {
        Some(i) => &rel[..i],
        None => &[],
    };
    Root::open(root).and_then(|r| r.open_dir(parent)).is_ok()
        && !rel.is_empty()
        && !rel.starts_with(b"/")
        && !components(rel).any(|c| c == b".." || c == b".")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        std::os::unix::fs::symlink("../..", root.join("a/up")).unwrap();
        std::os::unix::fs::symlink("link", root.join("chain")).unwrap();
        std::fs::write(root.join("file"), "x").unwrap();
        (dir, root, outside)
    }

    #[test]
    fn only_real_directories_beneath_the_root_open() {
        let (_dir, root, outside) = setup();
        let r = Root::open(&root).unwrap();
        assert!(r.open_dir(b"").is_ok());
        assert!(r.open_dir(b"a/b").is_ok());
        for bad in [
            &b"link"[..],
            b"link/x",
            b"a/up",
            b"a/up/outside",
            b"chain",
            b"file",
            b"file/x",
            b"../outside",
            b"/etc",
            b"a/../a",
        ] {
            let err = r.open_dir(bad).unwrap_err();
            assert!(
                matches!(err, BeneathError::Refused { .. }),
                "{:?}: {err}",
                String::from_utf8_lossy(bad)
            );
        }
        assert!(r.open_dir(b"missing").unwrap_err().is_not_found());
        // Creating never goes through a link, and leaves the outside alone.
        assert!(r.create_dir_all(b"link/new").is_err());
        assert!(r.create_dir_all(b"a/up/new").is_err());
        assert!(r.create_dir_all(b"file/new").is_err());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        assert!(r.create_dir_all(b"a/c/d").is_ok());
        assert!(root.join("a/c/d").is_dir());
        // The component-by-component fallback refuses the same things.
        for bad in [
            &b"link"[..],
            b"link/x",
            b"a/up/outside",
            b"chain",
            b"file/x",
        ] {
            assert!(
                matches!(r.walk(bad, true), Err(BeneathError::Refused { .. })),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert!(r.walk(b"a/b", false).is_ok());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        assert!(is_path_safe(b"a/b/new.txt", &root));
        assert!(!is_path_safe(b"link/x", &root));
        assert!(!is_path_safe(b"../x", &root));
    }
}
