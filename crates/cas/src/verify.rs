//! Objects received from elsewhere (`cairn serve`'s object uploads): each is checked against
//! the id it claims before it can join a [`WriteBatch`], so a store only ever holds what
//! its ids name, under the tree rules.

use crate::id::{BlobId, ObjectId};
use crate::object::{ObjectError, ObjectKind, Snapshot, Tree};
use crate::store::{
    BlobPayload, FrameMember, PayloadError, PreparedBlob, ReceivedFrame, WriteBatch,
};

/// An object whose bytes were checked against its claimed id; see [`verify_object`].
#[derive(Debug, Clone)]
pub enum VerifiedObject {
    /// File content, hashed and compressed.
    Blob(PreparedBlob),
    /// A decoded tree.
    Tree(Tree),
    /// A decoded snapshot.
    Snapshot(Snapshot),
}

impl VerifiedObject {
    /// Its id (the one it claimed).
    pub fn id(&self) -> ObjectId {
        match self {
            VerifiedObject::Blob(b) => b.id().into(),
            VerifiedObject::Tree(t) => t.id().into(),
            VerifiedObject::Snapshot(s) => s.id().into(),
        }
    }
}

/// Why received bytes are not the object they claim to be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// Not a canonical tree or snapshot encoding (or a tree breaking the tree rules).
    #[error("{kind} {id}: {source}")]
    Invalid {
        /// The kind it claimed.
        kind: ObjectKind,
        /// The id it claimed.
        id: ObjectId,
        /// What is wrong with the bytes.
        source: ObjectError,
    },
    /// A blob payload that does not decode to the size its record gives.
    #[error("blob {id}: {reason}")]
    BadPayload {
        /// The id it claimed.
        id: ObjectId,
        /// What is wrong with it.
        reason: String,
    },
    /// The bytes are a valid object, but of another id.
    #[error("{kind:?} {claimed}: its bytes hash to {actual}")]
    HashMismatch {
        /// The kind it claimed.
        kind: ObjectKind,
        /// The id it claimed.
        claimed: ObjectId,
        /// The id of the bytes.
        actual: ObjectId,
    },
}

impl VerifyError {
    /// The id the refused bytes claimed.
    pub fn id(&self) -> ObjectId {
        match self {
            VerifyError::Invalid { id, .. } | VerifyError::BadPayload { id, .. } => *id,
            VerifyError::HashMismatch { claimed, .. } => *claimed,
        }
    }
}

/// Checks that `data` is an object of `kind` whose id is `claimed`: a blob's BLAKE3, or a
/// tree or snapshot decoded under every rule of [`Tree::decode`] and [`Snapshot::decode`]
/// (which accept only canonical bytes) and hashing to `claimed`. References to other
/// objects are checked when the batch is written.
pub fn verify_object(
    kind: ObjectKind,
    claimed: ObjectId,
    data: &[u8],
) -> Result<VerifiedObject, VerifyError> {
    let invalid = |source| VerifyError::Invalid {
        kind,
        id: claimed,
        source,
    };
    let (actual, object) = match kind {
        ObjectKind::Blob => {
            // Hashed first: content that is not what it claims is never compressed.
            let id = BlobId::of(data);
            let blob = (ObjectId::from(id) == claimed).then(|| PreparedBlob::with_id(id, data));
            (id.into(), blob.map(VerifiedObject::Blob))
        }
        ObjectKind::Tree => {
            let tree = Tree::decode(data).map_err(invalid)?;
            (tree.id().into(), Some(VerifiedObject::Tree(tree)))
        }
        ObjectKind::Snapshot => {
            let snapshot = Snapshot::decode(data).map_err(invalid)?;
            (
                snapshot.id().into(),
                Some(VerifiedObject::Snapshot(snapshot)),
            )
        }
    };
    match object {
        Some(object) if actual == claimed => Ok(object),
        _ => Err(VerifyError::HashMismatch {
            kind,
            claimed,
            actual,
        }),
    }
}

impl WriteBatch {
    /// Adds an object checked by [`verify_object`]; returns its id.
    pub fn add_verified(&mut self, object: VerifiedObject) -> ObjectId {
        match object {
            VerifiedObject::Blob(b) => self.add_blob(b).into(),
            VerifiedObject::Tree(t) => self.add_tree(t).into(),
            VerifiedObject::Snapshot(s) => self.add_snapshot(s).into(),
        }
    }
}

/// Checks that a received blob `payload` is the content `claimed` names (see
/// [`PreparedBlob::from_payload`]).
pub fn verify_blob_payload(
    claimed: BlobId,
    payload: BlobPayload,
) -> Result<PreparedBlob, VerifyError> {
    PreparedBlob::from_payload(claimed, payload).map_err(|e| match e {
        PayloadError::Bad(reason) => VerifyError::BadPayload {
            id: claimed.into(),
            reason,
        },
        PayloadError::Mismatch(actual) => VerifyError::HashMismatch {
            kind: ObjectKind::Blob,
            claimed: claimed.into(),
            actual: actual.into(),
        },
    })
}

/// Checks that a received group frame `stored` (at most
/// [`MAX_FRAME_BYTES`](crate::MAX_FRAME_BYTES) stored and decoded) holds each of `members`
/// at its place, by id; the error names the first member refused (or the first member,
/// for a frame that does not decode). See [`ReceivedFrame`] for what it becomes.
pub fn verify_frame(
    stored: Vec<u8>,
    members: Vec<FrameMember>,
) -> Result<ReceivedFrame, VerifyError> {
    // Told as text: a `VerifyError` is `Clone` and `Eq`, which zstd's I/O error is not.
    crate::store::receive_frame(stored, members).map_err(|(id, damage)| VerifyError::BadPayload {
        id: id.into(),
        reason: damage.to_string(),
    })
}
