//! `unmount --materialize`: the mount's files copied into the directory it covers, so that
//! unmounting reveals them at once and no writer can slip a file in between.
//!
//! While mounted, only the mount's own handle on the covered directory (opened before
//! mounting) reaches it. The copy goes to [`STAGING`] there, then its entries move up into
//! the covered directory itself, then the mount goes. A marker next to the layer says how
//! far it got, so a server killed half way leaves what [`recover`] (a later `mount` or
//! `unmount` of the directory) can roll back or finish:
//!
//! ```text
//! copying   STAGING may hold part of the copy        -> removed; the layer is attached again
//! copied    the copy is whole, in STAGING or moved up -> moved up; the mount is gone
//! ```

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::rc::Rc;

use camino::{Utf8Path, Utf8PathBuf};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};

use crate::{MountError, MountFailure};

/// The copy's name inside the covered directory while it is made.
pub(crate) const STAGING: &str = ".cairn-materialize";

/// The hidden subcommand of the binary serving mounts that runs [`copy_tree`]. The copy
/// reads the mount, so it runs in a process of its own: a thread of the serving process
/// waiting on its own mount would keep that process from ever exiting once killed (the
/// kernel waits for an answer only the dead process could give).
pub const COPY_COMMAND: &str = "__materialize-copy";

/// Why [`copy_tree`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CopyError {
    /// The directory to copy into could not be opened.
    #[error("{}: {source}", path.display())]
    Target {
        /// The directory.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The copy failed (the error names the path).
    #[error("{0}")]
    Copy(#[source] std::io::Error),
}

/// [`COPY_COMMAND`]` FROM TO`: copies the tree at `from` into the empty directory `to`.
pub fn copy_tree(from: &Path, to: &Path) -> Result<(), CopyError> {
    // `to` is a `/proc/PID/fd/N` link to the serving process's handle: followed.
    let to_dir = rustix::fs::open(
        to,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| CopyError::Target {
        path: to.to_owned(),
        source: e.into(),
    })?;
    copy_into(from, to_dir.as_fd()).map_err(CopyError::Copy)
}

/// How far a materialize got, kept in the file [`Marker::path`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// The copy is being made in [`STAGING`].
    Copying,
    /// The copy is whole (synced), in [`STAGING`] or already moved up.
    Copied,
}

/// The marker of the mount whose layer is `layer`: a file beside it, never inside (the
/// layer is removed once the materialize is done, the marker last).
pub(crate) struct Marker(Utf8PathBuf);

impl Marker {
    pub(crate) fn of(layer: &Utf8Path) -> Marker {
        Marker(Utf8PathBuf::from(format!("{layer}.materialize")))
    }

    pub(crate) fn read(&self) -> std::io::Result<Option<Stage>> {
        match std::fs::read_to_string(&self.0) {
            Ok(s) if s.trim() == "copied" => Ok(Some(Stage::Copied)),
            // Anything else (cut short by a crash) promises no whole copy.
            Ok(_) => Ok(Some(Stage::Copying)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Records `stage` durably before the step it allows.
    pub(crate) fn write(&self, stage: Stage) -> std::io::Result<()> {
        let text = match stage {
            Stage::Copying => "copying\n",
            Stage::Copied => "copied\n",
        };
        let tmp = Utf8PathBuf::from(format!("{}.tmp", self.0));
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &self.0)?;
        sync_parent(&self.0)
    }

    pub(crate) fn remove(&self) -> std::io::Result<()> {
        match std::fs::remove_file(&self.0) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

fn sync_parent(path: &Utf8Path) -> std::io::Result<()> {
    match path.parent() {
        Some(dir) => std::fs::File::open(dir)?.sync_all(),
        None => Ok(()),
    }
}

/// Opens the directory `name` in `dir`, never through a symlink.
fn open_dir(dir: BorrowedFd<'_>, name: &OsStr) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Opens `path` as a directory, never through a symlink at its end.
pub(crate) fn open_path(path: &Utf8Path) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        path.as_std_path(),
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// The names in the directory `dir` (not `.` and `..`), with their kinds.
pub(crate) fn entries(dir: BorrowedFd<'_>) -> std::io::Result<Vec<(OsString, FileType)>> {
    let mut out = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        let kind = match entry.file_type() {
            FileType::Unknown => FileType::from_raw_mode(
                rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?.st_mode,
            ),
            k => k,
        };
        out.push((name.to_owned(), kind));
    }
    Ok(out)
}

/// Copies the tree at `from` (the mount, read-only by now) into the empty directory `to`,
/// keeping what a directory keeps: files (hard links as links), directories, symlinks,
/// FIFOs, sockets and devices, with their permission bits, times and (as root) owners.
/// Both sides are reached by directory handles (a path of any depth, no symlink followed).
/// Errors name the path.
fn copy_into(from: &Path, to: BorrowedFd<'_>) -> std::io::Result<()> {
    let from_dir = open_path_std(from).map_err(|e| named(from, e))?;
    Copier {
        linked: HashMap::new(),
        root: rustix::process::geteuid().is_root(),
    }
    .copy(from_dir.as_fd(), from, to)
}

fn open_path_std(path: &Path) -> rustix::io::Result<OwnedFd> {
    rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

struct Copier {
    /// Where the first name of each file with more than one was copied to, by inode (one
    /// handle per directory, shared by its names).
    linked: HashMap<u64, (Rc<OwnedFd>, OsString)>,
    /// Owners can be given.
    root: bool,
}

fn named(path: &Path, e: impl Into<std::io::Error>) -> std::io::Error {
    let e = e.into();
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

impl Copier {
    /// Copies what the directory `from` (shown as `shown`) holds into `to`.
    fn copy(
        &mut self,
        from: BorrowedFd<'_>,
        shown: &Path,
        to: BorrowedFd<'_>,
    ) -> std::io::Result<()> {
        // `to` again, kept open once a first name of a linked file lands here.
        let mut kept: Option<Rc<OwnedFd>> = None;
        for (name, _) in entries(from).map_err(|e| named(shown, e))? {
            let src = shown.join(&name);
            let meta = rustix::fs::statat(from, &name, AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|e| named(&src, e))?;
            let kind = FileType::from_raw_mode(meta.st_mode);
            let (ino, links) = (meta.st_ino, meta.st_nlink);
            if kind == FileType::Directory {
                rustix::fs::mkdirat(to, &name, Mode::RWXU).map_err(|e| named(&src, e))?;
                let sub_from = open_dir(from, &name).map_err(|e| named(&src, e))?;
                let sub_to = open_dir(to, &name).map_err(|e| named(&src, e))?;
                self.copy(sub_from.as_fd(), &src, sub_to.as_fd())?;
            } else if links > 1
                && let Some((dir, first)) = self.linked.get(&ino)
            {
                rustix::fs::linkat(dir, first, to, &name, AtFlags::empty())
                    .map_err(|e| named(&src, e))?;
                continue;
            } else if kind == FileType::Symlink {
                let target =
                    rustix::fs::readlinkat(from, &name, Vec::new()).map_err(|e| named(&src, e))?;
                rustix::fs::symlinkat(target.as_c_str(), to, &name).map_err(|e| named(&src, e))?;
            } else if kind == FileType::RegularFile {
                let input = rustix::fs::openat(
                    from,
                    &name,
                    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|e| named(&src, e))?;
                let out = rustix::fs::openat(
                    to,
                    &name,
                    OFlags::WRONLY
                        | OFlags::CREATE
                        | OFlags::EXCL
                        | OFlags::NOFOLLOW
                        | OFlags::CLOEXEC,
                    Mode::RUSR | Mode::WUSR,
                )
                .map_err(|e| named(&src, e))?;
                // In bounded pieces (copy_file_range or a buffer), whatever the file's size.
                std::io::copy(
                    &mut std::fs::File::from(input),
                    &mut std::fs::File::from(out),
                )
                .map_err(|e| named(&src, e))?;
            } else {
                // A FIFO, socket or device, made again as it is (a device only by root).
                rustix::fs::mknodat(to, &name, kind, Mode::RUSR | Mode::WUSR, meta.st_rdev)
                    .map_err(|e| named(&src, e))?;
            }
            if links > 1 && kind != FileType::Directory {
                let dir = match &kept {
                    Some(dir) => dir.clone(),
                    None => Rc::new(rustix::io::dup(to).map_err(|e| named(&src, e))?),
                };
                kept = Some(dir.clone());
                self.linked.insert(ino, (dir, name.clone()));
            }
            self.keep_metadata(to, &name, &meta)
                .map_err(|e| named(&src, e))?;
        }
        Ok(())
    }

    /// Gives `name` in `dir` the owner (as root), mode and times of `meta`, the mode after
    /// the owner (a change of owner clears the set-user-ID bit).
    fn keep_metadata(
        &self,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        meta: &rustix::fs::Stat,
    ) -> rustix::io::Result<()> {
        if self.root {
            rustix::fs::chownat(
                dir,
                name,
                Some(rustix::fs::Uid::from_raw(meta.st_uid)),
                Some(rustix::fs::Gid::from_raw(meta.st_gid)),
                AtFlags::SYMLINK_NOFOLLOW,
            )?;
        }
        if FileType::from_raw_mode(meta.st_mode) != FileType::Symlink {
            rustix::fs::chmodat(
                dir,
                name,
                Mode::from_raw_mode(meta.st_mode & 0o7777),
                AtFlags::empty(),
            )?;
        }
        let stamp = |secs: i64, nanos: u64| rustix::fs::Timespec {
            tv_sec: secs,
            tv_nsec: nanos as _,
        };
        rustix::fs::utimensat(
            dir,
            name,
            &rustix::fs::Timestamps {
                last_access: stamp(meta.st_atime, meta.st_atime_nsec),
                last_modification: stamp(meta.st_mtime, meta.st_mtime_nsec),
            },
            AtFlags::SYMLINK_NOFOLLOW,
        )
    }
}

/// Removes `name` in `dir` and, if it is a directory, everything in it, never following a
/// symlink. A name already gone is no error.
pub(crate) fn remove_all(dir: BorrowedFd<'_>, name: &OsStr) -> std::io::Result<()> {
    match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
        Ok(()) => return Ok(()),
        Err(rustix::io::Errno::NOENT) => return Ok(()),
        Err(rustix::io::Errno::ISDIR) | Err(rustix::io::Errno::PERM) => {}
        Err(e) => return Err(e.into()),
    }
    let sub = open_dir(dir, name)?;
    for (child, _) in entries(sub.as_fd())? {
        remove_all(sub.as_fd(), &child)?;
    }
    rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?;
    Ok(())
}

/// Moves every entry of `from` into `to` (no name there is replaced); returns the names
/// that could not move because `to` holds them already.
pub(crate) fn move_entries(
    from: BorrowedFd<'_>,
    to: BorrowedFd<'_>,
) -> std::io::Result<Vec<OsString>> {
    let mut taken = Vec::new();
    for (name, _) in entries(from)? {
        match rustix::fs::renameat_with(from, &name, to, &name, RenameFlags::NOREPLACE) {
            Ok(()) => {}
            Err(rustix::io::Errno::EXIST) => taken.push(name),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(taken)
}

/// Copies the mount at `root` into [`STAGING`] in the covered directory, whole and synced,
/// and returns its handle; the marker then says so.
pub(crate) fn stage(
    covered: BorrowedFd<'_>,
    root: &Utf8Path,
    marker: &Marker,
) -> std::io::Result<OwnedFd> {
    let named =
        |what: &str, e: std::io::Error| std::io::Error::new(e.kind(), format!("{what}: {e}"));
    let staging = OsStr::new(STAGING);
    marker
        .write(Stage::Copying)
        .map_err(|e| named("its marker", e))?;
    // Left by an earlier attempt that could not clean up.
    remove_all(covered, staging).map_err(|e| named(STAGING, e))?;
    rustix::fs::mkdirat(covered, staging, Mode::RWXU).map_err(|e| named(STAGING, e.into()))?;
    let to = open_dir(covered, staging).map_err(|e| named(STAGING, e))?;
    let copied = std::process::Command::new("/proc/self/exe")
        .arg(COPY_COMMAND)
        .arg(root.as_str())
        .arg(format!(
            "/proc/{}/fd/{}",
            std::process::id(),
            to.as_raw_fd()
        ))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .map_err(|e| named("starting the copy", e))?;
    if !copied.status.success() {
        let said = String::from_utf8_lossy(&copied.stderr);
        return Err(std::io::Error::other(format!(
            "copying: {} ({})",
            said.trim(),
            copied.status
        )));
    }
    rustix::fs::syncfs(&to).map_err(|e| named("syncing the copy", e.into()))?;
    marker
        .write(Stage::Copied)
        .map_err(|e| named("its marker", e))?;
    Ok(to)
}

/// Moves the entries of the whole copy `staging` up into the covered directory and removes
/// [`STAGING`]; returns the names moved. On failure, also the names that may have moved.
pub(crate) fn move_up(
    covered: BorrowedFd<'_>,
    staging: OwnedFd,
) -> Result<Vec<OsString>, (Vec<OsString>, std::io::Error)> {
    let names: Vec<_> = entries(staging.as_fd())
        .map_err(|e| (Vec::new(), e))?
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    let taken = move_entries(staging.as_fd(), covered).map_err(|e| (names.clone(), e))?;
    let moved: Vec<_> = names.into_iter().filter(|n| !taken.contains(n)).collect();
    if !taken.is_empty() {
        let e = std::io::Error::other(format!(
            "the covered directory holds {} already",
            self::names(&taken)
        ));
        return Err((moved, e));
    }
    rustix::fs::unlinkat(covered, STAGING, AtFlags::REMOVEDIR)
        .map_err(|e| (moved.clone(), std::io::Error::from(e)))?;
    Ok(moved)
}

/// Undoes [`stage`] and [`move_up`]: the names moved up go back into [`STAGING`] (its
/// marker still saying the copy is whole, so a crash meanwhile finishes instead), then
/// the marker says it is not, then the copy and the marker go.
pub(crate) fn take_back(
    covered: BorrowedFd<'_>,
    marker: &Marker,
    moved: &[OsString],
) -> std::io::Result<()> {
    let staging = OsStr::new(STAGING);
    if !moved.is_empty() {
        match rustix::fs::mkdirat(covered, staging, Mode::RWXU) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        let to = open_dir(covered, staging)?;
        for name in moved {
            match rustix::fs::renameat_with(covered, name, &to, name, RenameFlags::NOREPLACE) {
                // Never moved up.
                Ok(()) | Err(rustix::io::Errno::NOENT) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    marker.write(Stage::Copying)?;
    remove_all(covered, staging)?;
    marker.remove()
}

/// What [`recover`] found of a materialize a killed server left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovered {
    /// Nothing was under way.
    Nothing,
    /// The copy was not whole: it is gone, and the layer can be attached again.
    RolledBack,
    /// The copy was whole: the directory now holds it, and the mount is no more (the
    /// caller registers the worktree as an ordinary directory and drops the layer).
    Finished,
}

/// Rolls back or finishes a materialize of the mount at `root` (layer `layer`) that a
/// killed server left, after detaching its dead mount.
pub fn recover(root: &Utf8Path, layer: &Utf8Path) -> Result<Recovered, MountError> {
    let marker = Marker::of(layer);
    let failed = |step: &'static str, source: std::io::Error| MountError::Failed {
        root: root.to_owned(),
        source: MountFailure::Recovering { step, source },
    };
    let Some(stage) = marker.read().map_err(|e| failed("its marker", e))? else {
        return Ok(Recovered::Nothing);
    };
    crate::clear_stale(root);
    let dir = open_path(root).map_err(|e| failed("the directory", e))?;
    let staging = OsStr::new(STAGING);
    match stage {
        Stage::Copying => {
            remove_all(dir.as_fd(), staging).map_err(|e| failed(STAGING, e))?;
            marker.remove().map_err(|e| failed("its marker", e))?;
            Ok(Recovered::RolledBack)
        }
        // The directory was emptied since (a reboot cleared /tmp): the layer is all there is.
        Stage::Copied
            if entries(dir.as_fd())
                .map_err(|e| failed("the directory", e))?
                .is_empty() =>
        {
            marker.remove().map_err(|e| failed("its marker", e))?;
            Ok(Recovered::RolledBack)
        }
        Stage::Copied => {
            match open_dir(dir.as_fd(), staging) {
                Ok(from) => {
                    let taken = move_entries(from.as_fd(), dir.as_fd())
                        .map_err(|e| failed("moving the copy up", e))?;
                    if !taken.is_empty() {
                        return Err(MountError::Failed {
                            root: root.to_owned(),
                            source: MountFailure::CopyInTheWay {
                                taken: names(&taken),
                                staging: format!("{root}/{STAGING}"),
                            },
                        });
                    }
                    rustix::fs::unlinkat(dir.as_fd(), staging, AtFlags::REMOVEDIR)
                        .map_err(|e| failed(STAGING, e.into()))?;
                }
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOENT.raw_os_error()) => {}
                Err(e) => return Err(failed(STAGING, e)),
            }
            Ok(Recovered::Finished)
        }
    }
}

/// Drops the marker of a materialize that is done (after the layer is gone).
pub fn materialized(layer: &Utf8Path) -> std::io::Result<()> {
    Marker::of(layer).remove()
}

pub(crate) fn names(names: &[OsString]) -> String {
    names
        .iter()
        .map(|n| n.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(", ")
}
