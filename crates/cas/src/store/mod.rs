//! The store: one folder holding a redb database of blobs, trees, snapshots, refs, the
//! worktree registry and the op log.

mod batch;
mod blob;
mod contain;
mod error;
mod fsck;
#[doc(hidden)]
pub mod fuzzing;
mod gc;
mod group;
mod handle;
mod options;
mod reader;
mod reclaim;
mod registry;
mod tables;
mod versions;

pub use batch::{WriteBatch, WriteOutcome, validate_ref_name};
pub use blob::{CHUNK_BYTES, PreparedBlob};
pub use error::{
    Error, MaintenanceError, OpenError, ReadError, RefError, RegistryError, ResolveError,
    StorageFailure, WriteError,
};
pub use fsck::{FsckOptions, FsckOutcome, Problem};
pub use gc::{GcOptions, GcOutcome};
pub use handle::Store;
pub use options::{InvalidLockTimeout, LOCK_TIMEOUT_VAR, OpenOptions};
pub use reader::{FileStateEntry, Reader};
pub use registry::{Checkpoint, DirIdentity, OpRecord, Task, WorktreeKind, WorktreeRecord};
pub use tables::{DATABASE_FILE, FORMAT_VERSION};
