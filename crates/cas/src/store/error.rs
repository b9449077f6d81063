//! One error enum per operation; each names the id, name or path it failed on.

use std::time::Duration;

use camino::{Utf8Path, Utf8PathBuf};

use crate::id::ObjectId;
use crate::object::ObjectError;
use crate::object::ObjectKind;

/// A failure inside the embedded database (I/O, or damage to the database file), naming the
/// store once the store's call boundary has added it.
///
/// Opaque on purpose: cairn's crates do not expose redb types.
#[derive(Debug)]
pub struct StorageFailure {
    store: Option<Utf8PathBuf>,
    cause: Cause,
}

#[derive(Debug)]
enum Cause {
    Redb(Box<redb::Error>),
    /// redb panicked on the file's content; what it stopped on.
    Damaged(String),
}

impl<E: Into<redb::Error>> From<E> for StorageFailure {
    fn from(e: E) -> Self {
        StorageFailure {
            store: None,
            cause: Cause::Redb(Box::new(e.into())),
        }
    }
}

impl std::fmt::Display for StorageFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(store) = &self.store {
            write!(f, "store {store}: ")?;
        }
        match &self.cause {
            Cause::Redb(e) => write!(f, "{e}"),
            Cause::Damaged(reason) => write!(
                f,
                "the database file is damaged, redb failed on it ({reason}); nothing more is done with it"
            ),
        }
    }
}

impl std::error::Error for StorageFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.cause {
            Cause::Redb(e) => Some(e.as_ref()),
            Cause::Damaged(_) => None,
        }
    }
}

impl StorageFailure {
    pub(crate) fn damaged(reason: String) -> StorageFailure {
        StorageFailure {
            store: None,
            cause: Cause::Damaged(reason),
        }
    }

    /// True when the database file itself is damaged.
    pub fn is_corruption(&self) -> bool {
        match &self.cause {
            Cause::Redb(e) => matches!(**e, redb::Error::Corrupted(_)),
            Cause::Damaged(_) => true,
        }
    }

    /// True when the file system holding the store is full (or over quota).
    pub fn is_out_of_space(&self) -> bool {
        match &self.cause {
            Cause::Redb(e) => match &**e {
                redb::Error::Io(io) => is_out_of_space(io),
                _ => false,
            },
            Cause::Damaged(_) => false,
        }
    }
}

/// ENOSPC or EDQUOT.
pub(crate) fn is_out_of_space(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

/// Whether an error says the file system holding the store is full.
pub(crate) trait OutOfSpace {
    fn is_out_of_space(&self) -> bool;
}

impl OutOfSpace for StorageFailure {
    fn is_out_of_space(&self) -> bool {
        StorageFailure::is_out_of_space(self)
    }
}

impl OutOfSpace for ReadError {
    fn is_out_of_space(&self) -> bool {
        matches!(self, ReadError::Storage(s) if s.is_out_of_space())
    }
}

impl OutOfSpace for WriteError {
    fn is_out_of_space(&self) -> bool {
        match self {
            WriteError::Storage(s) => s.is_out_of_space(),
            WriteError::Read(r) => r.is_out_of_space(),
            _ => false,
        }
    }
}

impl OutOfSpace for RefError {
    fn is_out_of_space(&self) -> bool {
        match self {
            RefError::Storage(s) => s.is_out_of_space(),
            RefError::Write(w) => w.is_out_of_space(),
            _ => false,
        }
    }
}

impl OutOfSpace for MaintenanceError {
    fn is_out_of_space(&self) -> bool {
        match self {
            MaintenanceError::Storage(s) => s.is_out_of_space(),
            MaintenanceError::Unsafe(r) => r.is_out_of_space(),
            _ => false,
        }
    }
}

/// Names the store in an error's [`StorageFailure`], if it holds one that does not yet.
pub(crate) trait InStore {
    fn in_store(self, root: &Utf8Path) -> Self;
}

impl InStore for StorageFailure {
    fn in_store(mut self, root: &Utf8Path) -> Self {
        self.store.get_or_insert_with(|| root.to_owned());
        self
    }
}

impl InStore for ReadError {
    fn in_store(self, root: &Utf8Path) -> Self {
        match self {
            ReadError::Storage(s) => ReadError::Storage(s.in_store(root)),
            other => other,
        }
    }
}

impl InStore for WriteError {
    fn in_store(self, root: &Utf8Path) -> Self {
        match self {
            WriteError::Storage(s) => WriteError::Storage(s.in_store(root)),
            WriteError::Read(r) => WriteError::Read(r.in_store(root)),
            other => other,
        }
    }
}

impl InStore for ResolveError {
    fn in_store(self, root: &Utf8Path) -> Self {
        match self {
            ResolveError::Storage(s) => ResolveError::Storage(s.in_store(root)),
            other => other,
        }
    }
}

impl InStore for RefError {
    fn in_store(self, root: &Utf8Path) -> Self {
        match self {
            RefError::Storage(s) => RefError::Storage(s.in_store(root)),
            RefError::Write(w) => RefError::Write(Box::new(w.in_store(root))),
            other => other,
        }
    }
}

impl InStore for MaintenanceError {
    fn in_store(self, root: &Utf8Path) -> Self {
        match self {
            MaintenanceError::Storage(s) => MaintenanceError::Storage(s.in_store(root)),
            MaintenanceError::Unsafe(r) => MaintenanceError::Unsafe(r.in_store(root)),
            other => other,
        }
    }
}

/// Opening or creating a store failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// No store at that path, and creating one was not asked for.
    #[error("no cairn store at {path}")]
    Missing {
        /// The store folder.
        path: Utf8PathBuf,
    },
    /// Another process held the store for longer than the lock timeout.
    #[error(
        "store {path} is held by another process; gave up after {}s (set CAIRN_LOCK_TIMEOUT to wait longer)",
        waited.as_secs()
    )]
    LockTimeout {
        /// The store folder.
        path: Utf8PathBuf,
        /// How long we waited.
        waited: Duration,
    },
    /// The store was written by a different format version.
    #[error(
        "store {path} has format version {found}; this cairn reads version {expected}{}",
        newer_advice(.found, .expected)
    )]
    UnsupportedFormat {
        /// The store folder.
        path: Utf8PathBuf,
        /// The version found in the database.
        found: u64,
        /// The version this build reads.
        expected: u64,
    },
    /// The store folder could not be created or read.
    #[error("store {path}: {source}")]
    Io {
        /// The path involved.
        path: Utf8PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The database opened, but what it holds cannot be a store's.
    #[error("store {path} is damaged: {reason}")]
    Corrupt {
        /// The store folder.
        path: Utf8PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A format 1 store holds a table of a layer above that none of the declarations given
    /// to open ([`OpenOptions::format_1_tables`](crate::OpenOptions::format_1_tables))
    /// claims; it is left as it was.
    #[error(
        "store {path} is format 1 and holds table `{table}`, which no layer given to open claims; open it with cairn, which upgrades it"
    )]
    Format1Unclaimed {
        /// The store folder.
        path: Utf8PathBuf,
        /// The table.
        table: String,
    },
    /// The database could not be opened.
    #[error("store {path}: {source}")]
    Database {
        /// The database file.
        path: Utf8PathBuf,
        /// What redb reported.
        source: StorageFailure,
    },
}

/// Reading an object failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// No such object.
    #[error("{kind} {id} not found")]
    NotFound {
        /// What was looked for.
        kind: ObjectKind,
        /// Its id.
        id: ObjectId,
    },
    /// The stored object does not match its id or cannot be decoded.
    #[error("{kind} {id} is corrupt: {reason}")]
    Corrupt {
        /// The object's kind.
        kind: ObjectKind,
        /// Its id.
        id: ObjectId,
        /// What is wrong.
        reason: String,
        /// The decoding failure `reason` tells of, when one is behind it.
        #[source]
        damage: Option<Box<Damage>>,
    },
    /// Writing the bytes to the caller's sink failed.
    #[error("writing {id}: {source}")]
    Sink {
        /// The blob being written out.
        id: ObjectId,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The database failed.
    #[error(transparent)]
    Storage(#[from] StorageFailure),
}

impl ReadError {
    /// For an object another stored object references: not finding it means the store is
    /// damaged, not that the id is unknown.
    pub fn as_referenced(self) -> ReadError {
        match self {
            ReadError::NotFound { kind, id } => ReadError::Corrupt {
                kind,
                id,
                reason: "referenced but not stored".to_owned(),
                damage: None,
            },
            other => other,
        }
    }

    pub(crate) fn corrupt(
        kind: ObjectKind,
        id: impl Into<ObjectId>,
        reason: impl ToString,
    ) -> Self {
        ReadError::Corrupt {
            kind,
            id: id.into(),
            reason: reason.to_string(),
            damage: None,
        }
    }

    /// Object `id` of `kind` failed to decode with `damage`, which the error keeps.
    pub(crate) fn damaged(kind: ObjectKind, id: impl Into<ObjectId>, damage: Damage) -> Self {
        ReadError::Corrupt {
            kind,
            id: id.into(),
            reason: damage.to_string(),
            damage: Some(Box::new(damage)),
        }
    }
}

/// What decoding a stored object's bytes failed on (the source of a
/// [`ReadError::Corrupt`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Damage {
    /// Its own zstd frame does not decode.
    #[error("zstd: {0}")]
    Zstd(#[source] ZstdError),
    /// The zstd frame of its group does not decode.
    #[error("its group's frame: zstd: {0}")]
    FrameZstd(#[source] ZstdError),
    /// Its group's frame records a size larger than any group's.
    #[error("its group's frame claims {size} bytes")]
    FrameTooLarge {
        /// The size the frame's header records.
        size: u64,
    },
    /// Its group's frame, as stored, is larger than any group's.
    #[error("its group's frame of {len} bytes is too large")]
    StoredFrameTooLarge {
        /// The stored frame's length.
        len: u64,
    },
    /// Its group's frame does not record its decoded size (cairn's always do).
    #[error("its group's frame does not record its size")]
    FrameUnsized,
    /// Its group's frame decodes to another size than its header records.
    #[error("its group's frame decodes to {decoded} bytes, its header says {size}")]
    FrameSize {
        /// What it decoded to.
        decoded: u64,
        /// What its header says.
        size: u64,
    },
    /// Its place in its group's decoded frame lies past the frame's end.
    #[error("its {size} bytes at {start} lie past its group's frame of {frame} bytes")]
    PastFrame {
        /// Its size.
        size: u64,
        /// Where it starts in the decoded frame.
        start: u64,
        /// The decoded frame's size.
        frame: u64,
    },
    /// The bytes found for it hash to another id.
    #[error("content does not match its hash")]
    HashMismatch,
    /// A blob's list of chunks is not the cut the store makes.
    #[error("{chunks} chunks for {size} bytes, not one per {}", crate::CHUNK_BYTES)]
    ChunkCount {
        /// How many chunks the list has.
        chunks: usize,
        /// The blob's size.
        size: u64,
    },
    /// The decoded bytes are not a valid object encoding.
    #[error("{0}")]
    Object(#[source] ObjectError),
}

/// zstd's failure on a stored frame.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ZstdError {
    /// The frame's header cannot be read (shown by the name of zstd's error, as it always
    /// was).
    #[error("ContentSizeError")]
    Header,
    /// The frame's header records a size larger than any tree's.
    #[error("a frame of {size} bytes")]
    TooLarge {
        /// The size it records.
        size: u64,
    },
    /// zstd refused the frame's bytes.
    #[error("{0}")]
    Decode(#[source] std::io::Error),
}

/// Writing objects failed. Nothing of the failed batch is visible.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// Reading the input failed.
    #[error("reading {what}: {source}")]
    Input {
        /// What was being read.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// An object referenced by the batch is not in the store or the batch.
    #[error("{kind} {id} is referenced but not stored")]
    Dangling {
        /// The missing object's kind.
        kind: ObjectKind,
        /// Its id.
        id: ObjectId,
    },
    /// The store was opened read-only.
    #[error("store {path} is open read-only")]
    ReadOnly {
        /// The store folder.
        path: Utf8PathBuf,
    },
    /// The transaction this batch was committed in (with others) failed; nothing of it
    /// was stored.
    #[error("committing the write failed, nothing was stored: {reason}")]
    Commit {
        /// Why.
        reason: String,
    },
    /// A record could not be encoded.
    #[error("encoding {what}: {source}")]
    Encode {
        /// What was encoded.
        what: String,
        /// Why it failed.
        source: serde_json::Error,
    },
    /// An append to a side table's scope found a key there that is not a sequence number.
    #[error(
        "cannot append to side table {table}, scope {scope:?}: it holds a key that is not a sequence number"
    )]
    NotASequence {
        /// The table.
        table: &'static str,
        /// The scope.
        scope: String,
    },
    /// Reading existing state failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The database failed.
    #[error(transparent)]
    Storage(#[from] StorageFailure),
}

/// Turning a name, ref or id prefix into an id failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// Nothing matches.
    #[error("unknown {wanted} '{spec}'")]
    Unknown {
        /// What was given.
        spec: String,
        /// What kind of object was wanted (`snapshot`, `object`).
        wanted: &'static str,
    },
    /// Several objects share the prefix.
    #[error("ambiguous id prefix '{spec}': {}", candidates.iter().map(|(k, id)| format!("{k} {id}")).collect::<Vec<_>>().join(", "))]
    Ambiguous {
        /// The prefix.
        spec: String,
        /// Every match, with its kind.
        candidates: Vec<(ObjectKind, ObjectId)>,
    },
    /// The database failed.
    #[error(transparent)]
    Storage(#[from] StorageFailure),
}

/// A ref operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RefError {
    /// The name breaks the ref name rules.
    #[error("invalid ref name '{name}': {reason}")]
    InvalidName {
        /// The name.
        name: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// No ref by that name.
    #[error("no ref named '{name}'")]
    NotFound {
        /// The name.
        name: String,
    },
    /// The target snapshot is not in the store.
    #[error("snapshot {id} not found")]
    UnknownSnapshot {
        /// The target.
        id: ObjectId,
    },
    /// Writing failed otherwise.
    #[error(transparent)]
    Write(Box<WriteError>),
    /// The database failed.
    #[error(transparent)]
    Storage(#[from] StorageFailure),
}

/// Any error of a side table's owner.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// `fsck` or `gc` could not run to the end (problems found are not errors: see the outcomes).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MaintenanceError {
    /// The store was opened read-only.
    #[error("store {path} is open read-only")]
    ReadOnly {
        /// The store folder.
        path: Utf8PathBuf,
    },
    /// An operation on a worktree's files was interrupted; what it needs must not go.
    #[error(
        "gc stopped, nothing removed: an interrupted operation on worktree {root} must be finished first (run `cairn recover {root}`)"
    )]
    Interrupted {
        /// The worktree.
        root: Utf8PathBuf,
    },
    /// An object needed to decide reachability is damaged or missing.
    #[error("gc stopped, nothing removed: {0}")]
    Unsafe(#[source] ReadError),
    /// The owner of side tables could not say what its records keep alive.
    #[error("gc stopped, nothing removed: {source}")]
    Owner {
        /// The owner's name.
        owner: &'static str,
        /// Why.
        source: BoxError,
    },
    /// The database failed.
    #[error(transparent)]
    Storage(#[from] StorageFailure),
    /// The database could not be opened again after gc compacted it.
    #[error("gc compacted the store, then could not open it again: {0}")]
    Reopen(#[source] Box<OpenError>),
}

/// Any error of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
#[allow(missing_docs)]
pub enum StoreError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error(transparent)]
    Ref(#[from] RefError),
    #[error(transparent)]
    Maintenance(#[from] MaintenanceError),
    #[error(transparent)]
    Object(#[from] ObjectError),
}

/// Converts redb results into [`StorageFailure`].
pub(crate) trait StorageResult<T> {
    fn storage(self) -> Result<T, StorageFailure>;
}

impl<T, E: Into<redb::Error>> StorageResult<T> for Result<T, E> {
    fn storage(self) -> Result<T, StorageFailure> {
        self.map_err(StorageFailure::from)
    }
}

/// What to do about a store of a format newer than this build's.
fn newer_advice(found: &u64, expected: &u64) -> &'static str {
    if found > expected {
        " (a newer cairn wrote it: use that newer cairn)"
    } else {
        ""
    }
}
