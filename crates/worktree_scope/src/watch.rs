//! Watching worktrees for changes (Linux inotify), so a long-lived process (`cairn serve`)
//! can skip the per-file `lstat` of directories where nothing happened since the last
//! capture. Off unless the worktrees were made with watching on.
//!
//! Each captured worktree gets an inotify instance with a watch on every directory in its
//! cache. A capture first drains the queue (every change made before it started is in the
//! queue by then); a directory with no event since the previous capture, and watched since
//! before that capture verified it, is *quiet*: its cached listing and file states are
//! trusted as they are. Everything else is checked as without a watcher. A queue overflow,
//! a failed capture or a directory that cannot be watched only costs speed: nothing is
//! trusted that was not watched.
//!
//! Writes through a shared memory mapping raise no event at all, and a mapping outlives
//! `close()`. So every file opened since watching began is *suspect* while it may still be
//! open (more opens than read-only closes seen) and for good once it was closed after
//! writing (or modified, or moved in from elsewhere): a quiet directory's listing is
//! trusted, but its suspect files are `lstat`'ed at every capture (a write through a map
//! moves the file's mtime), and if one of them no longer matches its cache entry the
//! whole directory is checked as without a watcher. A suspect ignore file, or a subtree
//! moved in from outside, is never quiet. Opens and closes never make a directory dirty
//! (a capture opens every directory it lists).
//!
//! Not covered: files opened before watching began (or before a queue overflow), two
//! opens of one file that reach the queue back to back (inotify merges them, so one
//! read-only close can look like the last: a writer's map is then trusted again until it
//! closes), and writes to a file through a hard link that lives outside the worktree.

use path_policy::RepoPathBuf;
use path_policy::raw_path::is_under;
use std::collections::{HashMap, HashSet};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use camino::{Utf8Path, Utf8PathBuf};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;

/// Paths here are raw bytes, not `RepoPath`s: besides the cache's directories (repo
/// paths) they hold what inotify names, any name a directory may hold.
struct Watch {
    fd: Arc<OwnedFd>,
    by_wd: HashMap<i32, Vec<u8>>,
    by_dir: HashMap<Vec<u8>, i32>,
    /// Directories with an event since the last capture took the set.
    dirty: HashSet<Vec<u8>>,
    /// Events were lost (or nothing was verified yet): trust nothing next time.
    lost: bool,
    /// The set the capture under way took; back to `dirty` if it does not commit.
    taken: HashSet<Vec<u8>>,
    /// Files opened since watching began that may still be open, or were written.
    opened: HashMap<Vec<u8>, Opened>,
    /// Directories moved in from outside the watch: everything below them is suspect.
    moved_in: HashSet<Vec<u8>>,
}

/// What the queue said of one file's opens.
#[derive(Debug, Default, Clone, Copy)]
struct Opened {
    opens: u32,
    closes: u32,
    /// Closed after writing, modified, or moved in: suspect for good.
    written: bool,
}

impl Opened {
    fn suspect(&self) -> bool {
        self.written || self.opens > self.closes
    }
}

fn is_ignore_file(name: &[u8]) -> bool {
    crate::dirstate::IGNORE_FILES
        .iter()
        .any(|f| f.as_bytes() == name)
}

fn child(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut path = dir.to_vec();
    if !dir.is_empty() {
        path.push(b'/');
    }
    path.extend_from_slice(name);
    path
}

/// The watches of one store's worktrees, kept short by a draining thread of their own.
pub struct Watcher {
    watches: Arc<Mutex<HashMap<Utf8PathBuf, Watch>>>,
    stop: Arc<AtomicBool>,
    drainer: Option<std::thread::JoinHandle<()>>,
}

impl Watcher {
    /// Starts watching: captures made from now on start a watch of their worktree.
    // Not `Default`: a watcher starts a thread.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Watcher {
        let watches = Arc::new(Mutex::new(HashMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        // A thread of its own keeps every queue short: a full walk alone opens each
        // directory it lists (four events apiece), which would overflow the kernel's queue
        // on a large tree if it waited for the next capture, and an overflow trusts
        // nothing, so the next capture would walk everything again.
        let drainer = {
            let (watches, stop) = (watches.clone(), stop.clone());
            std::thread::Builder::new()
                .name("cairn-watch".into())
                .spawn(move || drain_until(&watches, &stop))
        };
        let drainer = drainer
            .map_err(|e| {
                tracing::warn!("no thread to drain watch queues ({e}); captures drain them")
            })
            .ok();
        Watcher {
            watches,
            stop,
            drainer,
        }
    }

    fn watches(&self) -> std::sync::MutexGuard<'_, HashMap<Utf8PathBuf, Watch>> {
        self.watches.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(drainer) = self.drainer.take() {
            let _ = drainer.join();
        }
    }
}

/// Waits for events on any watch and moves them into its bookkeeping, until `stop`.
fn drain_until(watches: &Mutex<HashMap<Utf8PathBuf, Watch>>, stop: &AtomicBool) {
    let timeout = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 100_000_000,
    };
    while !stop.load(Ordering::Relaxed) {
        let fds: Vec<(Utf8PathBuf, Arc<OwnedFd>)> = {
            let guard = watches.lock().unwrap_or_else(PoisonError::into_inner);
            guard
                .iter()
                .map(|(root, w)| (root.clone(), w.fd.clone()))
                .collect()
        };
        if fds.is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(100));
            continue;
        }
        let mut polled: Vec<rustix::event::PollFd<'_>> = fds
            .iter()
            .map(|(_, fd)| rustix::event::PollFd::new(fd.as_ref(), rustix::event::PollFlags::IN))
            .collect();
        if rustix::event::poll(&mut polled, Some(&timeout)).is_err() {
            std::thread::sleep(std::time::Duration::from_millis(10));
            continue;
        }
        let ready: Vec<bool> = polled.iter().map(|p| !p.revents().is_empty()).collect();
        drop(polled);
        for ((root, fd), ready) in fds.iter().zip(ready) {
            if !ready {
                continue;
            }
            let mut guard = watches.lock().unwrap_or_else(PoisonError::into_inner);
            // Still the same watch (not forgotten and made again meanwhile).
            if let Some(watch) = guard.get_mut(root)
                && Arc::ptr_eq(&watch.fd, fd)
            {
                watch.drain();
            }
        }
    }
}

const MASK: WatchFlags = WatchFlags::OPEN
    .union(WatchFlags::CLOSE_NOWRITE)
    .union(WatchFlags::MODIFY)
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
            fd: Arc::new(fd),
            by_wd: HashMap::new(),
            by_dir: HashMap::new(),
            dirty: HashSet::new(),
            lost: true,
            taken: HashSet::new(),
            opened: HashMap::new(),
            moved_in: HashSet::new(),
        })
    }

    /// Keeps the open bookkeeping of one event on a child of `dir`; true if the event
    /// changed nothing in the directory (an open or a read-only close).
    fn note_open(&mut self, dir: &[u8], event: &Event, moves: &mut Moves) -> bool {
        let flags = event.flags;
        let Some(name) = event.name.as_deref() else {
            // On the directory itself: a listing opens it.
            return flags.intersects(ReadFlags::OPEN | ReadFlags::CLOSE_NOWRITE);
        };
        let path = child(dir, name);
        let is_dir = flags.contains(ReadFlags::ISDIR);
        if flags.intersects(ReadFlags::OPEN | ReadFlags::CLOSE_NOWRITE) {
            if !is_dir {
                let entry = self.opened.entry(path.clone()).or_default();
                if flags.contains(ReadFlags::OPEN) {
                    entry.opens = entry.opens.saturating_add(1);
                } else {
                    entry.closes = entry.closes.saturating_add(1);
                }
                if !entry.suspect() {
                    self.opened.remove(&path);
                }
            }
            return true;
        }
        if flags.intersects(ReadFlags::CLOSE_WRITE | ReadFlags::MODIFY) && !is_dir {
            let entry = self.opened.entry(path).or_default();
            entry.written = true;
            if flags.contains(ReadFlags::CLOSE_WRITE) {
                entry.closes = entry.closes.saturating_add(1);
            }
        } else if flags.contains(ReadFlags::MOVED_FROM) {
            moves.from.insert(event.cookie, (path, is_dir));
        } else if flags.contains(ReadFlags::MOVED_TO) {
            match moves.from.remove(&event.cookie) {
                Some((from, _)) => self.rename(&from, &path),
                // From outside the watch: nothing is known of what has it open.
                None if is_dir => {
                    self.moved_in.insert(path);
                }
                None => self.opened.entry(path).or_default().written = true,
            }
        } else if flags.contains(ReadFlags::DELETE) && !is_dir {
            self.opened.remove(&path);
        }
        false
    }

    /// Moves the bookkeeping of `from` (a file, or a directory and all below) to `to`.
    fn rename(&mut self, from: &[u8], to: &[u8]) {
        let moved: Vec<(Vec<u8>, Opened)> = self
            .opened
            .iter()
            .filter(|(p, _)| is_under(p, from))
            .map(|(p, o)| (p.clone(), *o))
            .collect();
        for (old, opened) in moved {
            self.opened.remove(&old);
            let mut new = to.to_vec();
            new.extend_from_slice(&old[from.len()..]);
            self.opened.insert(new, opened);
        }
        let subtrees: Vec<Vec<u8>> = self
            .moved_in
            .iter()
            .filter(|p| is_under(p, from))
            .cloned()
            .collect();
        for old in subtrees {
            self.moved_in.remove(&old);
            let mut new = to.to_vec();
            new.extend_from_slice(&old[from.len()..]);
            self.moved_in.insert(new);
        }
    }

    /// The suspect files of every directory holding one, by directory.
    fn suspects(&self) -> HashMap<&[u8], Vec<&[u8]>> {
        let mut by_dir: HashMap<&[u8], Vec<&[u8]>> = HashMap::new();
        for (path, _) in self.opened.iter().filter(|(_, o)| o.suspect()) {
            let (dir, name) = crate::paths::split_parent(path);
            by_dir.entry(dir).or_default().push(name);
        }
        by_dir
    }

    /// Reads every queued event, marking the directories they happened in.
    fn drain(&mut self) {
        let mut moves = Moves::default();
        for event in self.read_queue() {
            if event.flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                self.lost = true;
                continue;
            }
            let Some(dir) = self.by_wd.get(&event.wd).cloned() else {
                continue;
            };
            if self.note_open(&dir, &event, &mut moves) {
                continue;
            }
            if event
                .flags
                .intersects(ReadFlags::IGNORED | ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF)
            {
                // Gone or moved: its path no longer names it. Forget the watch; the
                // directory above changed too and is listed again.
                if event.flags.contains(ReadFlags::MOVE_SELF) {
                    let _ = inotify::remove_watch(self.fd.as_ref(), event.wd);
                }
                self.by_wd.remove(&event.wd);
                self.by_dir.remove(&dir);
                let parent = crate::paths::split_parent(&dir).0.to_vec();
                self.dirty.insert(parent);
            }
            self.dirty.insert(dir);
        }
        // Moved out of the watch: no longer in the tree.
        for (path, _) in moves.from.into_values() {
            self.opened.retain(|p, _| !is_under(p, &path));
        }
    }

    /// Every queued event; an unreadable queue counts as lost events.
    fn read_queue(&mut self) -> Vec<Event> {
        let mut events = Vec::new();
        let mut buf = [MaybeUninit::<u8>::uninit(); 64 << 10];
        let mut reader = inotify::Reader::new(self.fd.as_ref(), &mut buf);
        loop {
            match reader.next() {
                Ok(e) => events.push(Event {
                    wd: e.wd(),
                    flags: e.events(),
                    cookie: e.cookie(),
                    name: e.file_name().map(|n| n.to_bytes().to_vec()),
                }),
                Err(Errno::AGAIN) => break,
                Err(Errno::INTR) => continue,
                Err(_) => {
                    self.lost = true;
                    break;
                }
            }
        }
        events
    }
}

/// One inotify event, read off the queue.
struct Event {
    wd: i32,
    flags: ReadFlags,
    cookie: u32,
    name: Option<Vec<u8>>,
}

/// Halves of renames seen in one drain, by cookie.
#[derive(Default)]
struct Moves {
    from: HashMap<u32, (Vec<u8>, bool)>,
}

/// The directories a watcher saw nothing happen in since the cache was verified: their
/// listings stand, and only their suspect files need an `lstat`. Raw bytes, as the watch's.
#[derive(Debug, Default)]
pub struct Quiet {
    dirs: HashMap<Vec<u8>, Vec<Vec<u8>>>,
}

impl Quiet {
    /// True if `dir`'s listing is trusted.
    pub(crate) fn contains(&self, dir: &[u8]) -> bool {
        self.dirs.contains_key(dir)
    }

    /// The files of quiet `dir` that may have changed without an event.
    pub(crate) fn suspects(&self, dir: &[u8]) -> &[Vec<u8>] {
        self.dirs.get(dir).map_or(&[], Vec::as_slice)
    }

    /// Quiet directories holding suspect files, with them.
    pub(crate) fn with_suspects(&self) -> impl Iterator<Item = (&[u8], &[Vec<u8>])> {
        self.dirs
            .iter()
            .filter(|(_, names)| !names.is_empty())
            .map(|(dir, names)| (dir.as_slice(), names.as_slice()))
    }

    /// How many directories are quiet.
    pub fn len(&self) -> usize {
        self.dirs.len()
    }

    /// True if no directory is quiet.
    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }

    /// Every one of `dirs` quiet, with the `suspects` given as (directory, name).
    #[cfg(any(test, feature = "testing"))]
    pub fn all<'a>(
        dirs: impl Iterator<Item = &'a RepoPathBuf>,
        suspects: &[(&[u8], &[u8])],
    ) -> Quiet {
        let mut quiet = Quiet {
            dirs: dirs.map(|d| (d.as_bytes().to_vec(), Vec::new())).collect(),
        };
        for (dir, name) in suspects {
            if let Some(names) = quiet.dirs.get_mut(*dir) {
                names.push(name.to_vec());
            }
        }
        quiet
    }
}

/// How a capture ended.
#[derive(Debug, Clone, Copy)]
pub enum Ended {
    /// Its cache is recorded.
    Committed,
    /// It succeeded without recording (a dry run for `status` or `diff`).
    Unrecorded,
    /// It failed: trust nothing next time.
    Failed,
}

impl Watcher {
    /// At the start of a capture of `root` (under its worktree lock): the cached directories
    /// that are quiet, or `None` when `root` cannot be watched.
    pub fn quiet_dirs<'a>(
        &self,
        root: &Utf8Path,
        cached: impl Iterator<Item = &'a RepoPathBuf>,
    ) -> Option<Quiet> {
        let mut map = self.watches();
        let watch = match map.entry(root.to_owned()) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(Watch::new()?),
        };
        watch.drain();
        let dirty = std::mem::take(&mut watch.dirty);
        let mut quiet = Quiet::default();
        if !watch.lost {
            let suspects = watch.suspects();
            for dir in cached.map(|d| d.as_bytes()) {
                let names = suspects.get(dir).map_or(&[][..], Vec::as_slice);
                let trusted = watch.by_dir.contains_key(dir)
                    && !dirty.contains(dir)
                    && !watch.moved_in.iter().any(|top| is_under(dir, top))
                    && !names.iter().any(|n| is_ignore_file(n));
                if trusted {
                    let names = names.iter().map(|n| n.to_vec()).collect();
                    quiet.dirs.insert(dir.to_vec(), names);
                }
            }
        }
        watch.taken = dirty;
        Some(quiet)
    }

    /// At the end of a capture of `root`. If it recorded its cache, watching follows the
    /// cache's directories (new watches count as dirty once: what happened before they existed
    /// was not seen); if not, what it took stays dirty.
    pub fn after_capture<'a>(
        &self,
        root: &Utf8Path,
        ended: Ended,
        dirs: impl Iterator<Item = &'a RepoPathBuf>,
    ) {
        let mut map = self.watches();
        let Some(watch) = map.get_mut(root) else {
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
        let wanted: HashSet<&[u8]> = dirs.map(|d| d.as_bytes()).collect();
        // Stale watches go first: re-adding a moved directory may hand back its old id.
        let stale: Vec<(Vec<u8>, i32)> = watch
            .by_dir
            .iter()
            .filter(|(d, _)| !wanted.contains(d.as_slice()))
            .map(|(d, wd)| (d.clone(), *wd))
            .collect();
        for (dir, wd) in stale {
            let _ = inotify::remove_watch(watch.fd.as_ref(), wd);
            watch.by_dir.remove(&dir);
            watch.by_wd.remove(&wd);
        }
        for dir in wanted {
            if watch.by_dir.contains_key(dir) {
                continue;
            }
            let path = crate::paths::join(root.as_std_path(), dir);
            // Out of watches, or gone meanwhile: never trusted, always checked.
            if let Ok(wd) = inotify::add_watch(watch.fd.as_ref(), &path, MASK) {
                if let Some(old) = watch.by_wd.insert(wd, dir.to_vec()) {
                    watch.by_dir.remove(&old);
                }
                watch.by_dir.insert(dir.to_vec(), wd);
                watch.dirty.insert(dir.to_vec());
            }
        }
    }

    /// Stops watching `root` (it was removed from the registry).
    pub fn forget(&self, root: &Utf8Path) {
        self.watches().remove(root);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Listing more directories than the kernel's queue holds events for (four apiece,
    /// 16,384 by default) must not cost the next capture its trust: the queue is drained
    /// as it fills. Opening files and reading them leaves nothing suspect either.
    #[test]
    fn a_walk_over_many_directories_keeps_the_watch_trusted() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = Utf8PathBuf::from_path_buf(tmp.path().to_path_buf()).expect("utf-8");
        let dirs: Vec<RepoPathBuf> = (0..4600)
            .map(|i| RepoPathBuf::new(format!("d{i}")).expect("a repo path"))
            .collect();
        for d in &dirs {
            let dir = root.join(d.to_string());
            std::fs::create_dir(&dir).expect("mkdir");
            std::fs::write(dir.join("f"), "x").expect("write");
        }
        let mut all = dirs.clone();
        all.push(RepoPathBuf::root());
        let watcher = Watcher::new();
        // First capture: watches go on, every directory is dirty once.
        assert!(
            watcher
                .quiet_dirs(&root, all.iter())
                .is_some_and(|q| q.is_empty())
        );
        watcher.after_capture(&root, Ended::Committed, all.iter());
        assert!(watcher.quiet_dirs(&root, all.iter()).is_some());
        watcher.after_capture(&root, Ended::Committed, all.iter());
        // A walk as a capture makes it: every directory listed, every file read.
        for (i, d) in dirs.iter().enumerate() {
            let dir = root.join(d.to_string());
            let names = std::fs::read_dir(&dir).expect("list").count();
            assert_eq!(names, 1);
            assert_eq!(std::fs::read(dir.join("f")).expect("read"), b"x");
            if i % 256 == 0 {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
        let quiet = watcher.quiet_dirs(&root, all.iter()).expect("watching");
        assert_eq!(
            quiet.len(),
            all.len(),
            "the walk's own events made {} directories untrusted",
            all.len() - quiet.len()
        );
        watcher.after_capture(&root, Ended::Committed, all.iter());
        watcher.forget(&root);
    }

    /// A file written since watching began stays suspect, but its directory's listing is
    /// trusted once a capture verified it: only the suspect needs an `lstat`. A written
    /// ignore file keeps its directory unquiet (it decides what the listing holds).
    #[test]
    fn a_written_file_leaves_its_directory_quiet_with_it_suspect() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = Utf8PathBuf::from_path_buf(tmp.path().to_path_buf()).expect("utf-8");
        for d in ["a", "b"] {
            std::fs::create_dir(root.join(d)).expect("mkdir");
            std::fs::write(root.join(d).join("f"), "x").expect("write");
        }
        let all: Vec<RepoPathBuf> = ["", "a", "b"]
            .map(|d| RepoPathBuf::new(d).expect("a repo path"))
            .to_vec();
        let watcher = Watcher::new();
        let capture = |expect_quiet: usize| {
            let quiet = watcher.quiet_dirs(&root, all.iter()).expect("watching");
            watcher.after_capture(&root, Ended::Committed, all.iter());
            assert_eq!(quiet.len(), expect_quiet, "{quiet:?}");
            quiet
        };
        // Watches go on at the first capture and count as dirty at the second.
        capture(0);
        capture(0);
        capture(3);
        std::fs::write(root.join("a/f"), "written").expect("write");
        std::fs::write(root.join("b/.gitignore"), "*.log\n").expect("write");
        let seen = capture(1);
        assert!(!seen.contains(b"a") && !seen.contains(b"b"), "{seen:?}");
        let after = capture(2);
        assert!(after.contains(b"a"), "{after:?}");
        assert_eq!(after.suspects(b"a"), [b"f".to_vec()]);
        assert!(!after.contains(b"b"), "a written ignore file: {after:?}");
        assert!(after.suspects(b"").is_empty());
        watcher.forget(&root);
    }
}
