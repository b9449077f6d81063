//! The store: one folder holding a redb database of blobs, trees, snapshots, refs, the
//! worktree registry and the op log.

mod blob;
mod contain;
mod error;
mod fsck;
#[doc(hidden)]
pub mod fuzzing;
mod gc;
mod group;
mod reclaim;
mod registry;
mod tables;
mod versions;

use std::collections::{BTreeSet, BinaryHeap, HashSet};
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use camino::{Utf8Path, Utf8PathBuf};
use redb::{Database, ReadOnlyTable, ReadableDatabase, ReadableTable, Table, WriteTransaction};

pub use blob::{CHUNK_BYTES, PreparedBlob};
pub use error::{
    Error, MaintenanceError, OpenError, ReadError, RefError, RegistryError, ResolveError,
    StorageFailure, WriteError,
};
pub use fsck::{FsckOptions, FsckOutcome, Problem};
pub use gc::{GcOptions, GcOutcome};
pub use registry::{Checkpoint, DirIdentity, OpRecord, Task, WorktreeKind, WorktreeRecord};

use blob::{Body, Codec, Location, LogWriter};
use contain::{Health, open_held};
use error::StorageResult;
use tables::*;

use crate::id::{BlobId, IdPrefix, ObjectId, SnapshotId, TreeId};
use crate::object::{Snapshot, Tree};

/// The on-disk format this build reads and writes.
pub const FORMAT_VERSION: u64 = 1;

/// The database file inside the store folder.
pub const DATABASE_FILE: &str = "store.redb";

/// Trees whose encoding is larger than this are stored zstd-compressed.
const TREE_COMPRESS_THRESHOLD: usize = 512;

/// The three kinds of stored object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ObjectKind {
    /// File content or a symlink target.
    Blob,
    /// A directory listing.
    Tree,
    /// A commit object.
    Snapshot,
}

impl std::fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ObjectKind::Blob => "blob",
            ObjectKind::Tree => "tree",
            ObjectKind::Snapshot => "snapshot",
        })
    }
}

/// How to open a store.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// Create the folder and database if missing.
    pub create: bool,
    /// How long to wait while another process holds the store.
    pub lock_timeout: Duration,
    /// Memory redb may use for its page cache.
    pub cache_bytes: usize,
    /// Called once if the store is busy and we start waiting for it.
    pub on_wait: Option<fn(&Utf8Path)>,
    /// Open without the right to write: nothing in the file changes, and other read-only
    /// openers may hold the store at the same time. Writes then fail with
    /// [`WriteError::ReadOnly`].
    pub read_only: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            create: false,
            lock_timeout: Duration::from_secs(60),
            cache_bytes: 64 << 20,
            on_wait: None,
            read_only: false,
        }
    }
}

/// The environment variable holding the lock timeout, in seconds.
pub const LOCK_TIMEOUT_VAR: &str = "CAIRN_LOCK_TIMEOUT";

/// `CAIRN_LOCK_TIMEOUT` is set to something that is not a number of seconds a
/// [`Duration`] can hold (negative, NaN, infinite, too large, not a number).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{LOCK_TIMEOUT_VAR}={value:?}: not a number of seconds (0 or more)")]
pub struct InvalidLockTimeout {
    /// The value as set (lossily decoded if it is not UTF-8).
    pub value: String,
}

impl OpenOptions {
    /// Defaults, with `lock_timeout` taken from `CAIRN_LOCK_TIMEOUT` (seconds) when set and
    /// valid; an invalid value is ignored (see [`OpenOptions::try_from_env`] to refuse it).
    pub fn from_env() -> OpenOptions {
        OpenOptions::try_from_env().unwrap_or_default()
    }

    /// Defaults, with `lock_timeout` taken from `CAIRN_LOCK_TIMEOUT` (seconds) when set and
    /// not empty; any other value is refused, naming it.
    pub fn try_from_env() -> Result<OpenOptions, InvalidLockTimeout> {
        let mut opts = OpenOptions::default();
        let Some(raw) = std::env::var_os(LOCK_TIMEOUT_VAR) else {
            return Ok(opts);
        };
        let value = raw.to_string_lossy();
        if value.trim().is_empty() {
            return Ok(opts);
        }
        let invalid = || InvalidLockTimeout {
            value: value.clone().into_owned(),
        };
        let secs = raw
            .to_str()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .ok_or_else(invalid)?;
        // `try_from_secs_f64` refuses NaN, negatives and what overflows a Duration.
        opts.lock_timeout = Duration::try_from_secs_f64(secs).map_err(|_| invalid())?;
        Ok(opts)
    }
}

/// The database, opened for writing or read-only; closed only while the store is dropped.
enum Db {
    Write(Database),
    Read(redb::ReadOnlyDatabase),
    Closed,
}

impl Db {
    fn begin_read(&self) -> Result<redb::ReadTransaction, redb::TransactionError> {
        match self {
            Db::Write(db) => db.begin_read(),
            Db::Read(db) => db.begin_read(),
            Db::Closed => Err(redb::StorageError::DatabaseClosed.into()),
        }
    }
}

/// An open store. A writer holds it alone; read-only opens share it with each other;
/// everyone else waits (see [`OpenOptions`]).
pub struct Store {
    db: Db,
    root: Utf8PathBuf,
    /// Every call into redb runs through it (see `contain`).
    health: Arc<Health>,
    segment_bytes: u64,
    group: group::Group,
    versions: versions::Versions,
    /// Set when a write transaction ran out of space: the database file's length when it
    /// began, so that what it took is given back when the store closes (see `reclaim`).
    reclaim_past: std::sync::Mutex<Option<u64>>,
    /// How it was opened, to open it again after such a write.
    options: Box<OpenOptions>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens the store folder `root`, creating it if `options.create`.
    pub fn open(root: &Utf8Path, options: &OpenOptions) -> Result<Store, OpenError> {
        let db_path = root.join(DATABASE_FILE);
        let exists = db_path.is_file();
        if !exists && !options.create {
            return Err(OpenError::Missing {
                path: root.to_owned(),
            });
        }
        if !exists {
            std::fs::create_dir_all(root).map_err(|source| OpenError::Io {
                path: root.to_owned(),
                source,
            })?;
        }
        let health = Arc::new(Health::new(root));
        let damaged = |source| OpenError::Database {
            path: db_path.clone(),
            source,
        };
        let db = health
            .catch(|| Self::open_database(root, &db_path, options))
            .map_err(damaged)??;
        let mut store = Store {
            db,
            root: root.to_owned(),
            health: Arc::clone(&health),
            segment_bytes: 0,
            group: group::Group::default(),
            versions: versions::Versions::default(),
            reclaim_past: std::sync::Mutex::new(None),
            options: Box::new(options.clone()),
        };
        store.segment_bytes = health
            .catch(|| store.prepare(options.create))
            .map_err(damaged)??;
        Ok(store)
    }

    fn open_database(
        root: &Utf8Path,
        db_path: &Utf8Path,
        options: &OpenOptions,
    ) -> Result<Db, OpenError> {
        let started = Instant::now();
        let mut announced = false;
        let mut pause = Duration::from_millis(5);
        let mut read_only = options.read_only;
        loop {
            let mut builder = Database::builder();
            builder.set_cache_size(options.cache_bytes);
            let opened = if read_only {
                builder.open_read_only(db_path).map(Db::Read)
            } else {
                builder.create(db_path).map(Db::Write)
            };
            match opened {
                Ok(db) => return Ok(db),
                Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
                    let waited = started.elapsed();
                    if waited >= options.lock_timeout {
                        return Err(OpenError::LockTimeout {
                            path: root.to_owned(),
                            waited,
                        });
                    }
                    if !announced {
                        announced = true;
                        tracing::info!(store = %root, "store is held by another process; waiting");
                        if let Some(notify) = options.on_wait {
                            notify(root);
                        }
                    }
                    std::thread::sleep(pause.min(options.lock_timeout.saturating_sub(waited)));
                    pause = (pause * 2).min(Duration::from_millis(100));
                }
                // A store left behind by a crash needs the repair that only a writer does;
                // any other failure is reported as it is, with the file untouched.
                Err(redb::DatabaseError::RepairAborted) if read_only => {
                    tracing::info!(store = %root, "store was not closed cleanly; repairing it");
                    read_only = false;
                }
                Err(e) => {
                    return Err(OpenError::Database {
                        path: db_path.to_owned(),
                        source: StorageFailure::from(e),
                    });
                }
            }
        }
    }

    fn writer(&self) -> Result<&Database, WriteError> {
        match &self.db {
            Db::Write(db) => Ok(db),
            Db::Read(_) => Err(WriteError::ReadOnly {
                path: self.root.clone(),
            }),
            Db::Closed => Err(StorageFailure::from(redb::StorageError::DatabaseClosed).into()),
        }
    }

    /// Begins a write transaction and returns it with the database file's length. While it
    /// is open nothing else grows the file (redb has one writer, and a writable store is held
    /// by one process), so what lies past that length is this transaction's alone.
    fn begin_write(&self) -> Result<(WriteTransaction, u64), WriteError> {
        Ok(self.begin_write_on(self.writer()?)?)
    }

    fn begin_write_on(&self, db: &Database) -> Result<(WriteTransaction, u64), StorageFailure> {
        let txn = db.begin_write().storage()?;
        let len = std::fs::metadata(self.database_path())
            .map_err(|e| StorageFailure::from(redb::StorageError::Io(e)))?;
        Ok((txn, len.len()))
    }

    /// Passes on `e`, the failure of a write transaction begun when the file was
    /// `len_before` long; if the file system filled up, that space is given back on close.
    fn after_failed_write<E: error::OutOfSpace>(&self, len_before: u64, e: E) -> E {
        if e.is_out_of_space() {
            let mut past = self
                .reclaim_past
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *past = Some(past.map_or(len_before, |p| p.min(len_before)));
        }
        e
    }

    /// Checks the format version, initialising a new database; returns the segment size.
    fn prepare(&self, create: bool) -> Result<u64, OpenError> {
        let db_err = |e: StorageFailure| OpenError::Database {
            path: self.root.join(DATABASE_FILE),
            source: e,
        };
        let existing = {
            let txn = self.db.begin_read().storage().map_err(db_err)?;
            match txn.open_table(META) {
                Ok(meta) => {
                    let version = meta.get(FORMAT_VERSION_KEY).storage().map_err(db_err)?;
                    let segment = meta.get(SEGMENT_BYTES_KEY).storage().map_err(db_err)?;
                    Some((version.map(|v| v.value()), segment.map(|v| v.value())))
                }
                Err(redb::TableError::TableDoesNotExist(_)) => None,
                Err(e) => return Err(db_err(e.into())),
            }
        };
        match existing {
            Some((Some(FORMAT_VERSION), Some(segment))) => {
                // Every read and write allocates a segment: a damaged size must not reach them.
                if (blob::MIN_SEGMENT_BYTES..=blob::MAX_SEGMENT_BYTES).contains(&segment) {
                    Ok(segment)
                } else {
                    Err(OpenError::Corrupt {
                        path: self.root.clone(),
                        reason: format!(
                            "its blob log segment size, {segment} bytes, is not possible"
                        ),
                    })
                }
            }
            Some((found, _)) => Err(OpenError::UnsupportedFormat {
                path: self.root.clone(),
                found: found.unwrap_or(0),
                expected: FORMAT_VERSION,
            }),
            None if !create => Err(OpenError::UnsupportedFormat {
                path: self.root.clone(),
                found: 0,
                expected: FORMAT_VERSION,
            }),
            None => {
                let Db::Write(db) = &self.db else {
                    return Err(OpenError::UnsupportedFormat {
                        path: self.root.clone(),
                        found: 0,
                        expected: FORMAT_VERSION,
                    });
                };
                let txn = db.begin_write().storage().map_err(db_err)?;
                {
                    let mut meta = open_held(&txn, META).storage().map_err(db_err)?;
                    meta.insert(FORMAT_VERSION_KEY, FORMAT_VERSION)
                        .storage()
                        .map_err(db_err)?;
                    meta.insert(SEGMENT_BYTES_KEY, blob::DEFAULT_SEGMENT_BYTES)
                        .storage()
                        .map_err(db_err)?;
                    meta.insert(LOG_END_KEY, 0).storage().map_err(db_err)?;
                    open_held(&txn, BLOBS).storage().map_err(db_err)?;
                    open_held(&txn, SEGMENTS).storage().map_err(db_err)?;
                    open_held(&txn, TREES).storage().map_err(db_err)?;
                    open_held(&txn, SNAPSHOTS).storage().map_err(db_err)?;
                    open_held(&txn, REFS).storage().map_err(db_err)?;
                    open_held(&txn, WORKTREES).storage().map_err(db_err)?;
                    open_held(&txn, OPLOG).storage().map_err(db_err)?;
                    open_held(&txn, FILE_STATES).storage().map_err(db_err)?;
                }
                txn.commit().storage().map_err(db_err)?;
                Ok(blob::DEFAULT_SEGMENT_BYTES)
            }
        }
    }

    /// The store folder.
    pub fn root(&self) -> &Utf8Path {
        &self.root
    }

    /// The database file.
    pub fn database_path(&self) -> Utf8PathBuf {
        self.root.join(DATABASE_FILE)
    }

    /// A consistent read view of the store as of now.
    pub fn reader(&self) -> Result<Reader, StorageFailure> {
        self.health.run(|| self.open_reader())
    }

    fn open_reader(&self) -> Result<Reader, StorageFailure> {
        let txn = self.db.begin_read().storage()?;
        Ok(Reader {
            health: Arc::clone(&self.health),
            blobs: txn.open_table(BLOBS).storage()?,
            segments: txn.open_table(SEGMENTS).storage()?,
            trees: txn.open_table(TREES).storage()?,
            snapshots: txn.open_table(SNAPSHOTS).storage()?,
            refs: txn.open_table(REFS).storage()?,
            worktrees: txn.open_table(WORKTREES).storage()?,
            oplog: txn.open_table(OPLOG).storage()?,
            file_states: txn.open_table(FILE_STATES).storage()?,
            git_oids: match txn.open_table(GIT_OIDS) {
                Ok(t) => Some(t),
                Err(redb::TableError::TableDoesNotExist(_)) => None,
                Err(e) => return Err(e.into()),
            },
            journals: match txn.open_table(JOURNALS) {
                Ok(t) => Some(t),
                Err(redb::TableError::TableDoesNotExist(_)) => None,
                Err(e) => return Err(e.into()),
            },
            segment_bytes: self.segment_bytes,
        })
    }

    /// Writes everything in `batch` in one durable transaction: when this returns `Ok`, every
    /// id in the batch survives a crash. Objects already stored are skipped.
    ///
    /// Threads writing at the same time share one transaction (group commit); each batch is
    /// still applied whole or not at all.
    pub fn write(&self, batch: &WriteBatch) -> Result<WriteOutcome, WriteError> {
        // New versions before and after: a version read while the commit is under way
        // is never current afterwards, and a failed commit (which may have landed) makes
        // what was known stale too.
        self.versions.bump(batch.file_state_roots());
        let result = self.health.run(|| {
            if batch.stored_bytes() > group::GROUP_MAX_BYTES {
                self.write_alone(batch)
            } else {
                self.write_grouped(batch)
            }
        });
        self.versions.bump(batch.file_state_roots());
        result
    }

    /// The version of worktree `root`'s file states in this store: every write that
    /// touches them changes it. A copy of them read, or written, while this returned `v`
    /// is still what the store holds while it returns `v`, provided whoever writes a
    /// worktree's file states holds that worktree (as `fs_manager`'s operations do).
    pub fn file_states_version(&self, root: &Utf8Path) -> u64 {
        self.versions.of(root)
    }

    fn write_in(
        &self,
        txn: &WriteTransaction,
        batch: &WriteBatch,
    ) -> Result<WriteOutcome, WriteError> {
        let mut outcome = WriteOutcome::default();
        let mut meta = open_held(txn, META).storage()?;
        let mut blobs = open_held(txn, BLOBS).storage()?;
        let mut segments = open_held(txn, SEGMENTS).storage()?;
        let end = meta
            .get(LOG_END_KEY)
            .storage()?
            .map(|v| v.value())
            .unwrap_or(0);
        let mut log = LogWriter::open(&segments, self.segment_bytes, end)?;
        for blob in &batch.blobs {
            write_blob(&mut blobs, &mut segments, &mut log, blob, &mut outcome)?;
        }
        let new_end = log.end();
        log.finish(&mut segments)?;
        if new_end != end {
            meta.insert(LOG_END_KEY, new_end).storage()?;
        }

        let mut trees = open_held(txn, TREES).storage()?;
        let batch_trees: HashSet<TreeId> = batch.trees.iter().map(|(id, _)| *id).collect();
        for (id, tree) in &batch.trees {
            if trees.get(id.as_bytes()).storage()?.is_some() {
                continue;
            }
            for entry in tree.entries() {
                let present = match (entry.blob(), entry.tree()) {
                    (Some(b), _) => blobs.get(b.as_bytes()).storage()?.is_some(),
                    (_, Some(t)) => {
                        batch_trees.contains(&t) || trees.get(t.as_bytes()).storage()?.is_some()
                    }
                    _ => true,
                };
                if !present {
                    let kind = if entry.kind.is_blob() {
                        ObjectKind::Blob
                    } else {
                        ObjectKind::Tree
                    };
                    return Err(WriteError::Dangling { kind, id: entry.id });
                }
            }
            trees
                .insert(id.as_bytes(), encode_tree_value(tree).as_slice())
                .storage()?;
            outcome.trees_written += 1;
        }

        let mut snapshots = open_held(txn, SNAPSHOTS).storage()?;
        for (id, snap) in &batch.snapshots {
            if snapshots.get(id.as_bytes()).storage()?.is_some() {
                continue;
            }
            if trees.get(snap.tree.as_bytes()).storage()?.is_none() {
                return Err(WriteError::Dangling {
                    kind: ObjectKind::Tree,
                    id: snap.tree.into(),
                });
            }
            for p in &snap.parents {
                if snapshots.get(p.as_bytes()).storage()?.is_none() {
                    return Err(WriteError::Dangling {
                        kind: ObjectKind::Snapshot,
                        id: (*p).into(),
                    });
                }
            }
            snapshots
                .insert(id.as_bytes(), snap.encode().as_slice())
                .storage()?;
            outcome.snapshots_written += 1;
        }

        let snapshot_present = |id: &SnapshotId| -> Result<(), WriteError> {
            if snapshots.get(id.as_bytes()).storage()?.is_none() {
                return Err(WriteError::Dangling {
                    kind: ObjectKind::Snapshot,
                    id: (*id).into(),
                });
            }
            Ok(())
        };
        let mut refs = open_held(txn, REFS).storage()?;
        for (name, target) in &batch.refs {
            match target {
                Some(id) => {
                    snapshot_present(id)?;
                    refs.insert(name.as_str(), id.as_bytes()).storage()?;
                }
                None => {
                    refs.remove(name.as_str()).storage()?;
                }
            }
        }
        let mut worktrees = open_held(txn, WORKTREES).storage()?;
        for record in &batch.worktrees {
            for id in record.snapshots() {
                snapshot_present(&id)?;
            }
            let json = serde_json::to_vec(record).map_err(|e| WriteError::Encode {
                what: format!("worktree record {}", record.root),
                reason: e.to_string(),
            })?;
            worktrees
                .insert(record.root.as_str(), json.as_slice())
                .storage()?;
        }
        for root in &batch.removed_worktrees {
            worktrees.remove(root.as_str()).storage()?;
        }
        let mut oplog = open_held(txn, OPLOG).storage()?;
        for (root, op) in &batch.ops {
            for id in op.snapshots() {
                snapshot_present(&id)?;
            }
            let next = oplog
                .range((root.as_str(), 0)..=(root.as_str(), u64::MAX))
                .storage()?
                .next_back()
                .transpose()
                .storage()?
                .map(|(k, _)| k.value().1 + 1)
                .unwrap_or(1);
            let mut op = op.clone();
            op.seq = next;
            let json = serde_json::to_vec(&op).map_err(|e| WriteError::Encode {
                what: format!("op-log entry for {root}"),
                reason: e.to_string(),
            })?;
            oplog
                .insert((root.as_str(), next), json.as_slice())
                .storage()?;
            outcome.op_seqs.push(next);
        }
        let mut states = open_held(txn, FILE_STATES).storage()?;
        let past_any_path = [0xffu8; 4097];
        for root in &batch.cleared_states {
            let root = root.as_str();
            states
                .retain_in::<(&str, &[u8]), _>(
                    (root, &[][..])..(root, &past_any_path[..]),
                    |_, _| false,
                )
                .storage()?;
        }
        if !batch.journals.is_empty() {
            let mut journals = open_held(txn, JOURNALS).storage()?;
            for (root, journal) in &batch.journals {
                match journal {
                    Some(j) => {
                        journals.insert(root.as_str(), j.as_slice()).storage()?;
                    }
                    None => {
                        journals.remove(root.as_str()).storage()?;
                    }
                }
            }
        }
        if !batch.git_oids.is_empty() {
            let mut map = open_held(txn, GIT_OIDS).storage()?;
            for (id, oid) in &batch.git_oids {
                map.insert(id.as_bytes(), oid.as_slice()).storage()?;
            }
        }
        for (root, path, state) in &batch.file_states {
            match state {
                Some(v) => {
                    states
                        .insert((root.as_str(), path.as_slice()), v.as_slice())
                        .storage()?;
                }
                None => {
                    states.remove((root.as_str(), path.as_slice())).storage()?;
                }
            }
        }
        Ok(outcome)
    }

    /// Stores one blob given in memory and returns its id.
    pub fn put_blob(&self, content: &[u8]) -> Result<BlobId, WriteError> {
        let mut batch = WriteBatch::new();
        let id = batch.add_blob(PreparedBlob::new(content));
        self.write(&batch)?;
        Ok(id)
    }

    /// Streams a blob of any size from `input` with memory bounded by a few chunks.
    ///
    /// Chunks are committed in batches of about 64 MiB; the blob's own entry goes in last, so
    /// an interrupted call leaves only unreferenced chunks, which `gc` removes.
    pub fn put_blob_stream(
        &self,
        mut input: impl std::io::Read,
        what: &str,
    ) -> Result<BlobId, WriteError> {
        const BATCH_BYTES: u64 = 64 << 20;
        let read_err = |source| WriteError::Input {
            what: what.to_owned(),
            source,
        };
        let mut buf = vec![0u8; CHUNK_BYTES];
        let mut n = read_full(&mut input, &mut buf).map_err(read_err)?;
        if n < CHUNK_BYTES {
            return self.put_blob(&buf[..n]);
        }
        let mut hasher = blake3::Hasher::new();
        let mut chunks = Vec::new();
        let mut batch = WriteBatch::new();
        let mut size = 0u64;
        while n > 0 {
            let chunk = &buf[..n];
            hasher.update(chunk);
            size += n as u64;
            let id = BlobId::of(chunk);
            chunks.push(id);
            if !self.reader()?.has_blob(id)? {
                batch.add_blob(PreparedBlob::with_id(id, chunk));
            }
            if batch.stored_bytes() >= BATCH_BYTES {
                self.write(&batch)?;
                batch = WriteBatch::new();
            }
            n = read_full(&mut input, &mut buf).map_err(read_err)?;
        }
        let id = BlobId::from_bytes(*hasher.finalize().as_bytes());
        if chunks.len() > 1 {
            let body = Body::Chunked {
                chunks,
                parts: Vec::new(),
            };
            batch.add_blob(PreparedBlob { id, size, body });
        }
        // A single full chunk is its own blob: its id is the whole content's id.
        self.write(&batch)?;
        Ok(id)
    }

    /// Points ref `name` at `target`.
    pub fn set_ref(&self, name: &str, target: SnapshotId) -> Result<(), RefError> {
        validate_ref_name(name)?;
        let mut batch = WriteBatch::new();
        batch.set_ref(name, target);
        self.write(&batch).map_err(|e| match e {
            WriteError::Dangling { id, .. } => RefError::UnknownSnapshot { id },
            WriteError::Storage(s) => RefError::Storage(s),
            other => RefError::Write(Box::new(other)),
        })?;
        Ok(())
    }

    /// Removes ref `name`, returning where it pointed.
    pub fn remove_ref(&self, name: &str) -> Result<SnapshotId, RefError> {
        self.health.run(|| self.remove_ref_in_db(name))
    }

    fn remove_ref_in_db(&self, name: &str) -> Result<SnapshotId, RefError> {
        let (txn, len_before) = self
            .begin_write()
            .map_err(|e| RefError::Write(Box::new(e)))?;
        let removed = (|| {
            let old = {
                let mut refs = open_held(&txn, REFS).storage()?;
                refs.remove(name)
                    .storage()?
                    .map(|v| SnapshotId::from_bytes(v.value()))
            };
            let Some(old) = old else {
                return Err(RefError::NotFound {
                    name: name.to_owned(),
                });
            };
            txn.commit().storage()?;
            Ok(old)
        })();
        removed.map_err(|e| self.after_failed_write(len_before, e))
    }

    /// Shrinks the database file to what it holds. Slow on large stores; `gc` calls it.
    pub fn compact(&mut self) -> Result<(), StorageFailure> {
        let health = Arc::clone(&self.health);
        health.run(|| {
            if let Db::Write(db) = &mut self.db {
                db.compact().storage()?;
            }
            Ok(())
        })
    }
}

impl Store {
    /// True after a write ran out of space: the database then refuses every call until
    /// [`Store::reopen_after_failed_write`], or until the store is dropped (which gives the
    /// space back too).
    pub fn write_failed_for_space(&self) -> bool {
        self.reclaim_past
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some()
    }

    /// Gives back the space of a write that ran out of it and opens the database again, so
    /// that a store held open for long (`cairn serve`) goes on working once there is room.
    pub fn reopen_after_failed_write(&mut self) -> Result<(), OpenError> {
        let past = self
            .reclaim_past
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let Some(len_before) = past else {
            return Ok(());
        };
        reclaim::give_back(self, len_before);
        self.close_db();
        let db_path = self.database_path();
        let options = self.options.clone();
        self.db = self
            .health
            .catch(|| Self::open_database(&self.root, &db_path, &options))
            .map_err(|source| OpenError::Database {
                path: db_path.clone(),
                source,
            })??;
        Ok(())
    }
}

impl Store {
    /// Closes the database. redb's drop commits once more (its allocator state), which can
    /// panic on a damaged file, and does after a caught panic poisoned its locks; a drop must
    /// not panic, and the next open repairs what the close left undone.
    fn close_db(&mut self) {
        let db = std::mem::replace(&mut self.db, Db::Closed);
        if let Err(reason) = contain::quietly(|| drop(db))
            && !self.health.is_damaged()
        {
            tracing::warn!(store = %self.root, "closing the database failed ({reason}); the next open repairs it");
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let past = self
            .reclaim_past
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        match past {
            Some(len_before) if !self.health.is_damaged() => {
                reclaim::give_back(self, len_before);
                self.close_db();
                reclaim::repair(self);
            }
            _ => self.close_db(),
        }
    }
}

fn read_full(input: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

fn write_blob(
    blobs: &mut Table<[u8; 32], &[u8]>,
    segments: &mut Table<u64, &[u8]>,
    log: &mut LogWriter,
    blob: &PreparedBlob,
    outcome: &mut WriteOutcome,
) -> Result<(), WriteError> {
    if blobs.get(blob.id.as_bytes()).storage()?.is_some() {
        return Ok(());
    }
    let location = match &blob.body {
        Body::Packed { codec, payload } => {
            let offset = log.append(segments, payload)?;
            outcome.bytes_written += payload.len() as u64;
            Location::Packed {
                offset,
                len: u32::try_from(payload.len()).unwrap_or(u32::MAX),
                size: blob.size,
                codec: *codec,
            }
        }
        Body::Chunked { chunks, parts } => {
            for part in parts {
                write_blob(blobs, segments, log, part, outcome)?;
            }
            for chunk in chunks {
                if blobs.get(chunk.as_bytes()).storage()?.is_none() {
                    return Err(WriteError::Dangling {
                        kind: ObjectKind::Blob,
                        id: (*chunk).into(),
                    });
                }
            }
            Location::Chunked {
                size: blob.size,
                chunks: chunks.clone(),
            }
        }
    };
    blobs
        .insert(blob.id.as_bytes(), location.encode().as_slice())
        .storage()?;
    outcome.blobs_written += 1;
    Ok(())
}

fn encode_tree_value(tree: &Tree) -> Vec<u8> {
    let encoded = tree.encode();
    if encoded.len() > TREE_COMPRESS_THRESHOLD
        && let Ok(c) = zstd::bulk::compress(&encoded, 3)
        && c.len() < encoded.len()
    {
        let mut out = Vec::with_capacity(c.len() + 1);
        out.push(Codec::Zstd as u8);
        out.extend_from_slice(&c);
        return out;
    }
    let mut out = Vec::with_capacity(encoded.len() + 1);
    out.push(Codec::Raw as u8);
    out.extend_from_slice(&encoded);
    out
}

/// Decodes a stored tree value and checks it against its id.
pub(crate) fn decode_tree_value(id: TreeId, value: &[u8]) -> Result<Tree, ReadError> {
    let corrupt = |reason: String| ReadError::corrupt(ObjectKind::Tree, id, reason);
    let Some((&codec, body)) = value.split_first() else {
        return Err(corrupt("empty record".into()));
    };
    let owned;
    let encoded = match codec {
        0 => body,
        1 => {
            owned = zstd::stream::decode_all(body).map_err(|e| corrupt(format!("zstd: {e}")))?;
            owned.as_slice()
        }
        other => return Err(corrupt(format!("unknown codec {other}"))),
    };
    if crate::object::hash_with(crate::object::TREE_CONTEXT, encoded) != *id.as_bytes() {
        return Err(corrupt("encoding does not match its hash".into()));
    }
    Tree::decode(encoded).map_err(|e| corrupt(e.to_string()))
}

/// Decodes a stored snapshot and checks it against its id.
pub(crate) fn decode_snapshot_value(id: SnapshotId, value: &[u8]) -> Result<Snapshot, ReadError> {
    if crate::object::hash_with(crate::object::SNAPSHOT_CONTEXT, value) != *id.as_bytes() {
        return Err(ReadError::corrupt(
            ObjectKind::Snapshot,
            id,
            "encoding does not match its hash",
        ));
    }
    Snapshot::decode(value).map_err(|e| ReadError::corrupt(ObjectKind::Snapshot, id, e))
}

/// Checks a ref name: 1 to 255 characters of `A-Z a-z 0-9 . _ - /`, no empty or dot-only
/// path components, not starting with `-`, not 64 hex digits (that reads as an id).
pub fn validate_ref_name(name: &str) -> Result<(), RefError> {
    let invalid = |reason| {
        Err(RefError::InvalidName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() || name.len() > 255 {
        return invalid("must be 1 to 255 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b))
    {
        return invalid("only A-Z, a-z, 0-9, '.', '_', '-' and '/' are allowed");
    }
    if name.starts_with('-') {
        return invalid("must not start with '-'");
    }
    if name
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return invalid("empty, '.' or '..' path component");
    }
    if name.parse::<ObjectId>().is_ok() {
        return invalid("a 64-digit hex name would read as an id");
    }
    Ok(())
}

/// What a [`Store::write`] stored (objects already present are not counted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteOutcome {
    /// New blob entries, chunks included.
    pub blobs_written: u64,
    /// Compressed bytes appended to the blob log.
    pub bytes_written: u64,
    /// New trees.
    pub trees_written: u64,
    /// New snapshots.
    pub snapshots_written: u64,
    /// Sequence numbers given to the batch's op-log entries, in order.
    pub op_seqs: Vec<u64>,
}

/// Objects and registry updates written together by [`Store::write`], atomically.
#[derive(Debug, Default, Clone)]
pub struct WriteBatch {
    blobs: Vec<PreparedBlob>,
    trees: Vec<(TreeId, Tree)>,
    snapshots: Vec<(SnapshotId, Snapshot)>,
    refs: Vec<(String, Option<SnapshotId>)>,
    worktrees: Vec<WorktreeRecord>,
    removed_worktrees: Vec<Utf8PathBuf>,
    ops: Vec<(Utf8PathBuf, OpRecord)>,
    cleared_states: Vec<Utf8PathBuf>,
    file_states: Vec<(Utf8PathBuf, Vec<u8>, Option<Vec<u8>>)>,
    git_oids: Vec<(ObjectId, Vec<u8>)>,
    journals: Vec<(Utf8PathBuf, Option<Vec<u8>>)>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }

    /// Adds a prepared blob.
    pub fn add_blob(&mut self, blob: PreparedBlob) -> BlobId {
        let id = blob.id;
        self.blobs.push(blob);
        id
    }

    /// Adds a tree; its entries must be stored already or come earlier in a batch.
    pub fn add_tree(&mut self, tree: Tree) -> TreeId {
        let id = tree.id();
        self.trees.push((id, tree));
        id
    }

    /// Adds a snapshot; its tree and parents must be stored or in this batch.
    pub fn add_snapshot(&mut self, snapshot: Snapshot) -> SnapshotId {
        let id = snapshot.id();
        self.snapshots.push((id, snapshot));
        id
    }

    /// Points a ref at a snapshot (name checked by the caller, see [`validate_ref_name`]).
    pub fn set_ref(&mut self, name: &str, target: SnapshotId) {
        self.refs.push((name.to_owned(), Some(target)));
    }

    /// Registers or updates a worktree.
    pub fn put_worktree(&mut self, record: WorktreeRecord) {
        self.worktrees.push(record);
    }

    /// Forgets a worktree (its op log stays until `gc --prune-ops`).
    pub fn remove_worktree(&mut self, root: &Utf8Path) {
        self.removed_worktrees.push(root.to_owned());
    }

    /// Appends an entry to a worktree's op log; the store assigns its sequence number.
    pub fn append_op(&mut self, root: &Utf8Path, op: OpRecord) {
        self.ops.push((root.to_owned(), op));
    }

    /// Drops every file state of a worktree (applied before the batch's own file states).
    pub fn clear_file_states(&mut self, root: &Utf8Path) {
        self.cleared_states.push(root.to_owned());
    }

    /// Sets (`Some`) or removes (`None`) the file state of `path` in worktree `root`.
    pub fn set_file_state(&mut self, root: &Utf8Path, path: &[u8], state: Option<Vec<u8>>) {
        self.file_states
            .push((root.to_owned(), path.to_vec(), state));
    }

    /// Sets (`Some`) or clears (`None`) the intent journal of worktree `root`.
    pub fn set_journal(&mut self, root: &Utf8Path, journal: Option<Vec<u8>>) {
        self.journals.push((root.to_owned(), journal));
    }

    /// Records that `id` is `git_oid` in git repositories.
    pub fn map_git_oid(&mut self, id: ObjectId, git_oid: &[u8]) {
        self.git_oids.push((id, git_oid.to_vec()));
    }

    /// The worktrees whose file states the batch changes.
    fn file_state_roots(&self) -> impl Iterator<Item = &Utf8PathBuf> {
        self.cleared_states
            .iter()
            .chain(&self.removed_worktrees)
            .chain(self.file_states.iter().map(|(root, _, _)| root))
    }

    /// Compressed bytes the batch's blobs would add.
    pub fn stored_bytes(&self) -> u64 {
        self.blobs.iter().map(PreparedBlob::stored_bytes).sum()
    }

    /// True if the batch holds nothing.
    pub fn is_empty(&self) -> bool {
        self.blobs.is_empty()
            && self.trees.is_empty()
            && self.snapshots.is_empty()
            && self.refs.is_empty()
            && self.worktrees.is_empty()
            && self.removed_worktrees.is_empty()
            && self.ops.is_empty()
            && self.cleared_states.is_empty()
            && self.file_states.is_empty()
            && self.git_oids.is_empty()
            && self.journals.is_empty()
    }
}

/// A path and its opaque file state, as stored by [`WriteBatch::set_file_state`].
pub type FileStateEntry = (Vec<u8>, Vec<u8>);

/// A consistent, read-only view of the store. Cheap to create; many may exist at once.
pub struct Reader {
    health: Arc<Health>,
    blobs: ReadOnlyTable<[u8; 32], &'static [u8]>,
    segments: ReadOnlyTable<u64, &'static [u8]>,
    trees: ReadOnlyTable<[u8; 32], &'static [u8]>,
    snapshots: ReadOnlyTable<[u8; 32], &'static [u8]>,
    refs: ReadOnlyTable<&'static str, [u8; 32]>,
    worktrees: ReadOnlyTable<&'static str, &'static [u8]>,
    oplog: ReadOnlyTable<(&'static str, u64), &'static [u8]>,
    file_states: ReadOnlyTable<(&'static str, &'static [u8]), &'static [u8]>,
    /// Absent in stores that never exported.
    git_oids: Option<ReadOnlyTable<[u8; 32], &'static [u8]>>,
    /// Absent in stores that never journaled.
    journals: Option<ReadOnlyTable<&'static str, &'static [u8]>>,
    segment_bytes: u64,
}

impl Reader {
    fn location(&self, id: BlobId) -> Result<Location, ReadError> {
        self.health.run(|| {
            let Some(v) = self.blobs.get(id.as_bytes()).storage()? else {
                return Err(ReadError::NotFound {
                    kind: ObjectKind::Blob,
                    id: id.into(),
                });
            };
            Location::decode(v.value()).ok_or_else(|| {
                ReadError::corrupt(ObjectKind::Blob, id, "unreadable location record")
            })
        })
    }

    /// True if the blob is stored.
    pub fn has_blob(&self, id: BlobId) -> Result<bool, StorageFailure> {
        self.health
            .run(|| Ok(self.blobs.get(id.as_bytes()).storage()?.is_some()))
    }

    /// True if the tree is stored.
    pub fn has_tree(&self, id: TreeId) -> Result<bool, StorageFailure> {
        self.health
            .run(|| Ok(self.trees.get(id.as_bytes()).storage()?.is_some()))
    }

    /// True if the snapshot is stored.
    pub fn has_snapshot(&self, id: SnapshotId) -> Result<bool, StorageFailure> {
        self.health
            .run(|| Ok(self.snapshots.get(id.as_bytes()).storage()?.is_some()))
    }

    /// The size of a stored blob, without reading it.
    pub fn blob_size(&self, id: BlobId) -> Result<u64, ReadError> {
        Ok(self.location(id)?.size())
    }

    /// A blob's bytes, verified against its id.
    pub fn blob(&self, id: BlobId) -> Result<Vec<u8>, ReadError> {
        let mut out = Vec::new();
        self.write_blob_to(id, &mut out)?;
        Ok(out)
    }

    fn packed(&self, id: BlobId) -> Result<Vec<u8>, ReadError> {
        self.health.run(|| match self.location(id)? {
            Location::Packed {
                offset,
                len,
                size,
                codec,
            } => {
                // Payloads are never larger than their chunk (else stored raw): a damaged
                // length must not make a huge allocation.
                if u64::from(len) > CHUNK_BYTES as u64 {
                    return Err(ReadError::corrupt(
                        ObjectKind::Blob,
                        id,
                        format!("stored length {len} is more than a chunk"),
                    ));
                }
                let payload = blob::read_log(&self.segments, self.segment_bytes, id, offset, len)?;
                blob::unpack(id, codec, payload, size)
            }
            Location::Chunked { .. } => Err(ReadError::corrupt(
                ObjectKind::Blob,
                id,
                "a chunk that is itself chunked",
            )),
        })
    }

    /// Streams a blob into `sink`, one verified chunk at a time, and checks the whole content
    /// against `id` at the end. On error the sink may hold a prefix of verified chunks: write
    /// to a temporary file and keep it only on `Ok`.
    pub fn write_blob_to(&self, id: BlobId, sink: &mut impl Write) -> Result<u64, ReadError> {
        let sink_err = |source| ReadError::Sink {
            id: id.into(),
            source,
        };
        match self.location(id)? {
            Location::Packed { .. } => {
                let bytes = self.packed(id)?;
                sink.write_all(&bytes).map_err(sink_err)?;
                Ok(bytes.len() as u64)
            }
            Location::Chunked { size, chunks } => {
                let mut hasher = blake3::Hasher::new();
                let mut written = 0u64;
                for chunk in chunks {
                    let bytes = self.packed(chunk).map_err(|e| match e {
                        ReadError::NotFound { id: c, .. } => ReadError::corrupt(
                            ObjectKind::Blob,
                            id,
                            format!("chunk {c} is missing"),
                        ),
                        other => other,
                    })?;
                    hasher.update(&bytes);
                    written += bytes.len() as u64;
                    sink.write_all(&bytes).map_err(sink_err)?;
                }
                if written != size || hasher.finalize().as_bytes() != id.as_bytes() {
                    return Err(ReadError::corrupt(
                        ObjectKind::Blob,
                        id,
                        "chunks do not add up to the blob",
                    ));
                }
                Ok(written)
            }
        }
    }

    /// A tree, verified against its id.
    pub fn tree(&self, id: TreeId) -> Result<Tree, ReadError> {
        self.health.run(|| {
            let Some(v) = self.trees.get(id.as_bytes()).storage()? else {
                return Err(ReadError::NotFound {
                    kind: ObjectKind::Tree,
                    id: id.into(),
                });
            };
            decode_tree_value(id, v.value())
        })
    }

    /// A snapshot, verified against its id.
    pub fn snapshot(&self, id: SnapshotId) -> Result<Snapshot, ReadError> {
        self.health.run(|| {
            let Some(v) = self.snapshots.get(id.as_bytes()).storage()? else {
                return Err(ReadError::NotFound {
                    kind: ObjectKind::Snapshot,
                    id: id.into(),
                });
            };
            decode_snapshot_value(id, v.value())
        })
    }

    /// Where ref `name` points.
    pub fn ref_target(&self, name: &str) -> Result<Option<SnapshotId>, StorageFailure> {
        self.health.run(|| {
            Ok(self
                .refs
                .get(name)
                .storage()?
                .map(|v| SnapshotId::from_bytes(v.value())))
        })
    }

    /// Every ref, by name.
    pub fn refs(&self) -> Result<Vec<(String, SnapshotId)>, StorageFailure> {
        self.health.run(|| {
            let mut out = Vec::new();
            for item in self.refs.iter().storage()? {
                let (k, v) = item.storage()?;
                out.push((k.value().to_owned(), SnapshotId::from_bytes(v.value())));
            }
            Ok(out)
        })
    }

    fn prefix_matches(
        table: &ReadOnlyTable<[u8; 32], &'static [u8]>,
        prefix: &IdPrefix,
        out: &mut Vec<ObjectId>,
    ) -> Result<(), StorageFailure> {
        let (low, high) = (prefix.low(), prefix.high());
        for item in table.range::<&[u8; 32]>(&low..=&high).storage()? {
            let (k, _) = item.storage()?;
            out.push(ObjectId::from_bytes(k.value()));
            if out.len() > 16 {
                break;
            }
        }
        Ok(())
    }

    /// Resolves a ref name or unique id prefix (at least 6 hex digits) to a snapshot.
    /// Checkpoint names are worktree-specific and resolved by the caller first.
    pub fn resolve_snapshot(&self, spec: &str) -> Result<SnapshotId, ResolveError> {
        self.health.run(|| {
            if let Some(id) = self.ref_target(spec)? {
                return Ok(id);
            }
            let unknown = || ResolveError::Unknown {
                spec: spec.to_owned(),
                wanted: "snapshot",
            };
            let prefix = IdPrefix::parse(spec).ok_or_else(unknown)?;
            let mut found = Vec::new();
            Self::prefix_matches(&self.snapshots, &prefix, &mut found)?;
            match found.as_slice() {
                [] => Err(unknown()),
                [one] => Ok(one.as_snapshot()),
                many => Err(ResolveError::Ambiguous {
                    spec: spec.to_owned(),
                    candidates: many.iter().map(|id| (ObjectKind::Snapshot, *id)).collect(),
                }),
            }
        })
    }

    /// Resolves a ref name or unique id prefix to an object of any kind.
    pub fn resolve_object(&self, spec: &str) -> Result<(ObjectKind, ObjectId), ResolveError> {
        self.health.run(|| {
            if let Some(id) = self.ref_target(spec)? {
                return Ok((ObjectKind::Snapshot, id.into()));
            }
            let unknown = || ResolveError::Unknown {
                spec: spec.to_owned(),
                wanted: "object",
            };
            let prefix = IdPrefix::parse(spec).ok_or_else(unknown)?;
            let mut candidates = BTreeSet::new();
            for (kind, table) in [
                (ObjectKind::Snapshot, &self.snapshots),
                (ObjectKind::Tree, &self.trees),
                (ObjectKind::Blob, &self.blobs),
            ] {
                let mut found = Vec::new();
                Self::prefix_matches(table, &prefix, &mut found)?;
                candidates.extend(found.into_iter().map(|id| (kind, id)));
            }
            let mut candidates: Vec<_> = candidates.into_iter().collect();
            match candidates.len() {
                0 => Err(unknown()),
                1 => Ok(candidates.remove(0)),
                _ => Err(ResolveError::Ambiguous {
                    spec: spec.to_owned(),
                    candidates,
                }),
            }
        })
    }

    /// History from `start`: it and its ancestors, newest first (by creation time, ties by
    /// id), at most `limit` of them.
    pub fn log(
        &self,
        start: SnapshotId,
        limit: Option<usize>,
    ) -> Result<Vec<(SnapshotId, Snapshot)>, ReadError> {
        self.health.run(|| {
            let mut out = Vec::new();
            let mut seen = HashSet::new();
            let mut loaded = std::collections::HashMap::new();
            let mut queue = BinaryHeap::new();
            let first = self.snapshot(start)?;
            seen.insert(start);
            queue.push((first.created, start));
            loaded.insert(start, first);
            while let Some((_, id)) = queue.pop() {
                if limit.is_some_and(|n| out.len() >= n) {
                    break;
                }
                let Some(snap) = loaded.remove(&id) else {
                    continue;
                };
                for &p in &snap.parents {
                    if seen.insert(p) {
                        let parent = self.snapshot(p).map_err(ReadError::as_referenced)?;
                        queue.push((parent.created, p));
                        loaded.insert(p, parent);
                    }
                }
                out.push((id, snap));
            }
            Ok(out)
        })
    }

    /// The registry record of the worktree at `root`.
    pub fn worktree(&self, root: &Utf8Path) -> Result<Option<WorktreeRecord>, RegistryError> {
        self.health
            .run(|| match self.worktrees.get(root.as_str()).storage()? {
                None => Ok(None),
                Some(v) => registry::decode_worktree(root, v.value()).map(Some),
            })
    }

    /// Every registered worktree, by root path.
    pub fn worktrees(&self) -> Result<Vec<WorktreeRecord>, RegistryError> {
        self.health.run(|| {
            let mut out = Vec::new();
            for item in self.worktrees.iter().storage()? {
                let (k, v) = item.storage()?;
                out.push(registry::decode_worktree(
                    Utf8Path::new(k.value()),
                    v.value(),
                )?);
            }
            Ok(out)
        })
    }

    /// Every file state of worktree `root`, sorted by path bytes.
    pub fn file_states(&self, root: &Utf8Path) -> Result<Vec<FileStateEntry>, StorageFailure> {
        self.health.run(|| {
            let mut out = Vec::new();
            let root = root.as_str();
            let upper = [0xffu8; 4097];
            for item in self
                .file_states
                .range::<(&str, &[u8])>((root, &[][..])..(root, &upper[..]))
                .storage()?
            {
                let (k, v) = item.storage()?;
                out.push((k.value().1.to_vec(), v.value().to_vec()));
            }
            Ok(out)
        })
    }

    /// One file state of worktree `root`.
    pub fn file_state(
        &self,
        root: &Utf8Path,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, StorageFailure> {
        self.health.run(|| {
            Ok(self
                .file_states
                .get((root.as_str(), key))
                .storage()?
                .map(|v| v.value().to_vec()))
        })
    }

    /// Refuses a batch whose trees or snapshots name an object that neither the batch nor
    /// the store holds (the [`WriteError::Dangling`] that [`Store::write`] would give for
    /// them): for writers that commit a batch later, with more added to it. Refs, registry
    /// records and the parts of chunked blobs are not checked here.
    pub fn check_references(&self, batch: &WriteBatch) -> Result<(), WriteError> {
        self.health.run(|| {
            let blobs: HashSet<BlobId> = batch.blobs.iter().map(|b| b.id).collect();
            let trees: HashSet<TreeId> = batch.trees.iter().map(|(id, _)| *id).collect();
            let snapshots: HashSet<SnapshotId> =
                batch.snapshots.iter().map(|(id, _)| *id).collect();
            let dangling = |kind, id| Err(WriteError::Dangling { kind, id });
            for (id, tree) in &batch.trees {
                if self.has_tree(*id)? {
                    continue;
                }
                for entry in tree.entries() {
                    match (entry.blob(), entry.tree()) {
                        (Some(b), _) if !blobs.contains(&b) && !self.has_blob(b)? => {
                            return dangling(ObjectKind::Blob, entry.id);
                        }
                        (_, Some(t)) if !trees.contains(&t) && !self.has_tree(t)? => {
                            return dangling(ObjectKind::Tree, entry.id);
                        }
                        _ => {}
                    }
                }
            }
            for (_, snap) in &batch.snapshots {
                if !trees.contains(&snap.tree) && !self.has_tree(snap.tree)? {
                    return dangling(ObjectKind::Tree, snap.tree.into());
                }
                for p in &snap.parents {
                    if !snapshots.contains(p) && !self.has_snapshot(*p)? {
                        return dangling(ObjectKind::Snapshot, (*p).into());
                    }
                }
            }
            Ok(())
        })
    }

    /// The git id recorded for `id` by an earlier export, if any.
    pub fn git_oid(&self, id: ObjectId) -> Result<Option<Vec<u8>>, StorageFailure> {
        self.health.run(|| {
            let Some(map) = &self.git_oids else {
                return Ok(None);
            };
            Ok(map
                .get(id.as_bytes())
                .storage()?
                .map(|v| v.value().to_vec()))
        })
    }

    /// The intent journal of an unfinished operation on worktree `root`, if any.
    pub fn journal(&self, root: &Utf8Path) -> Result<Option<Vec<u8>>, StorageFailure> {
        self.health.run(|| {
            let Some(journals) = &self.journals else {
                return Ok(None);
            };
            Ok(journals
                .get(root.as_str())
                .storage()?
                .map(|v| v.value().to_vec()))
        })
    }

    /// Every worktree with an unfinished operation.
    pub fn journaled_worktrees(&self) -> Result<Vec<Utf8PathBuf>, StorageFailure> {
        self.health.run(|| {
            let Some(journals) = &self.journals else {
                return Ok(Vec::new());
            };
            let mut out = Vec::new();
            for item in journals.iter().storage()? {
                out.push(Utf8PathBuf::from(item.storage()?.0.value()));
            }
            Ok(out)
        })
    }

    /// A worktree's op log, oldest first.
    pub fn ops(&self, root: &Utf8Path) -> Result<Vec<OpRecord>, RegistryError> {
        self.health.run(|| {
            let mut out = Vec::new();
            let range = self
                .oplog
                .range((root.as_str(), 0)..=(root.as_str(), u64::MAX))
                .storage()?;
            for item in range {
                let (_, v) = item.storage()?;
                out.push(registry::decode_op(root, v.value())?);
            }
            Ok(out)
        })
    }
}
