//! `checkout`: hydrate a snapshot into a new or empty directory, in parallel.

use crate::kept::Kept;
use camino::{Utf8Path, Utf8PathBuf};
use cas::{EntryKind, Reader, SnapshotId, Store, Tree, TreeEntry, TreeId, WriteBatch};
use path_policy::{RepoPath, RepoPathBuf};
use rayon::prelude::*;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use worktree_registry::{OpRecord, WorktreeKind, WorktreeRecord};
use worktree_registry::{RegistryRead, RegistryWrite};

use crate::error::CheckoutError;
use crate::fsops::{self, WriteFailure};
use crate::journal::Step;
use crate::layer_copies::{self, CloneSource};
use crate::pending::Pending;
use cas::{Progress, Silent};
use worktree_scope::build::{TreeDirs, child};
use worktree_scope::dirstate::{self, Child, DirState, Name};
use worktree_scope::file_state::{FileState, RACY_MARGIN, now_ns};

/// Options of [`checkout`].
#[derive(Clone, Copy)]
pub struct WorktreeCheckoutOptions<'a> {
    /// Where progress goes.
    pub progress: &'a dyn Progress,
}

impl Default for WorktreeCheckoutOptions<'_> {
    fn default() -> Self {
        WorktreeCheckoutOptions { progress: &Silent }
    }
}

/// What [`checkout`] did.
#[derive(Debug, Clone)]
pub struct WorktreeCheckoutOutcome {
    /// The new worktree's root (canonical).
    pub worktree: Utf8PathBuf,
    /// The snapshot checked out.
    pub snapshot: SnapshotId,
    /// Files and symlinks written.
    pub files: u64,
    /// Bytes written.
    pub bytes: u64,
}

fn failure(e: WriteFailure) -> CheckoutError {
    match e {
        WriteFailure::Io(path, source) => CheckoutError::Io { path, source },
        WriteFailure::Store(e) => CheckoutError::Store(e.into()),
        WriteFailure::Record(e) => CheckoutError::Store(e),
        WriteFailure::Registry(e) => CheckoutError::Registry(e),
        WriteFailure::Blocked(path, reason) => CheckoutError::Io {
            path,
            source: std::io::Error::other(reason),
        },
    }
}

/// Hydrates `snapshot` into `dest`, which must be missing, an empty directory, or the
/// missing or empty folder of a registered worktree; registers it as an isolated worktree
/// with a filled stat cache, so its next snapshot reads no file. A refused destination is
/// left untouched; if writing fails half way, what was written is removed again.
pub fn checkout(
    ws: &Kept,
    store: &Store,
    snapshot: SnapshotId,
    dest: &Utf8Path,
    options: &WorktreeCheckoutOptions<'_>,
) -> Result<WorktreeCheckoutOutcome, CheckoutError> {
    let reader = store.reader()?;
    let snap = reader.snapshot(snapshot)?;
    let counted = checked(&reader, snap.tree, dest)?;
    // One checkout into a folder at a time: the emptiness check below must still hold when
    // writing starts.
    let _dest_busy = ws.locks.lock(dest);
    let previous = reader.worktree(dest)?;
    for path in [
        Some(dest.to_owned()),
        std::fs::canonicalize(dest)
            .ok()
            .and_then(|p| Utf8PathBuf::from_path_buf(p).ok()),
    ]
    .into_iter()
    .flatten()
    {
        match crate::journal::ensure_clear(&reader, &path) {
            Ok(()) => {}
            Err(crate::journal::JournalCheck::Interrupted(i)) => return Err(i.into()),
            Err(crate::journal::JournalCheck::Store(e)) => return Err(e.into()),
            Err(crate::journal::JournalCheck::Registry(e)) => return Err(e.into()),
        }
    }

    // Before anything is made: no folder inside the store, not even on the way to a refusal.
    worktree_registry::apart::check(store, dest)?;
    let created = match dest.symlink_metadata() {
        Ok(m) if !m.is_dir() => {
            return Err(CheckoutError::NotADirectory {
                path: dest.to_owned(),
            });
        }
        Ok(_) => {
            let mut entries = std::fs::read_dir(dest).map_err(|source| CheckoutError::Io {
                path: dest.into(),
                source,
            })?;
            if entries.next().is_some() {
                return Err(CheckoutError::NotEmpty {
                    path: dest.to_owned(),
                });
            }
            false
        }
        Err(_) => {
            // A file above it is bad input, not an I/O failure: say which.
            if let Some(file) = dest
                .ancestors()
                .skip(1)
                .find(|a| std::fs::metadata(a).is_ok_and(|m| !m.is_dir()))
            {
                return Err(CheckoutError::UnderAFile {
                    path: dest.to_owned(),
                    file: file.to_owned(),
                });
            }
            std::fs::create_dir_all(dest).map_err(|source| CheckoutError::Io {
                path: dest.into(),
                source,
            })?;
            true
        }
    };
    let root = std::fs::canonicalize(dest)
        .ok()
        .and_then(|p| Utf8PathBuf::from_path_buf(p).ok())
        .ok_or_else(|| CheckoutError::NotADirectory {
            path: dest.to_owned(),
        })?;
    let _busy = (root != dest).then(|| ws.locks.lock(&root));
    // Again on the directory made: a folder above it may have been swapped for a link since.
    if let Err(e) = worktree_registry::apart::check(store, &root) {
        if created {
            let _ = std::fs::remove_dir(&root);
        }
        return Err(e.into());
    }

    let time = jiff::Timestamp::now();
    let record = WorktreeRecord {
        head: Some(snapshot),
        include_denied: previous.as_ref().is_some_and(|p| p.include_denied),
        max_file_size: previous.as_ref().and_then(|p| p.max_file_size),
        created: time,
        identity: crate::root::identity_of(&root),
        ..WorktreeRecord::new(root.clone(), WorktreeKind::Isolated)
    };
    let entry = OpRecord::new("checkout", previous.and_then(|p| p.head), Some(snapshot));
    // A crash from here on leaves the journal: `recover` finishes the hydration.
    let journal = crate::journal::Journal {
        op: "checkout".into(),
        pid: std::process::id(),
        staging: None,
        target: snap.tree,
        paths: None,
        record: record.clone(),
        entry: Some(entry.clone()),
        started: time,
    };
    let step = match Step::begin(store, &root, &journal, Pending::default()) {
        Ok(step) => step,
        Err(e) => {
            clean_up(&root, created);
            return Err(failure(e));
        }
    };
    let forget = |e: CheckoutError| {
        clean_up(&root, created);
        step.abandon();
        e
    };

    let records =
        hydrate(&reader, &root, snap.tree, &counted, options.progress, None).map_err(forget)?;
    let mut batch = WriteBatch::new();
    batch.clear_file_states(&root);
    for (dir, state) in records {
        batch.set_file_state(&root, &dirstate::dir_key(dir.as_bytes()), Some(state));
    }
    batch.put_worktree(&record).map_err(|e| forget(e.into()))?;
    batch
        .append_op(&root, &entry)
        .map_err(|e| forget(e.into()))?;
    drop(reader);
    step.finish(batch).map_err(|e| forget(e.into()))?;
    Ok(WorktreeCheckoutOutcome {
        worktree: root,
        snapshot,
        files: counted.files,
        bytes: counted.bytes,
    })
}

/// Writes the files of `tree` into `dest`, an empty directory the caller made and owns,
/// as [`checkout`] writes them, but registers nothing and keeps no stat cache: a throwaway
/// copy (`verify`'s view). Paths a checkout refuses are refused here too, before anything is
/// written. Returns the files and bytes written; on failure what was written stays, for the
/// caller to remove with its directory.
pub fn write_tree(
    reader: &Reader,
    tree: TreeId,
    dest: &Utf8Path,
    progress: &dyn Progress,
) -> Result<(u64, u64), CheckoutError> {
    let counted = checked(reader, tree, dest)?;
    hydrate(reader, dest, tree, &counted, progress, None)?;
    Ok((counted.files, counted.bytes))
}

/// The files of `tree` counted, or the first path that may not be written beneath `dest`
/// refused. Names were checked when the trees were decoded; whole paths are checked here,
/// before anything is written. This walk keeps only counts: the trees are read again to
/// write.
fn checked(reader: &Reader, tree: TreeId, dest: &Utf8Path) -> Result<Survey, CheckoutError> {
    let counted = survey(reader, tree, |path| {
        path_policy::check_path(path.as_bytes())
            .err()
            .map(|e| e.reason())
    })?;
    if let Some((path, reason)) = counted.refused {
        return Err(CheckoutError::Refused {
            path: path.to_fs_path(dest.as_std_path()),
            reason,
        });
    }
    Ok(counted)
}

/// What a walk of a snapshot's trees found, before anything is written.
struct Survey {
    files: u64,
    bytes: u64,
    /// The first path refused, in tree order, and why.
    refused: Option<(RepoPathBuf, &'static str)>,
}

/// Counts the files of `tree` and finds the first path `refuse` gives a reason for, holding
/// one directory's tree at a time.
fn survey(
    reader: &Reader,
    tree: TreeId,
    refuse: impl Fn(&RepoPath) -> Option<&'static str>,
) -> Result<Survey, cas::ReadError> {
    let mut found = Survey {
        files: 0,
        bytes: 0,
        refused: None,
    };
    for dir in TreeDirs::new(reader, tree) {
        let (dir, tree) = dir?;
        for e in tree.entries().iter().filter(|e| e.tree().is_none()) {
            let path = child(&dir, &e.name);
            found.files += 1;
            found.bytes = found.bytes.saturating_add(e.size);
            // Directories come parents first, not in tree order: keep the least.
            if let Some(reason) = refuse(&path)
                && found
                    .refused
                    .as_ref()
                    .is_none_or(|(least, _)| path < *least)
            {
                found.refused = Some((path, reason));
            }
        }
    }
    Ok(found)
}

/// Regular files written per round: directories are taken whole until a round holds this
/// many, so that many small directories are written in parallel too, and what is held is
/// a round's files, not the tree's.
const ROUND_FILES: usize = 4096;

/// Writes the files of `tree` under `root`, directory by directory, regular files in
/// parallel and symlinks last, cloning those `source` can; returns each written
/// directory's stat-cache record.
fn hydrate(
    reader: &Reader,
    root: &Utf8Path,
    tree: TreeId,
    counted: &Survey,
    progress: &dyn Progress,
    source: Option<&CloneSource>,
) -> Result<BTreeMap<RepoPathBuf, Vec<u8>>, CheckoutError> {
    let root = path_policy::Root::open(root.as_std_path()).map_err(|e| failure(e.into()))?;
    let root = &root;
    progress.start("checkout", counted.files, counted.bytes);
    let mut records = CacheRecords::default();
    let mut links: Vec<(RepoPathBuf, TreeEntry)> = Vec::new();
    let mut dirs = TreeDirs::new(reader, tree);
    loop {
        let mut round: Vec<(RepoPathBuf, Vec<TreeEntry>, Tree)> = Vec::new();
        let mut files = 0;
        while files < ROUND_FILES
            && let Some(dir) = dirs.next()
        {
            let (dir, tree) = dir?;
            let (symlinks, regular): (Vec<TreeEntry>, Vec<TreeEntry>) = tree
                .entries()
                .iter()
                .filter(|e| e.tree().is_none())
                .cloned()
                .partition(|e| e.kind == EntryKind::Symlink);
            if regular.is_empty() && symlinks.is_empty() {
                continue;
            }
            // Parents before children: directories come in that order.
            fsops::ensure_dir(root, dir.as_bytes()).map_err(failure)?;
            links.extend(symlinks.into_iter().map(|e| (child(&dir, &e.name), e)));
            if !regular.is_empty() {
                files += regular.len();
                round.push((dir, regular, tree));
            }
        }
        if round.is_empty() {
            break;
        }
        let written = round
            .par_iter()
            .map(|(dir, files, _)| {
                let handle = root
                    .open_dir(dir.as_bytes())
                    .map_err(|e| failure(e.into()))?;
                let from = source.map(|s| (s, s.dir(dir)));
                files
                    .par_iter()
                    .map(|e| {
                        let path = child(dir, &e.name);
                        let fill = |fd: &OwnedFd| {
                            from.as_ref()
                                .is_some_and(|(s, d)| s.fill(d.as_ref(), &path, e, fd))
                        };
                        write_file(root, &handle, &path, e, reader, progress, &fill)
                    })
                    .collect::<Result<Vec<_>, CheckoutError>>()
            })
            .collect::<Result<Vec<_>, CheckoutError>>()?;
        for ((dir, _, tree), children) in round.into_iter().zip(written) {
            records.add(dir, children, tree);
        }
        records.settle(now_ns());
    }
    for group in links.chunk_by(|(a, _), (b, _)| a.split_parent().0 == b.split_parent().0) {
        let dir = group[0].0.split_parent().0;
        let handle = root
            .open_dir(dir.as_bytes())
            .map_err(|e| failure(e.into()))?;
        let children = group
            .iter()
            .map(|(path, e)| write_file(root, &handle, path, e, reader, progress, &|_| false))
            .collect::<Result<Vec<_>, CheckoutError>>()?;
        records.add_links(dir, children);
    }
    progress.finish();
    // Nothing else writes into a worktree while it is checked out, so every entry is as good
    // as verified now; files written within the racy margin of now are read once more.
    Ok(records.finish(now_ns()))
}

/// Writes one file or symlink through its directory's handle, a regular file's content
/// by `fill` if it can (see [`fsops::create`]): its stat-cache entry, not yet
/// verified.
fn write_file(
    root: &path_policy::Root,
    dir: &OwnedFd,
    path: &RepoPathBuf,
    entry: &TreeEntry,
    reader: &Reader,
    progress: &dyn Progress,
    fill: &dyn Fn(&OwnedFd) -> bool,
) -> Result<(Vec<u8>, FileState), CheckoutError> {
    let blob = entry.id.as_blob();
    let st = fsops::create(root, dir, path.as_bytes(), entry.kind, blob, reader, fill)
        .map_err(failure)?;
    progress.advance(1, entry.size);
    Ok((entry.name.clone(), FileState::from_stat(&st, blob, 0)))
}

/// A written directory's stat-cache entry (as `dirstate::record_written` makes it: its
/// files, no stamp), waiting to be verified.
struct Unsettled {
    dir: RepoPathBuf,
    state: DirState,
    /// The directory's tree: its record takes the files' blob ids from there.
    tree: Tree,
    /// The latest mtime or ctime of its files.
    changed_ns: i64,
}

/// The stat-cache records of written directories. A directory is verified and encoded as
/// soon as none of its files is racy at the time it is verified at, and then held encoded
/// only: what is held in full is the files written within the racy margin, not the tree.
#[derive(Default)]
struct CacheRecords {
    unsettled: VecDeque<Unsettled>,
    /// Entries taken back for their symlinks, which are written last.
    reopened: HashMap<RepoPathBuf, DirState>,
    /// Records by directory (each written on its own: the order is no matter).
    encoded: BTreeMap<RepoPathBuf, Vec<u8>>,
}

impl CacheRecords {
    /// Adds the entry of a directory whose regular files (sorted by name) are written
    /// from `tree`.
    fn add(&mut self, dir: RepoPathBuf, files: Vec<(Vec<u8>, FileState)>, tree: Tree) {
        let changed_ns = files
            .iter()
            .map(|(_, f)| f.mtime_ns.max(f.ctime_ns))
            .max()
            .unwrap_or(i64::MIN);
        let mut state = DirState::unverified_with(
            files
                .into_iter()
                .map(|(name, f)| (Name::from_vec(name), Child::File(f)))
                .collect(),
        );
        state.tree = Some((tree.id(), tree.size()));
        self.unsettled.push_back(Unsettled {
            dir,
            state,
            tree,
            changed_ns,
        });
    }

    /// Verifies at `now` and encodes the entries none of whose files is racy then.
    fn settle(&mut self, now: i64) {
        let margin = i64::try_from(RACY_MARGIN.as_nanos()).unwrap_or(i64::MAX);
        while let Some(next) = self.unsettled.front()
            && next.changed_ns < now.saturating_sub(margin)
            && let Some(entry) = self.unsettled.pop_front()
        {
            self.encoded
                .insert(entry.dir, verified(entry.state, now, Some(&entry.tree)));
        }
    }

    /// Adds the symlinks of `dir` to its entry, taking it back if it is encoded already.
    fn add_links(&mut self, dir: &RepoPath, links: Vec<(Vec<u8>, FileState)>) {
        self.reopened
            .extend(self.unsettled.drain(..).map(|u| (u.dir, u.state)));
        let encoded = &mut self.encoded;
        let state = self
            .reopened
            .entry(dir.to_owned())
            .or_insert_with_key(|dir| {
                // A record that does not decode costs the next capture a read of its files,
                // never correctness.
                encoded
                    .remove(dir)
                    .and_then(|record| DirState::decode(&record))
                    .unwrap_or_else(DirState::unverified)
            });
        for (name, link) in links {
            let children = state.children_mut();
            match children.binary_search_by(|(n, _)| n.as_slice().cmp(&name)) {
                Ok(i) => children[i].1 = Child::File(link),
                Err(i) => children.insert(i, (Name::from_vec(name), Child::File(link))),
            }
        }
    }

    /// Every record, the entries still held verified at `now`.
    fn finish(mut self, now: i64) -> BTreeMap<RepoPathBuf, Vec<u8>> {
        for u in self.unsettled.drain(..) {
            self.encoded
                .insert(u.dir, verified(u.state, now, Some(&u.tree)));
        }
        for (dir, state) in self.reopened {
            self.encoded.insert(dir, verified(state, now, None));
        }
        self.encoded
    }
}

/// `state`'s record, its files verified at `now`, against its directory's `tree` if given.
/// (Its tree is named, but its stamp is not: the next capture lists the directory again,
/// taking the files' blob ids from the tree.)
fn verified(mut state: DirState, now: i64, tree: Option<&Tree>) -> Vec<u8> {
    for (_, child) in state.children_mut() {
        if let Child::File(f) = child {
            f.verified_ns = now;
        }
    }
    // A state read back from its record still names its tree: never `None`.
    state.encode_against(tree).unwrap_or_default()
}

/// Empties the root of a failed checkout through its handle (nothing beneath a symlink
/// is touched), and removes it if checkout made it.
fn clean_up(root: &Utf8Path, created: bool) {
    let Ok(handle) = path_policy::Root::open(root.as_std_path()) else {
        return;
    };
    for name in handle.names().unwrap_or_default() {
        let _ = handle.remove_all(name.as_bytes());
    }
    if created {
        let _ = std::fs::remove_dir(root);
    }
}

/// A dependency layer to write into a checkout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerToWrite {
    /// As the worktree's record names it (its tree written for the worktree's root).
    pub attached: worktree_registry::AttachedLayer,
    /// The layer's tree as stored, the same for every worktree: what the store's unpacked
    /// copy holds.
    pub stored: TreeId,
}

/// What writing one layer did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LayerWritten {
    /// Files and symlinks written.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Files written as clones of the store's unpacked copy (see [`layer_copies`]).
    pub cloned: u64,
}

/// Attaches dependency `layers` to the isolated worktree at `root` (just checked out): each
/// layer's tree is written into its folder, which must not exist yet, as checkout writes
/// files (in parallel, never through a symlink, never hard links, so a write in one
/// worktree's layer never reaches another's): where the file system can, as clones of the
/// store's unpacked copy of the layer ([`layer_copies`]), else copied. Each layer is
/// written into a staging folder beside its own (`.NAME.cairn-attach`) and renamed into
/// place once whole, so a crash never leaves a half layer where the installer's folder
/// goes; the record names the layers and their staging folders before a file is written,
/// so both are out of scope from the first file on, and names the staging folders no more
/// once renamed. If writing fails, the staging folders are removed and the record names
/// none of these layers. Returns what was written of each layer.
pub fn attach(
    ws: &Kept,
    store: &Store,
    root: &Utf8Path,
    layers: &[LayerToWrite],
    progress: &dyn Progress,
) -> Result<Vec<LayerWritten>, CheckoutError> {
    if layers.is_empty() {
        return Ok(Vec::new());
    }
    let _busy = ws.locks.lock(root);
    let reader = store.reader()?;
    let mut record = reader
        .worktree(root)?
        .ok_or_else(|| CheckoutError::NotAWorktree {
            path: root.to_owned(),
        })?;
    let places = (layers.iter())
        .map(|l| place(&reader, root, &l.attached))
        .collect::<Result<Vec<_>, _>>()?;
    let staging: Vec<_> = (places.iter().zip(layers))
        .map(|(p, l)| worktree_registry::AttachedLayer {
            path: p.stage.clone(),
            ..l.attached.clone()
        })
        .collect();
    let attached: Vec<_> = layers.iter().map(|l| l.attached.clone()).collect();
    record.deps.extend(attached.iter().cloned());
    record.deps.extend(staging.iter().cloned());
    let mut batch = WriteBatch::new();
    batch.put_worktree(&record)?;
    store.write(&batch)?;
    let out = match write_placed(&reader, store, root, &places, layers, progress) {
        Ok(out) => out,
        Err(e) => {
            // Nor named by the record.
            record
                .deps
                .retain(|d| !attached.contains(d) && !staging.contains(d));
            let mut batch = WriteBatch::new();
            batch.put_worktree(&record)?;
            store.write(&batch)?;
            return Err(e);
        }
    };
    record.deps.retain(|d| !staging.contains(d));
    let mut batch = WriteBatch::new();
    batch.put_worktree(&record)?;
    store.write(&batch)?;
    Ok(out)
}

/// Writes dependency `layers` into `root`, a folder no worktree record names (`verify`'s
/// throwaway view), as [`attach`] writes them into a worktree, but registers nothing.
pub fn write_layers(
    store: &Store,
    root: &Utf8Path,
    layers: &[LayerToWrite],
    progress: &dyn Progress,
) -> Result<Vec<LayerWritten>, CheckoutError> {
    let reader = store.reader()?;
    let places = (layers.iter())
        .map(|l| place(&reader, root, &l.attached))
        .collect::<Result<Vec<_>, _>>()?;
    write_placed(&reader, store, root, &places, layers, progress)
}

/// Where one layer goes beneath a root: its folder and its staging folder beside it
/// (`.NAME.cairn-attach`), both checked absent, and its files counted.
struct Place {
    rel: RepoPathBuf,
    stage: Utf8PathBuf,
    stage_rel: RepoPathBuf,
    stage_dest: Utf8PathBuf,
    counted: Survey,
}

fn place(
    reader: &Reader,
    root: &Utf8Path,
    layer: &worktree_registry::AttachedLayer,
) -> Result<Place, CheckoutError> {
    let refused = |reason: &'static str| CheckoutError::Refused {
        path: root.join(&layer.path).into(),
        reason,
    };
    let rel = RepoPathBuf::new(layer.path.as_str().as_bytes().to_vec())
        .map_err(|e| refused(e.reason.reason()))?;
    let name = layer
        .path
        .file_name()
        .ok_or_else(|| refused("not a folder's name"))?;
    let stage = layer.path.with_file_name(format!(".{name}.cairn-attach"));
    let stage_rel = RepoPathBuf::new(stage.as_str().as_bytes().to_vec())
        .map_err(|e| refused(e.reason.reason()))?;
    let stage_dest = root.join(&stage);
    for taken in [&root.join(&layer.path), &stage_dest] {
        if taken.symlink_metadata().is_ok() {
            return Err(CheckoutError::NotEmpty {
                path: taken.clone(),
            });
        }
    }
    let counted = checked(reader, layer.tree, &stage_dest)?;
    Ok(Place {
        rel,
        stage,
        stage_rel,
        stage_dest,
        counted,
    })
}

/// Writes each of `layers` into its staging folder (`places`, in order) and renames it into
/// place once whole; a copy of the store's found changed is dropped. If one fails, the
/// staging folders and folders of all of them are removed.
fn write_placed(
    reader: &Reader,
    store: &Store,
    root: &Utf8Path,
    places: &[Place],
    layers: &[LayerToWrite],
    progress: &dyn Progress,
) -> Result<Vec<LayerWritten>, CheckoutError> {
    if layers.is_empty() {
        return Ok(Vec::new());
    }
    let handle = path_policy::Root::open(root.as_std_path()).map_err(|e| failure(e.into()))?;
    let mut out = Vec::new();
    for (place, layer) in places.iter().zip(layers) {
        // Made through the root's handle: a folder on the way is never a symlink followed.
        let written = fsops::ensure_dir(&handle, place.stage_rel.as_bytes())
            .map_err(failure)
            .map(|()| clone_source(reader, store, &handle, &place.stage_rel, layer))
            .and_then(|source| {
                let source = source.as_ref();
                hydrate(
                    reader,
                    &place.stage_dest,
                    layer.attached.tree,
                    &place.counted,
                    progress,
                    source,
                )?;
                into_place(&handle, &place.stage_rel, &place.rel)?;
                Ok(source.map(|s| (s.cloned(), s.damaged())))
            });
        let cloned = match written {
            Ok(cloned) => cloned,
            Err(e) => {
                // None of these layers stays half written.
                for p in places {
                    let _ = handle.remove_all(p.stage_rel.as_bytes());
                    let _ = handle.remove_all(p.rel.as_bytes());
                }
                return Err(e);
            }
        };
        if let Some((_, true)) = cloned {
            // Found changed: the next attach unpacks the layer again.
            if let Err(e) = layer_copies::remove(store.root(), &layer.attached.key) {
                tracing::warn!("dependency layer {}: {e}", layer.attached.key);
            }
        }
        out.push(LayerWritten {
            files: place.counted.files,
            bytes: place.counted.bytes,
            cloned: cloned.map_or(0, |(n, _)| n),
        });
    }
    Ok(out)
}

/// Where `layer`'s files can be cloned from into its staging folder `stage_rel`: the
/// store's unpacked copy of it (unpacked now if need be) when that folder can hold clones
/// of the store's files; `None` (so every file is copied) when it cannot, or unpacking
/// failed (said in a warning).
fn clone_source(
    reader: &Reader,
    store: &Store,
    handle: &path_policy::Root,
    stage_rel: &RepoPathBuf,
    layer: &LayerToWrite,
) -> Option<CloneSource> {
    let stage = handle.open_dir(stage_rel.as_bytes()).ok()?;
    if !layer_copies::can_clone(store.root(), &stage) {
        return None;
    }
    let write = |tree: TreeId, dest: &Utf8Path| write_tree(reader, tree, dest, &Silent).map(drop);
    let key = &layer.attached.key;
    let (stored, tree) = (layer.stored, layer.attached.tree);
    layer_copies::source(reader, store.root(), key, stored, tree, &write).unwrap_or_else(|e| {
        tracing::warn!("dependency layer {key}: not unpacked to clone from, so copied: {e}");
        None
    })
}

/// Renames the whole layer at `stage` to `rel`, both in one folder opened beneath the
/// root (never through a symlink).
fn into_place(
    handle: &path_policy::Root,
    stage: &RepoPathBuf,
    rel: &RepoPathBuf,
) -> Result<(), CheckoutError> {
    let parent = rel
        .parent()
        .map(|p| p.as_bytes().to_vec())
        .unwrap_or_default();
    let dir = handle.open_dir(&parent).map_err(|e| failure(e.into()))?;
    let name = |p: &RepoPathBuf| std::ffi::OsStr::from_bytes(p.name()).to_owned();
    rustix::fs::renameat(&dir, name(stage), &dir, name(rel))
        .map_err(|e| failure(WriteFailure::Io(handle.display(rel.as_bytes()), e.into())))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::os::unix::fs::PermissionsExt;

    use worktree_scope::dirstate::{self, Cache, Child};
    use worktree_scope::file_state::FileState;

    /// The records a checkout leaves are, but for when each file was verified, what
    /// `dirstate::record_written` makes of every written file's `lstat`: directories with
    /// files only (not those holding only directories), symlinks among the files; and
    /// every file verified after it was written. More files than a round holds, in many
    /// directories.
    #[test]
    fn the_stat_cache_holds_what_record_written_makes_of_every_written_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = camino::Utf8Path::from_path(dir.path()).expect("utf8");
        let store = cas::Store::open(
            &base.join("store"),
            &cas::OpenOptions {
                create: true,
                ..cas::OpenOptions::default()
            },
        )
        .expect("store");
        let src = base.join("src");
        let mut files = vec![
            "top.txt".to_owned(),
            "only/sub/deeper/f.txt".into(),
            "links/a.txt".into(),
            "links/z.txt".into(),
        ];
        for d in 0..60 {
            for f in 0..90 {
                files.push(format!("many/d{d}/f{f}"));
            }
        }
        assert!(files.len() > super::ROUND_FILES);
        for (i, f) in files.iter().enumerate() {
            let p = src.join(f);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, format!("file {i}")).expect("write");
        }
        std::fs::create_dir_all(src.join("bin")).expect("mkdir");
        std::fs::write(src.join("bin/run.sh"), "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(src.join("bin/run.sh"), PermissionsExt::from_mode(0o755))
            .expect("chmod");
        std::os::unix::fs::symlink("../top.txt", src.join("links/m")).expect("symlink");
        std::fs::create_dir_all(src.join("justlinks")).expect("mkdir");
        std::os::unix::fs::symlink("nowhere", src.join("justlinks/l")).expect("symlink");

        let ws = crate::kept::Kept::new();
        let snap = crate::capture::onboard(&ws, &store, &src, &Default::default())
            .expect("onboard")
            .snapshot;
        let dest = base.join("dest");
        let out = crate::checkout::checkout(&ws, &store, snap, &dest, &Default::default())
            .expect("checkout");
        assert_eq!(out.files, files.len() as u64 + 3);

        let reader = store.reader().expect("reader");
        let tree = reader.snapshot(snap).expect("snapshot").tree;
        let written = worktree_scope::build::flatten(&reader, tree).expect("flatten");
        assert_eq!(written.len() as u64, out.files);
        let mut expected = HashMap::new();
        dirstate::record_written(
            &mut expected,
            written.iter().map(|f| {
                let meta =
                    std::fs::symlink_metadata(dest.join(f.path.to_string())).expect("written file");
                (
                    f.path.as_repo_path(),
                    Some(FileState::from_metadata(&meta, f.blob, 0)),
                )
            }),
        );
        let mut loaded = Cache::load(&reader, &out.worktree).expect("load").dirs;
        // The records name their directories' trees and take the blob ids from there.
        let dirs: Vec<path_policy::RepoPathBuf> = loaded.keys().cloned().collect();
        let wanted = dirs
            .iter()
            .map(path_policy::RepoPathBuf::as_repo_path)
            .collect();
        dirstate::resolve_dirs(&mut loaded, &wanted, &reader).expect("blob ids in the trees");
        let mut verified = 0;
        for state in loaded.values_mut() {
            assert!(
                state.tree.is_some()
                    || state.children().iter().all(|(_, c)| {
                        matches!(c, Child::File(f) if f.mode & 0o170000 == 0o120000)
                    }),
                "a record of regular files points into its tree"
            );
            state.tree = None;
            for (name, child) in state.children_mut() {
                let Child::File(f) = child else {
                    panic!("{name:?}: not a file");
                };
                assert!(
                    f.verified_ns >= f.mtime_ns.max(f.ctime_ns),
                    "{name:?}: verified before it was written"
                );
                f.verified_ns = 0;
                verified += 1;
            }
        }
        assert_eq!(verified, written.len());
        for d in [
            "",
            "links",
            "justlinks",
            "bin",
            "many/d59",
            "only/sub/deeper",
        ] {
            let d = path_policy::RepoPath::new(d.as_bytes()).expect("a repo path");
            assert!(loaded.contains_key(d), "{d:?} has a record");
        }
        for d in ["only", "only/sub", "many"] {
            let d = path_policy::RepoPath::new(d.as_bytes()).expect("a repo path");
            assert!(!loaded.contains_key(d), "{d:?} holds no file");
        }
        assert_eq!(loaded, expected);
    }
}
