//! Secrets put back after a sandboxed command: a private copy of every denied path, taken
//! before the command runs, compared with what is there afterwards and restored.
//!
//! Everything here runs unconfined, after a command that may have planted symlinks, so every
//! access to the worktree goes through a [`Root`] handle chain: no symlink is followed at any
//! depth, and nothing is written or deleted outside the root. A secret whose directory is
//! now a symlink (or a file) cannot be put back there; its copy is kept and reported.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

use cairn_engine::{Change, PutBack};
use path_policy::beneath::{io_err, names, remove_at, stat_at};
use path_policy::{BeneathError, Root};

/// Private copies of a worktree's denied paths.
#[derive(Debug)]
pub struct SecretCopy {
    dir: tempfile::TempDir,
    /// Each saved path and its copy; paths that were absent have none.
    saved: BTreeMap<Vec<u8>, PathBuf>,
}

fn std_err(path: &Path) -> impl Fn(std::io::Error) -> BeneathError + '_ {
    move |source| BeneathError::Io {
        path: path.to_owned(),
        source,
    }
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// The directory handle holding `rel` and its last name; `None` when that directory is
/// missing or not reachable beneath the root (a symlink or a file on the way).
fn parent_of<'a>(root: &Root, rel: &'a [u8]) -> Result<Option<(OwnedFd, &'a OsStr)>, BeneathError> {
    let (dir, name) = match rel.iter().rposition(|&b| b == b'/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => (&[][..], rel),
    };
    match root.open_dir(dir) {
        Ok(fd) => Ok(Some((fd, OsStr::from_bytes(name)))),
        Err(e) if e.is_not_found() => Ok(None),
        Err(BeneathError::Refused { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Opens a regular file beneath `dir` for reading, never a FIFO or device (which could
/// block or never end).
fn open_regular(dir: &OwnedFd, name: &OsStr) -> Result<Option<std::fs::File>, Errno> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name, flags, Mode::empty())?;
    let st = rustix::fs::fstat(&fd)?;
    Ok(
        (FileType::from_raw_mode(st.st_mode) == FileType::RegularFile)
            .then(|| std::fs::File::from(fd)),
    )
}

/// Copies `name` in `dir` (a file, symlink or directory tree) to `to`, a path of our own.
/// Other kinds (FIFOs, sockets, devices) are not copied: they hold no secret bytes.
fn copy_out(dir: &OwnedFd, name: &OsStr, to: &Path) -> Result<bool, BeneathError> {
    let io = io_err(to.to_owned());
    let Some(st) = stat_at(dir, name).map_err(&io)? else {
        return Ok(false);
    };
    let mode = st.st_mode & 0o7777;
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Symlink => {
            let target = rustix::fs::readlinkat(dir, name, Vec::new()).map_err(&io)?;
            std::os::unix::fs::symlink(OsStr::from_bytes(target.as_bytes()), to)
                .map_err(std_err(to))?;
        }
        FileType::Directory => {
            let sub = rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty()).map_err(&io)?;
            std::fs::create_dir(to).map_err(std_err(to))?;
            for child in names(&sub).map_err(&io)? {
                copy_out(&sub, &child, &to.join(&child))?;
            }
            std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode))
                .map_err(std_err(to))?;
        }
        FileType::RegularFile => {
            let Some(mut from) = open_regular(dir, name).map_err(&io)? else {
                return Ok(false);
            };
            let mut out = std::fs::File::create_new(to).map_err(std_err(to))?;
            std::io::copy(&mut from, &mut out).map_err(std_err(to))?;
            out.set_permissions(std::fs::Permissions::from_mode(mode))
                .map_err(std_err(to))?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// True if `name` in `dir` is exactly the saved copy: kind, permission bits, bytes, link
/// target, and the same for everything in a directory.
fn same(dir: &OwnedFd, name: &OsStr, saved: &Path) -> Result<bool, BeneathError> {
    let io = io_err(saved.to_owned());
    let Some(st) = stat_at(dir, name).map_err(&io)? else {
        return Ok(false);
    };
    let meta = saved.symlink_metadata().map_err(std_err(saved))?;
    let kind = FileType::from_raw_mode(st.st_mode);
    if kind != FileType::from_raw_mode(meta.mode())
        || (kind != FileType::Symlink && st.st_mode & 0o7777 != meta.mode() & 0o7777)
    {
        return Ok(false);
    }
    use std::os::unix::fs::MetadataExt;
    match kind {
        FileType::Symlink => {
            let target = rustix::fs::readlinkat(dir, name, Vec::new()).map_err(&io)?;
            let saved_target = std::fs::read_link(saved).map_err(std_err(saved))?;
            Ok(target.as_bytes() == saved_target.as_os_str().as_bytes())
        }
        FileType::Directory => {
            let sub = rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty()).map_err(&io)?;
            let live = names(&sub).map_err(&io)?;
            let mut kept: Vec<OsString> = std::fs::read_dir(saved)
                .map_err(std_err(saved))?
                .map(|e| e.map(|e| e.file_name()))
                .collect::<Result<_, _>>()
                .map_err(std_err(saved))?;
            kept.sort();
            if live != kept {
                return Ok(false);
            }
            for child in &live {
                if !same(&sub, child, &saved.join(child))? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        FileType::RegularFile => {
            if st.st_size as u64 != meta.len() {
                return Ok(false);
            }
            let Some(live) = open_regular(dir, name).map_err(&io)? else {
                return Ok(false);
            };
            let kept = std::fs::File::open(saved).map_err(std_err(saved))?;
            same_bytes(live, kept).map_err(std_err(saved))
        }
        _ => Ok(true),
    }
}

fn same_bytes(a: std::fs::File, b: std::fs::File) -> std::io::Result<bool> {
    let (mut a, mut b) = (
        std::io::BufReader::with_capacity(64 << 10, a),
        std::io::BufReader::with_capacity(64 << 10, b),
    );
    let (mut x, mut y) = (vec![0; 64 << 10], vec![0; 64 << 10]);
    loop {
        let n = a.read(&mut x)?;
        if n == 0 {
            return Ok(b.read(&mut y[..1])? == 0);
        }
        if b.read_exact(&mut y[..n]).is_err() || x[..n] != y[..n] {
            return Ok(false);
        }
    }
}

/// Copies the saved `from` to `name` in `dir`, where nothing is: created exclusively,
/// never through a link.
fn copy_in(from: &Path, dir: &OwnedFd, name: &OsStr, path: &Path) -> Result<(), BeneathError> {
    let io = io_err(path.to_owned());
    let meta = from.symlink_metadata().map_err(std_err(from))?;
    let mode = Mode::from_raw_mode(meta.permissions().mode() & 0o7777);
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(from).map_err(std_err(from))?;
        rustix::fs::symlinkat(target.as_os_str(), dir, name).map_err(&io)?;
    } else if meta.is_dir() {
        rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o700)).map_err(&io)?;
        let sub = rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty()).map_err(&io)?;
        for entry in std::fs::read_dir(from).map_err(std_err(from))? {
            let child = entry.map_err(std_err(from))?.file_name();
            copy_in(&from.join(&child), &sub, &child, &path.join(&child))?;
        }
        rustix::fs::fchmod(&sub, mode).map_err(&io)?;
    } else {
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(0o600)).map_err(&io)?;
        let mut out = std::fs::File::from(fd);
        let mut src = std::fs::File::open(from).map_err(std_err(from))?;
        std::io::copy(&mut src, &mut out).map_err(std_err(path))?;
        rustix::fs::fchmod(&out, mode).map_err(&io)?;
    }
    Ok(())
}

impl SecretCopy {
    /// Copies each of `paths` (relative to the root) into a private folder (mode 0700).
    pub fn save(root: &Root, paths: &[Vec<u8>]) -> Result<SecretCopy, BeneathError> {
        let dir = tempfile::Builder::new()
            .prefix("cairn-run-secrets-")
            .tempdir()
            .map_err(std_err(&std::env::temp_dir()))?;
        let mut saved = BTreeMap::new();
        for (i, rel) in paths.iter().enumerate() {
            let Some((parent, name)) = parent_of(root, rel)? else {
                continue;
            };
            let copy = dir.path().join(i.to_string());
            if copy_out(&parent, name, &copy)? {
                saved.insert(rel.clone(), copy);
            }
        }
        Ok(SecretCopy { dir, saved })
    }

    /// Puts every saved path back as it was and removes denied paths that are new
    /// (`now_denied`: the denied paths found after the command). Returns what had changed.
    /// A copy that cannot be put back is kept (its folder outlives `self`) and named.
    pub fn put_back(
        self,
        root: &Root,
        now_denied: &[Vec<u8>],
    ) -> Result<Vec<PutBack>, BeneathError> {
        let mut paths: Vec<&Vec<u8>> = self.saved.keys().chain(now_denied).collect();
        paths.sort();
        paths.dedup();
        let mut out = Vec::new();
        let mut keep = false;
        for rel in paths {
            let saved = self.saved.get(rel);
            let full = root.display(rel);
            let parent = parent_of(root, rel)?;
            let present = match &parent {
                Some((dir, name)) => stat_at(dir, name).map_err(io_err(full.clone()))?.is_some(),
                None => false,
            };
            let change = match (saved, &parent) {
                (None, _) if !present => continue,
                (None, _) => Change::Created,
                (Some(_), _) if !present => Change::Deleted,
                (Some(copy), Some((dir, name))) => {
                    if same(dir, name, copy)? {
                        continue;
                    }
                    Change::Modified
                }
                (Some(_), None) => Change::Deleted,
            };
            if let (true, Some((dir, name))) = (present, &parent) {
                remove_at(dir, name, &full)?;
            }
            let mut kept = None;
            if let Some(copy) = saved {
                match put_one(root, rel, copy, &full) {
                    Ok(()) => {}
                    Err(PutOne::Blocked) => {
                        keep = true;
                        kept = Some(copy.clone());
                    }
                    Err(PutOne::Failed(e)) => {
                        // Keep every copy rather than lose one to a later failure.
                        let _ = self.dir.keep();
                        return Err(e);
                    }
                }
            }
            out.push(PutBack {
                path: rel.clone(),
                change,
                kept,
            });
        }
        if keep {
            let _ = self.dir.keep();
        }
        Ok(out)
    }
}

enum PutOne {
    /// A symlink or a file stands where a directory must be.
    Blocked,
    Failed(BeneathError),
}

fn put_one(root: &Root, rel: &[u8], copy: &Path, full: &Path) -> Result<(), PutOne> {
    let (dir, name) = match rel.iter().rposition(|&b| b == b'/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => (&[][..], rel),
    };
    let fd = match root.create_dir_all(dir) {
        Ok(fd) => fd,
        Err(BeneathError::Refused { .. }) => return Err(PutOne::Blocked),
        Err(e) => return Err(PutOne::Failed(e)),
    };
    let name = OsStr::from_bytes(name);
    // Whatever appeared since the removal (a process the command left behind) goes too.
    remove_at(&fd, name, full).map_err(PutOne::Failed)?;
    copy_in(copy, &fd, name, full).map_err(PutOne::Failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlink_planted_on_the_way_is_never_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let root_path = tmp.path().join("w");
        let outside = tmp.path().join("out");
        std::fs::create_dir_all(root_path.join("config")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root_path.join("config/.env"), "S=1\n").unwrap();
        std::fs::write(root_path.join(".env"), "T=1\n").unwrap();
        std::fs::write(outside.join("canary"), "c\n").unwrap();
        let root = Root::open(&root_path).unwrap();
        let copy = SecretCopy::save(&root, &[b"config/.env".to_vec(), b".env".to_vec()]).unwrap();

        // The command swaps the directory for a link outside, and the secret for a link to
        // a file outside.
        std::fs::remove_dir_all(root_path.join("config")).unwrap();
        std::os::unix::fs::symlink(&outside, root_path.join("config")).unwrap();
        std::fs::remove_file(root_path.join(".env")).unwrap();
        std::os::unix::fs::symlink(outside.join("canary"), root_path.join(".env")).unwrap();

        let mut done = copy
            .put_back(&root, &[b"config/.env".to_vec(), b".env".to_vec()])
            .unwrap();
        done.sort_by(|a, b| a.path.cmp(&b.path));
        assert_eq!(done.len(), 2, "{done:?}");
        assert_eq!(done[0].path, b".env");
        assert_eq!(done[0].change, Change::Modified);
        assert!(done[0].kept.is_none());
        assert_eq!(
            std::fs::read_to_string(root_path.join(".env")).unwrap(),
            "T=1\n"
        );
        assert!(
            !root_path
                .join(".env")
                .symlink_metadata()
                .unwrap()
                .is_symlink()
        );
        assert_eq!(done[1].path, b"config/.env");
        assert_eq!(done[1].change, Change::Deleted);
        let kept = done[1].kept.clone().expect("blocked by the link: kept");
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), "S=1\n");
        std::fs::remove_dir_all(kept.parent().unwrap()).unwrap();
        // Nothing was written outside, and the canary was not touched.
        let names: Vec<_> = std::fs::read_dir(&outside)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["canary"]);
        assert_eq!(
            std::fs::read_to_string(outside.join("canary")).unwrap(),
            "c\n"
        );
    }

    #[test]
    fn changes_to_files_and_directories_are_undone_exactly() {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path().join("w");
        std::fs::create_dir_all(r.join(".ssh/sub")).unwrap();
        std::fs::write(r.join(".ssh/id"), "KEY").unwrap();
        std::fs::write(r.join(".ssh/sub/x"), "X").unwrap();
        std::fs::set_permissions(r.join(".ssh/id"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        std::fs::write(r.join("a.pem"), "PEM").unwrap();
        let root = Root::open(&r).unwrap();
        let denied = [b".ssh".to_vec(), b"a.pem".to_vec()];
        let copy = SecretCopy::save(&root, &denied).unwrap();
        // Unchanged: nothing to report.
        assert!(copy.put_back(&root, &denied).unwrap().is_empty());

        let copy = SecretCopy::save(&root, &denied).unwrap();
        let pem_mode = r.join("a.pem").metadata().unwrap().permissions().mode() & 0o7777;
        std::fs::write(r.join(".ssh/sub/x"), "Y").unwrap();
        std::fs::set_permissions(r.join("a.pem"), std::fs::Permissions::from_mode(0o777)).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            r.join("new.key"),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let mut after = denied.to_vec();
        after.push(b"new.key".to_vec());
        let mut done: Vec<_> = copy
            .put_back(&root, &after)
            .unwrap()
            .into_iter()
            .map(|p| (String::from_utf8(p.path).unwrap(), p.change))
            .collect();
        done.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            done,
            [
                (".ssh".to_owned(), Change::Modified),
                ("a.pem".to_owned(), Change::Modified),
                ("new.key".to_owned(), Change::Created)
            ]
        );
        assert_eq!(std::fs::read_to_string(r.join(".ssh/sub/x")).unwrap(), "X");
        assert_eq!(std::fs::read_to_string(r.join(".ssh/id")).unwrap(), "KEY");
        let mode = |p: &str| r.join(p).symlink_metadata().unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(".ssh/id"), 0o600);
        assert_eq!(mode("a.pem"), pem_mode);
        assert!(r.join("new.key").symlink_metadata().is_err());
    }
}
