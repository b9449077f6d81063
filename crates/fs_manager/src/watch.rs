//! Watching worktrees for changes (Linux inotify), so a long-lived process (`cairn serve`)
//! can skip the per-file `lstat` of directories where nothing happened since the last
//! capture. Off unless [`enable`] was called.
//!
//! Each captured worktree gets an inotify instance with a watch on every directory in its
//! cache. A capture first drains the queue (every change made before it started is in the
//! queue by then); a directory with no event since the previous capture, and watched since
//! before that capture verified it, is *quiet*: its cached listing and file states are
//! trusted as they are. Everything else is checked as without a watcher. A queue overflow,
//! a failed capture or a directory that cannot be watched only costs speed: nothing is
//! trusted that was not watched.
//!
//! Not seen by inotify, so not covered: writes through a memory mapping, and writes to a
//! file through a hard link that lives outside the worktree.

use std::collections::{HashMap, HashSet};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::sync::{Mutex, PoisonError};

use camino::{Utf8Path, Utf8PathBuf};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;

struct Watch {
    fd: OwnedFd,
    by_wd: HashMap<i32, Vec<u8>>,
    by_dir: HashMap<Vec<u8>, i32>,
    /// Directories with an event since the last capture took the set.
    dirty: HashSet<Vec<u8>>,
    /// Events were lost (or nothing was verified yet): trust nothing next time.
    lost: bool,
    /// The set the capture under way took; back to `dirty` if it does not commit.
    taken: HashSet<Vec<u8>>,
}

static WATCHES: Mutex<Option<HashMap<Utf8PathBuf, Watch>>> = Mutex::new(None);

/// Turns watching on for this process (captures made from now on start watching).
pub fn enable() {
    let mut w = WATCHES.lock().unwrap_or_else(PoisonError::into_inner);
    w.get_or_insert_with(HashMap::new);
}

const MASK: WatchFlags = WatchFlags::MODIFY
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::CLOSE_WRITE)
    .union(WatchFlags::CREATE)
    .union(WatchFlags::DELETE)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::DONT_FOLLOW)
    .union(WatchFlags::ONLYDIR)
    .union(WatchFlags::EXCL_UNLINK);

impl Watch {
    fn new() -> Option<Watch> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).ok()?;
        Some(Watch {
            fd,
            by_wd: HashMap::new(),
            by_dir: HashMap::new(),
            dirty: HashSet::new(),
            lost: true,
            taken: HashSet::new(),
        })
    }

    /// Reads every queued event, marking the directories they happened in.
    fn drain(&mut self) {
        let mut buf = [MaybeUninit::<u8>::uninit(); 64 << 10];
        let mut reader = inotify::Reader::new(&self.fd, &mut buf);
        loop {
            let event = match reader.next() {
                Ok(e) => e,
                Err(Errno::AGAIN) => break,
                Err(Errno::INTR) => continue,
                Err(_) => {
                    self.lost = true;
                    break;
                }
            };
            let flags = event.events();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                self.lost = true;
                continue;
            }
            let Some(dir) = self.by_wd.get(&event.wd()).cloned() else {
                continue;
            };
            if flags.intersects(ReadFlags::IGNORED | ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF)
            {
                // Gone or moved: its path no longer names it. Forget the watch; the
                // directory above changed too and is listed again.
                if flags.contains(ReadFlags::MOVE_SELF) {
                    let _ = inotify::remove_watch(&self.fd, event.wd());
                }
                self.by_wd.remove(&event.wd());
                self.by_dir.remove(&dir);
                let parent = crate::scan::split_parent(&dir).0.to_vec();
                self.dirty.insert(parent);
            }
            self.dirty.insert(dir);
        }
    }
}

/// At the start of a capture of `root` (under its worktree lock): the cached directories
/// that are quiet, or `None` when watching is off.
pub(crate) fn quiet_dirs<'a>(
    root: &Utf8Path,
    cached: impl Iterator<Item = &'a Vec<u8>>,
) -> Option<HashSet<Vec<u8>>> {
    let mut guard = WATCHES.lock().unwrap_or_else(PoisonError::into_inner);
    let map = guard.as_mut()?;
    let watch = match map.entry(root.to_owned()) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(e) => e.insert(Watch::new()?),
    };
    watch.drain();
    let dirty = std::mem::take(&mut watch.dirty);
    let quiet = if watch.lost {
        HashSet::new()
    } else {
        cached
            .filter(|d| watch.by_dir.contains_key(*d) && !dirty.contains(*d))
            .cloned()
            .collect()
    };
    watch.taken = dirty;
    Some(quiet)
}

/// How a capture ended.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ended {
    /// Its cache is recorded.
    Committed,
    /// It succeeded without recording (a dry run for `status` or `diff`).
    Unrecorded,
    /// It failed: trust nothing next time.
    Failed,
}

/// At the end of a capture of `root`. If it recorded its cache, watching follows the
/// cache's directories (new watches count as dirty once: what happened before they existed
/// was not seen); if not, what it took stays dirty.
pub(crate) fn after_capture<'a>(
    root: &Utf8Path,
    ended: Ended,
    dirs: impl Iterator<Item = &'a Vec<u8>>,
) {
    let mut guard = WATCHES.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(watch) = guard.as_mut().and_then(|m| m.get_mut(root)) else {
        return;
    };
    let taken = std::mem::take(&mut watch.taken);
    match ended {
        Ended::Committed => {}
        Ended::Unrecorded => {
            watch.dirty.extend(taken);
            return;
        }
        Ended::Failed => {
            watch.dirty.extend(taken);
            watch.lost = true;
            return;
        }
    }
    watch.lost = false;
    let wanted: HashSet<&Vec<u8>> = dirs.collect();
    // Stale watches go first: re-adding a moved directory may hand back its old id.
    let stale: Vec<(Vec<u8>, i32)> = watch
        .by_dir
        .iter()
        .filter(|(d, _)| !wanted.contains(d))
        .map(|(d, wd)| (d.clone(), *wd))
        .collect();
    for (dir, wd) in stale {
        let _ = inotify::remove_watch(&watch.fd, wd);
        watch.by_dir.remove(&dir);
        watch.by_wd.remove(&wd);
    }
    for dir in wanted {
        if watch.by_dir.contains_key(dir) {
            continue;
        }
        let path = crate::fsops::join(root.as_std_path(), dir);
        // Out of watches, or gone meanwhile: never trusted, always checked.
        if let Ok(wd) = inotify::add_watch(&watch.fd, &path, MASK) {
            if let Some(old) = watch.by_wd.insert(wd, dir.clone()) {
                watch.by_dir.remove(&old);
            }
            watch.by_dir.insert(dir.clone(), wd);
            watch.dirty.insert(dir.clone());
        }
    }
}

/// Stops watching `root` (it was removed from the registry).
pub(crate) fn forget(root: &Utf8Path) {
    let mut guard = WATCHES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(map) = guard.as_mut() {
        map.remove(root);
    }
}
