//! Paths of a worktree whose absolute form is longer than the system takes (`PATH_MAX`).
//!
//! A tree holds paths of up to 4096 bytes from its root, and a root may itself be long: a
//! file 2,000 bytes deep under a root of 3,000 bytes lies where no call by absolute path
//! gets (`ENAMETOOLONG`). Such a path is reached through handles instead: the directory
//! holding it is opened beneath the root (`openat2` with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS`, else one `O_NOFOLLOW` component at a time: [`Root::open_dir`]),
//! and the file is acted on by its name in that directory. A symlink swapped in anywhere
//! on the way is never followed: the path is then, as far as a capture can tell, not
//! there. Paths that fit go by absolute path as before: one call, not three.

use std::ffi::OsStr;
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use path_policy::{BeneathError, MAX_NAME_LEN, Root, RulesFile};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use crate::paths::{join, split_parent};
use crate::rules::RulesSource;

/// The longest absolute path the system takes (`PATH_MAX` less its NUL).
const SYSTEM_PATH_MAX: usize = 4095;

/// Whether `rel` (a path from the worktree root `root`) can be named from `/`.
pub(crate) fn fits(root: &Path, rel: &[u8]) -> bool {
    root.as_os_str().len() + 1 + rel.len() <= SYSTEM_PATH_MAX
}

/// Whether every name directory `rel` may hold, even its `.git/info/exclude`, can be
/// named from `/`: else the directory is listed and read through a handle.
pub(crate) fn listable(root: &Path, rel: &[u8]) -> bool {
    root.as_os_str().len() + 1 + rel.len() + 1 + MAX_NAME_LEN <= SYSTEM_PATH_MAX
}

/// A refusal of [`Root`] as an I/O error: a symlink or a file in the way means nothing
/// of the path lies beneath the root (`NotFound`), as a capture sees a path gone.
fn io_error(e: BeneathError) -> io::Error {
    match e {
        BeneathError::Io { source, .. } => source,
        other => io::Error::new(io::ErrorKind::NotFound, other),
    }
}

/// The flags of a directory handle: never a symlink.
const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// A worktree root held open, to reach paths beneath it by handle.
pub(crate) struct Beneath {
    root: Root,
}

impl Beneath {
    /// Opens the worktree root `root`.
    pub(crate) fn open(root: &Path) -> io::Result<Beneath> {
        Ok(Beneath {
            root: Root::open(root).map_err(io_error)?,
        })
    }

    /// The full path of `rel`, for messages.
    pub(crate) fn display(&self, rel: &[u8]) -> PathBuf {
        self.root.display(rel)
    }

    /// The directory holding `rel` (no symlink on the way), and `rel`'s name in it.
    pub(crate) fn parent<'a>(&self, rel: &'a [u8]) -> io::Result<(OwnedFd, &'a OsStr)> {
        let (dir, name) = split_parent(rel);
        let fd = self.root.open_dir(dir).map_err(io_error)?;
        Ok((fd, OsStr::from_bytes(name)))
    }

    /// The directory `rel` (no symlink on the way, itself included). Opened from its
    /// parent: `rel` itself may be as long as a tree's path, one more than a call takes.
    pub(crate) fn dir(&self, rel: &[u8]) -> io::Result<OwnedFd> {
        if rel.is_empty() {
            return self.root.open_dir(rel).map_err(io_error);
        }
        let (parent, name) = self.parent(rel)?;
        match rustix::fs::openat(&parent, name, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => Ok(fd),
            // A link or a file where the directory was: as a refusal on the way.
            Err(Errno::LOOP | Errno::NOTDIR) => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: not a directory", self.display(rel).display()),
            )),
            Err(e) => Err(e.into()),
        }
    }

    /// The `lstat` of `rel`.
    pub fn lstat(&self, rel: &[u8]) -> io::Result<Metadata> {
        let (dir, name) = self.parent(rel)?;
        lstat_at(&dir, name)
    }

    /// `rel` opened to read, as [`open_read`] opens it.
    pub(crate) fn open_read(&self, rel: &[u8]) -> io::Result<File> {
        let (dir, name) = self.parent(rel)?;
        Ok(File::from(rustix::fs::openat(
            &dir,
            name,
            READ_FLAGS,
            Mode::empty(),
        )?))
    }

    /// The target of the symlink `rel`.
    pub(crate) fn read_link(&self, rel: &[u8]) -> io::Result<PathBuf> {
        let (dir, name) = self.parent(rel)?;
        let target = rustix::fs::readlinkat(&dir, name, Vec::new())?;
        Ok(PathBuf::from(std::ffi::OsString::from_vec(
            target.into_bytes(),
        )))
    }
}

/// The `lstat` of `name` in `dir`, as [`Metadata`]: through an `O_PATH` handle, which
/// opens anything (a FIFO without blocking) and follows no link.
pub(crate) fn lstat_at(dir: impl AsFd, name: &OsStr) -> io::Result<Metadata> {
    File::from(path_handle(dir, name)?).metadata()
}

/// `name` in `dir` opened `O_PATH`, not following a link: enough to `fstat` or `fstatfs`.
pub(crate) fn path_handle(dir: impl AsFd, name: &OsStr) -> io::Result<OwnedFd> {
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rustix::fs::openat(dir, name, flags, Mode::empty())?)
}

/// Opening a file a walk saw as regular: never through a link, never blocking (a FIFO
/// swapped in since); callers check the handle is still a regular file.
const READ_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::CLOEXEC);

/// The `lstat` of `rel` under `root`: by absolute path where it fits, else by handle.
pub fn lstat(root: &Path, rel: &[u8]) -> io::Result<Metadata> {
    if fits(root, rel) {
        join(root, rel).symlink_metadata()
    } else {
        Beneath::open(root)?.lstat(rel)
    }
}

/// `rel` under `root` opened to read (no link followed, never blocking): by absolute path
/// where it fits, else by handle.
pub(crate) fn open_read(root: &Path, rel: &[u8]) -> io::Result<File> {
    if fits(root, rel) {
        Ok(File::from(rustix::fs::open(
            join(root, rel),
            READ_FLAGS,
            Mode::empty(),
        )?))
    } else {
        Beneath::open(root)?.open_read(rel)
    }
}

/// The target of the symlink `rel` under `root`.
pub(crate) fn read_link(root: &Path, rel: &[u8]) -> io::Result<PathBuf> {
    if fits(root, rel) {
        std::fs::read_link(join(root, rel))
    } else {
        Beneath::open(root)?.read_link(rel)
    }
}

/// The bytes of file `rel` in the worktree at `root`, as `diff` and `status` read a live
/// file the store lacks: no link followed at the end (nor anywhere on the way where the
/// path is reached by handle), never blocking on a FIFO swapped in.
pub fn read_live_file(root: &Path, rel: &[u8]) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    io::Read::read_to_end(&mut open_read(root, rel)?, &mut bytes)?;
    Ok(bytes)
}

/// The target of symlink `rel` in the worktree at `root`, as [`read_live_file`] reads.
pub fn read_live_link(root: &Path, rel: &[u8]) -> io::Result<Vec<u8>> {
    Ok(read_link(root, rel)?.into_os_string().into_vec())
}

/// The directory `rel` under `root`, opened to list and for `*at` calls: by absolute path
/// where every name in it fits (its last component never a link), else by handle.
pub fn open_dir(root: &Path, rel: &[u8]) -> io::Result<OwnedFd> {
    if listable(root, rel) {
        Ok(rustix::fs::open(join(root, rel), DIR_FLAGS, Mode::empty())?)
    } else {
        Beneath::open(root)?.dir(rel)
    }
}

/// The names in the directory `dir`, with whether each is a directory (`lstat`ed where
/// the listing does not say).
pub fn list(dir: &OwnedFd) -> io::Result<Vec<(Vec<u8>, bool)>> {
    let mut out = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let is_dir = match entry.file_type() {
            rustix::fs::FileType::Directory => true,
            rustix::fs::FileType::Unknown => {
                lstat_at(dir, OsStr::from_bytes(name)).is_ok_and(|m| m.is_dir())
            }
            _ => false,
        };
        out.push((name.to_vec(), is_dir));
    }
    Ok(out)
}

/// Pattern files of a directory out of reach, read through its handle: a path under
/// `abs` (the directory's absolute path, never passed to the system) is taken from `dir`;
/// any other (a linked worktree's git directory) as it is.
pub(crate) struct RulesBeneath<'a> {
    pub dir: &'a OwnedFd,
    pub abs: &'a Path,
}

impl RulesSource for RulesBeneath<'_> {
    fn read(&self, path: &Path, follow: bool) -> io::Result<RulesFile> {
        match path.strip_prefix(self.abs) {
            Ok(inside) => path_policy::read_rules_file_at(self.dir, inside, follow),
            Err(_) => path_policy::read_rules_file(path, follow),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A directory whose path is about `len` bytes long, made 200 bytes at a time through
    /// handles (as no call takes the whole of it), and the relative path to it from `base`.
    fn deep_dir(base: &Path, len: usize, letter: u8) -> Vec<u8> {
        let component = vec![letter; 200];
        let mut rel = Vec::new();
        let mut fd = rustix::fs::open(base, DIR_FLAGS, Mode::empty()).expect("base");
        while rel.len() + 201 <= len {
            let name = OsStr::from_bytes(&component);
            rustix::fs::mkdirat(&fd, name, Mode::from_raw_mode(0o755)).expect("mkdir");
            fd = rustix::fs::openat(&fd, name, DIR_FLAGS, Mode::empty()).expect("open");
            if !rel.is_empty() {
                rel.push(b'/');
            }
            rel.extend_from_slice(&component);
        }
        rel
    }

    fn write_at(base: &Path, rel: &[u8], body: &[u8]) {
        let (dir, name) = Beneath::open(base).expect("base").parent(rel).expect("dir");
        let fd = rustix::fs::openat(
            &dir,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )
        .expect("create");
        std::io::Write::write_all(&mut File::from(fd), body).expect("write");
    }

    #[test]
    fn a_path_longer_than_the_system_takes_is_reached_beneath_the_root_only() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let base = tmp.path();
        // A root of ~3,000 bytes holding a file ~2,000 bytes deep: 5,000 bytes from `/`.
        let root = join(base, &deep_dir(base, 3000, b'r'));
        let dir = deep_dir(&root, 1800, b'd');
        let rel = [&dir[..], b"/file.txt"].concat();
        assert!(!fits(&root, &rel) && !listable(&root, &dir) && listable(&root, b""));
        write_at(&root, &rel, b"deep bytes");
        write_at(&root, &[&dir[..], b"/.gitignore"].concat(), b"*.log\n");
        write_at(&root, b"short.txt", b"short bytes");

        let read = |rel: &[u8]| -> io::Result<Vec<u8>> {
            let mut body = Vec::new();
            open_read(&root, rel)?.read_to_end(&mut body)?;
            Ok(body)
        };
        assert_eq!(read(&rel).expect("read by handle"), b"deep bytes");
        assert_eq!(read(b"short.txt").expect("read by path"), b"short bytes");
        assert!(lstat(&root, &rel).expect("lstat").is_file());
        let listed = list(&open_dir(&root, &dir).expect("dir")).expect("list");
        assert!(
            listed.contains(&(b"file.txt".to_vec(), false)),
            "{listed:?}"
        );
        // The pattern files of a directory out of reach are read through its handle.
        let beneath = Beneath::open(&root).expect("root");
        let dir_fd = beneath.dir(&dir).expect("dir");
        let abs = join(&root, &dir);
        let source = RulesBeneath {
            dir: &dir_fd,
            abs: &abs,
        };
        assert_eq!(
            source.read(&abs.join(".gitignore"), false).expect("read"),
            RulesFile::Read(b"*.log\n".to_vec())
        );

        // Outside the worktree, the same names, another file's bytes.
        let outside = base.join("outside");
        std::fs::create_dir(&outside).expect("mkdir outside");
        let copy = deep_dir(&outside, 1800, b'd');
        write_at(
            &outside,
            &[&copy[..], b"/file.txt"].concat(),
            b"outside bytes",
        );
        // The third directory of the path swapped for a link to its outside twin.
        let third = &dir[..201 * 3 - 1];
        let (above, name) = split_parent(third);
        let above = beneath.dir(above).expect("above");
        let name = OsStr::from_bytes(name);
        rustix::fs::renameat(&above, name, &above, OsStr::new("moved")).expect("mv");
        let twin = join(&outside, &copy[..201 * 3 - 1]);
        rustix::fs::symlinkat(twin.as_os_str(), &above, name).expect("symlink");

        assert_eq!(
            read(&rel).expect_err("open").kind(),
            io::ErrorKind::NotFound
        );
        for (what, result) in [
            ("lstat", lstat(&root, &rel).map(drop)),
            ("read_link", read_link(&root, &rel).map(drop)),
            ("open_dir", open_dir(&root, &dir).map(drop)),
            ("dir", beneath.dir(third).map(drop)),
        ] {
            let err = result.expect_err(what);
            assert_eq!(err.kind(), io::ErrorKind::NotFound, "{what}: {err}");
        }
    }
}
