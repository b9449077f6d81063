//! What can go wrong with a remote; every error names the remote and the id or ref.

use cas::{ObjectId, SnapshotId};

use crate::layout::LayoutError;
use crate::url::UrlError;

/// A remote operation's failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// No remote of that name is configured.
    #[error("no remote named {name} (cairn remote add {name} URL)")]
    Unknown {
        /// The name.
        name: String,
    },
    /// `remote add` of a name that exists.
    #[error("remote {name} exists already ({url})")]
    Exists {
        /// The name.
        name: String,
        /// Where it points.
        url: String,
    },
    /// A remote name, URL or record that cannot be one.
    #[error(transparent)]
    Invalid(#[from] InvalidRemote),
    /// The engine refused, failed or could not be reached (after bounded retries).
    #[error("remote {remote}: {source}")]
    Transport {
        /// The remote.
        remote: String,
        /// What the object store said.
        #[source]
        source: Box<object_store::Error>,
    },
    /// Reading objects failed (after bounded retries).
    #[error("remote {remote}: reading {what}: {source}")]
    Read {
        /// The remote.
        remote: String,
        /// The objects and the pack.
        what: String,
        /// What the object store said.
        #[source]
        source: Box<object_store::Error>,
    },
    /// A credentials file could not be read.
    #[error("remote {remote}: credentials: {}: {source}", path.display())]
    Credentials {
        /// The remote.
        remote: String,
        /// The file.
        path: std::path::PathBuf,
        /// Why (the INI reader's error: its crate is not part of this interface).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Bytes on the remote that are not what their name or index claims.
    #[error("remote {remote}: {what} is damaged: {reason}")]
    Corrupt {
        /// The remote.
        remote: String,
        /// The object id, pack or key.
        what: String,
        /// What is wrong.
        reason: String,
        /// The failure `reason` tells of, when there is one (boxed: the error stays small).
        #[source]
        cause: Option<Box<CorruptCause>>,
    },
    /// A snapshot the remote does not hold (or not whole).
    #[error("snapshot {id} is not on remote {remote}")]
    NotOnRemote {
        /// The remote.
        remote: String,
        /// The snapshot.
        id: SnapshotId,
    },
    /// A ref the remote does not have.
    #[error("no ref {name}@{remote}")]
    NoSuchRef {
        /// The remote.
        remote: String,
        /// The ref.
        name: String,
    },
    /// The engine does not enforce conditional writes, so refs there could be lost.
    #[error(
        "remote {remote} does not enforce conditional writes (found by `remote add`), so refs cannot be updated there safely; pushing snapshots still works"
    )]
    NoConditionalWrites {
        /// The remote.
        remote: String,
    },
    /// The ref holds another value than the caller expected (a refusal, not a failure).
    #[error("ref {name}@{remote} holds {}, not {}", show(.current), show(.expected))]
    RefMoved {
        /// The remote.
        remote: String,
        /// The ref.
        name: String,
        /// Its value now.
        current: Option<SnapshotId>,
        /// What the caller expected.
        expected: Option<SnapshotId>,
    },
    /// What a push was asked to send cannot be sent.
    #[error("cannot push to remote {remote}: {reason}")]
    Unpushable {
        /// The remote.
        remote: String,
        /// Why.
        reason: String,
        /// What a pack cannot hold, when that is what `reason` tells of.
        #[source]
        layout: Option<Box<LayoutError>>,
    },
    /// A remote written by a newer cairn, or something else at its prefix.
    #[error("remote {remote}: {reason}")]
    Format {
        /// The remote.
        remote: String,
        /// Why.
        reason: String,
    },
    /// The local store failed.
    #[error(transparent)]
    Store(#[from] LocalStoreError),
}

/// What damaged bytes on a remote failed on (the source of a [`RemoteError::Corrupt`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CorruptCause {
    /// A pack or index that breaks the layout.
    #[error("{0}")]
    Layout(#[from] LayoutError),
    /// A record (a ref entry, a gc record) that does not decode.
    #[error("{0}")]
    Record(#[from] serde_json::Error),
    /// An object whose bytes are not the object its id names.
    #[error("{0}")]
    Object(#[from] cas::VerifyError),
    /// A payload zstd does not decode.
    #[error("{0}")]
    Zstd(#[source] std::io::Error),
    /// A large blob whose chunks, as stored, do not make it.
    #[error("{0}")]
    Chunks(#[from] cas::ReadError),
}

/// Why a remote's name, URL, record or folder cannot be a remote's; each names it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidRemote {
    /// A URL that is not a remote's.
    #[error(transparent)]
    Url(#[from] UrlError),
    /// A name that breaks the rules of remote names.
    #[error(
        "{name:?}: a remote name is 1 to 64 of A-Z, a-z, 0-9, '.', '_', '-', not starting with '-' or '.'"
    )]
    Name {
        /// The name.
        name: String,
    },
    /// A ref name that breaks the rules of ref names, for a remote's ref.
    #[error("remote {remote}: {source}")]
    RefName {
        /// The remote.
        remote: String,
        /// The rule it breaks.
        #[source]
        source: cas::RefError,
    },
    /// A remote's configuration record that does not decode.
    #[error("remote {remote}: unreadable record: {source}")]
    Record {
        /// The remote.
        remote: String,
        /// Why it does not decode.
        #[source]
        source: serde_json::Error,
    },
    /// A dependency layer key that is not 64 hex digits, so names no record.
    #[error("remote {remote}: {key:?} is not a dependency layer key (64 hex digits)")]
    LayerKey {
        /// The remote.
        remote: String,
        /// The key.
        key: String,
    },
    /// A `file://` remote whose folder cannot be made.
    #[error("remote {remote}: cannot make the folder {path}: {source}")]
    Folder {
        /// The remote.
        remote: String,
        /// The folder.
        path: camino::Utf8PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl From<UrlError> for RemoteError {
    fn from(e: UrlError) -> Self {
        RemoteError::Invalid(e.into())
    }
}

/// A failure of the local store during a remote operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalStoreError {
    /// Reading.
    #[error(transparent)]
    Read(#[from] cas::ReadError),
    /// Writing.
    #[error(transparent)]
    Write(#[from] cas::WriteError),
    /// The database.
    #[error(transparent)]
    Storage(#[from] cas::StorageFailure),
    /// An attestation record of the store that is not what its key says.
    #[error(transparent)]
    Attestation(#[from] cas::AttestationReadError),
}

impl From<cas::ReadError> for RemoteError {
    fn from(e: cas::ReadError) -> Self {
        RemoteError::Store(e.into())
    }
}
impl From<cas::WriteError> for RemoteError {
    fn from(e: cas::WriteError) -> Self {
        RemoteError::Store(e.into())
    }
}
impl From<cas::AttestationReadError> for RemoteError {
    fn from(e: cas::AttestationReadError) -> Self {
        RemoteError::Store(e.into())
    }
}
impl From<cas::StorageFailure> for RemoteError {
    fn from(e: cas::StorageFailure) -> Self {
        RemoteError::Store(e.into())
    }
}

fn show(id: &Option<SnapshotId>) -> String {
    match id {
        Some(id) => id.to_string(),
        None => "nothing".to_owned(),
    }
}

impl RemoteError {
    pub(crate) fn corrupt(remote: &str, what: impl ToString, reason: impl ToString) -> Self {
        RemoteError::Corrupt {
            remote: remote.to_owned(),
            what: what.to_string(),
            reason: reason.to_string(),
            cause: None,
        }
    }

    /// `what` on `remote` is damaged: `reason` says how, and `cause` is what failed on it.
    pub(crate) fn damaged(
        remote: &str,
        what: impl ToString,
        reason: String,
        cause: impl Into<CorruptCause>,
    ) -> Self {
        RemoteError::Corrupt {
            remote: remote.to_owned(),
            what: what.to_string(),
            reason,
            cause: Some(Box::new(cause.into())),
        }
    }

    /// `what` on `remote` does not decode as `cause` says (its whole reason).
    pub(crate) fn undecodable(
        remote: &str,
        what: impl ToString,
        cause: impl Into<CorruptCause>,
    ) -> Self {
        let cause = cause.into();
        RemoteError::damaged(remote, what, cause.to_string(), cause)
    }

    /// A push to `remote` cannot pack what it was asked to send.
    pub(crate) fn unpackable(remote: &str, layout: LayoutError) -> Self {
        RemoteError::Unpushable {
            remote: remote.to_owned(),
            reason: layout.to_string(),
            layout: Some(Box::new(layout)),
        }
    }

    pub(crate) fn object(remote: &str, id: ObjectId, reason: impl ToString) -> Self {
        RemoteError::corrupt(remote, format!("object {id}"), reason)
    }

    /// The code a face reports (`--json` errors).
    pub fn code(&self) -> &'static str {
        match self {
            RemoteError::Unknown { .. } => "unknown_remote",
            RemoteError::Exists { .. } => "remote_exists",
            RemoteError::Invalid(_) => "invalid_remote",
            RemoteError::Transport { .. } | RemoteError::Read { .. } if self.is_timeout() => {
                "remote_timeout"
            }
            RemoteError::Transport { .. } | RemoteError::Read { .. } => "remote_failed",
            RemoteError::Credentials { .. } => "remote_credentials",
            RemoteError::Corrupt { .. } => "remote_corrupt",
            RemoteError::NotOnRemote { .. } => "not_on_remote",
            RemoteError::NoSuchRef { .. } => "unknown_ref",
            RemoteError::NoConditionalWrites { .. } => "no_conditional_writes",
            RemoteError::RefMoved { .. } => "ref_moved",
            RemoteError::Unpushable { .. } => "cannot_push",
            RemoteError::Format { .. } => "remote_format",
            RemoteError::Store(_) => "store_failed",
        }
    }

    /// True for what a catalog of the remote's new indexes only may cause: an object or
    /// snapshot not found where or as its indexes say, a pack that is gone. Listing every
    /// index and trying again settles it.
    pub fn may_be_stale_catalog(&self) -> bool {
        match self {
            RemoteError::NotOnRemote { .. } | RemoteError::Corrupt { .. } => true,
            RemoteError::Transport { source, .. } | RemoteError::Read { source, .. } => {
                matches!(**source, object_store::Error::NotFound { .. })
            }
            _ => false,
        }
    }

    /// True for bad usage or input (exit 2): an unknown remote, id or ref.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            RemoteError::Unknown { .. }
                | RemoteError::Exists { .. }
                | RemoteError::Invalid(_)
                | RemoteError::NotOnRemote { .. }
                | RemoteError::NoSuchRef { .. }
                | RemoteError::Unpushable { .. }
        )
    }

    /// True for an engine that did not answer in time (after bounded retries): a timeout
    /// somewhere in what the object store said.
    pub fn is_timeout(&self) -> bool {
        let (RemoteError::Transport { source, .. } | RemoteError::Read { source, .. }) = self
        else {
            return false;
        };
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(source.as_ref());
        while let Some(e) = cause {
            let http = e.downcast_ref::<object_store::client::HttpError>();
            let io = e.downcast_ref::<std::io::Error>();
            if http
                .is_some_and(|h| matches!(h.kind(), object_store::client::HttpErrorKind::Timeout))
                || io.is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
            {
                return true;
            }
            cause = e.source();
        }
        false
    }

    /// True for a refusal (exit 1): a ref that moved.
    pub fn is_refusal(&self) -> bool {
        matches!(self, RemoteError::RefMoved { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::client::{HttpError, HttpErrorKind};

    fn transport(kind: HttpErrorKind) -> RemoteError {
        let source = object_store::Error::Generic {
            store: "S3",
            source: Box::new(HttpError::new(kind, std::io::Error::other("no answer"))),
        };
        RemoteError::Transport {
            remote: "origin".into(),
            source: Box::new(source),
        }
    }

    /// A remote that did not answer in time has its own code (a server answers 504 for it,
    /// 502 for any other failure of the remote).
    #[test]
    fn a_remote_that_timed_out_is_told_from_one_that_failed() {
        assert_eq!(transport(HttpErrorKind::Timeout).code(), "remote_timeout");
        assert_eq!(transport(HttpErrorKind::Connect).code(), "remote_failed");
        let timed_out = RemoteError::Read {
            remote: "origin".into(),
            what: "pack p".into(),
            source: Box::new(object_store::Error::Generic {
                store: "S3",
                source: Box::new(std::io::Error::from(std::io::ErrorKind::TimedOut)),
            }),
        };
        assert!(timed_out.is_timeout());
        assert_eq!(timed_out.code(), "remote_timeout");
    }
}
