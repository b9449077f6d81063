//! The store: one folder holding a redb database of blobs, trees, snapshots, refs, and the
//! side tables of the layers above.

mod attested;
mod batch;
mod blob;
mod chunks;
mod contain;
mod error;
mod frame;
mod fsck;
#[doc(hidden)]
pub mod fuzzing;
mod gc;
mod group;
mod handle;
mod mark;
mod open;
mod options;
mod owner;
mod reader;
mod reclaim;
mod side;
mod stream;
mod tables;
mod transfer;
mod upgrade;
mod versions;

pub use attested::{ATTESTATION_SIGNATURES, ATTESTATIONS, AttestationReadError};
pub use batch::{WriteBatch, WriteOutcome, validate_ref_name};
pub use blob::{CHUNK_BYTES, PreparedBlob};
pub use chunks::{BlobChunks, Chunk};
pub use error::{
    BoxError, Damage, MaintenanceError, OpenError, ReadError, RefError, ResolveError,
    StorageFailure, StoreError, WriteError, ZstdError,
};
pub(crate) use frame::receive as receive_frame;
pub use frame::{Frame, FrameMember, FrameRef, MAX_FRAME_BYTES, ReceivedFrame};
pub use fsck::{StoreFsckOptions, StoreFsckOutcome};
pub use gc::{Retained, StoreGcOptions, StoreGcOutcome, store_bytes};
pub use handle::Store;
pub use options::{InvalidLockTimeout, LOCK_TIMEOUT_VAR, OpenOptions};
pub use owner::{Checked, HistoryEntry, Keeper, Problem, Roots, SideOwner};
pub use reader::Reader;
pub use side::{
    JOURNALS, KeyValue, PROMISED, PRUNED, Rewrite, ScopedEntry, SideKey, SideTable, sequence_key,
    sequence_of,
};
pub use tables::{DATABASE_FILE, FORMAT_VERSION};
pub use transfer::{BlobPayload, BlobSource, PayloadError};
pub use upgrade::{Format1Keys, Format1Table};
