//! Objects moved whole between stores (`cairn serve`'s `/v1/objects/*`): which of them the
//! store lacks, reading them back in their canonical encoding, and storing received ones,
//! each verified against the id it claims.

use cas::{ObjectId, ObjectKind, ReadError, StorageFailure, VerifyError, WriteBatch, WriteError};

use crate::engine::Engine;
use crate::error::Error;
use crate::store::Access;

/// Why moving objects failed, naming the object where one is to blame. The message is the
/// failing layer's own.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransferError {
    /// The store could not be had.
    #[error(transparent)]
    Store(Box<Error>),
    /// Reading the store failed before any object was looked at.
    #[error(transparent)]
    Storage(#[from] StorageFailure),
    /// Looking up or reading one object failed.
    #[error("{source}")]
    Read {
        /// Its kind.
        kind: ObjectKind,
        /// Its id.
        id: ObjectId,
        /// What failed.
        source: ReadError,
    },
    /// Received bytes are not the object they claim to be (the error names it).
    #[error(transparent)]
    Verify(#[from] VerifyError),
    /// Storing the received objects failed; nothing was stored (a dangling reference names
    /// the object missing).
    #[error(transparent)]
    Write(#[from] WriteError),
}

impl From<Error> for TransferError {
    fn from(e: Error) -> Self {
        TransferError::Store(Box::new(e))
    }
}

fn read_error(kind: ObjectKind, id: ObjectId) -> impl Fn(ReadError) -> TransferError {
    move |source| TransferError::Read { kind, id, source }
}

fn present(reader: &cas::Reader, kind: ObjectKind, id: ObjectId) -> Result<bool, TransferError> {
    match kind {
        ObjectKind::Blob => reader.has_blob(id.as_blob()),
        ObjectKind::Tree => reader.has_tree(id.as_tree()),
        ObjectKind::Snapshot => reader.has_snapshot(id.as_snapshot()),
    }
    .map_err(|e| read_error(kind, id)(e.into()))
}

impl Engine {
    /// The positions in `objects` of those the store lacks, in order.
    pub fn lacking_objects(
        &self,
        objects: &[(ObjectKind, ObjectId)],
    ) -> Result<Vec<usize>, TransferError> {
        let store = self.store(Access::Write)?;
        let reader = store.reader()?;
        let mut lacking = Vec::new();
        for (at, &(kind, id)) in objects.iter().enumerate() {
            if !present(&reader, kind, id)? {
                lacking.push(at);
            }
        }
        Ok(lacking)
    }

    /// Each of `objects` in its canonical encoding (a blob's content), or `None` if the
    /// store lacks it.
    pub fn read_objects(
        &self,
        objects: &[(ObjectKind, ObjectId)],
    ) -> Result<Vec<Option<Vec<u8>>>, TransferError> {
        let store = self.store(Access::Write)?;
        let reader = store.reader()?;
        let mut out = Vec::with_capacity(objects.len());
        for &(kind, id) in objects {
            if !present(&reader, kind, id)? {
                out.push(None);
                continue;
            }
            let data = match kind {
                ObjectKind::Blob => reader.blob(id.as_blob()),
                ObjectKind::Tree => reader.tree(id.as_tree()).map(|t| t.encode()),
                ObjectKind::Snapshot => reader.snapshot(id.as_snapshot()).map(|s| s.encode()),
            }
            .map_err(read_error(kind, id))?;
            out.push(Some(data));
        }
        Ok(out)
    }

    /// Verifies every received object (its id from its bytes; a tree or snapshot decoded
    /// under the tree rules; what each references stored or among them), then stores them
    /// in one transaction. Any failure stores nothing. Returns how many were new.
    pub fn store_objects(
        &self,
        objects: impl IntoIterator<Item = (ObjectKind, ObjectId, Vec<u8>)>,
    ) -> Result<u64, TransferError> {
        let mut batch = WriteBatch::new();
        for (kind, claimed, data) in objects {
            batch.add_verified(cas::verify_object(kind, claimed, &data)?);
        }
        let store = self.store(Access::Write)?;
        let written = store.write(&batch)?;
        Ok(written.blobs_written + written.trees_written + written.snapshots_written)
    }
}
