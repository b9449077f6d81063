//! The worktree manager's record decoders, reachable from the fuzz targets in `fuzz/` (a
//! fuzz target is another crate). Not an API: each function is exactly what a read of that
//! record does.

use camino::Utf8Path;

use crate::journal::Journal;
use worktree_scope::dirstate::DirState;

/// Why an intent journal did not decode, or did not encode again.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// It does not decode.
    #[error(transparent)]
    Decode(#[from] worktree_registry::RegistryError),
    /// The decoded journal does not encode.
    #[error(transparent)]
    Encode(#[from] cas::WriteError),
}

/// Decodes an intent journal as `recover` does, and encodes it again as an operation
/// writes it.
pub fn reencode_journal(bytes: &[u8]) -> Result<Vec<u8>, JournalError> {
    let journal = Journal::decode(Utf8Path::new("/fuzz"), bytes)?;
    Ok(journal.encode()?)
}

/// What the worktree manager keeps of a decoded directory record, for checking.
#[derive(Debug)]
pub struct DirRecord {
    /// True if encoding the decoded record again and decoding that gives the same state.
    pub round_trips: bool,
    /// Its listing's names, in stored order.
    pub names: Vec<Vec<u8>>,
}

/// Decodes a directory record of the stat cache (`None`: not trusted, read again) as a
/// capture does.
pub fn decode_dir_record(bytes: &[u8]) -> Option<DirRecord> {
    let state = DirState::decode(bytes)?;
    Some(DirRecord {
        round_trips: state
            .encode()
            .and_then(|again| DirState::decode(&again))
            .as_ref()
            == Some(&state),
        names: state.children().iter().map(|(n, _)| n.to_vec()).collect(),
    })
}

/// A directory record holding `body` (compressed, checksummed), so a fuzzer reaches the
/// parser behind the frame and the checksum.
pub fn seal_dir_record(body: &[u8]) -> Vec<u8> {
    worktree_scope::dirstate::seal_body(body)
}

/// Decodes a `fs.worktrees` side-table value (JSON), as [`worktree_registry::RegistryRead::worktree`] does.
pub fn decode_worktree_record(
    bytes: &[u8],
) -> Result<worktree_registry::WorktreeRecord, worktree_registry::RegistryError> {
    worktree_registry::decode_worktree(Utf8Path::new("/fuzz"), bytes)
}

/// Decodes a `fs.oplog` side-table value (JSON) stored under sequence number 1, as
/// [`worktree_registry::RegistryRead::ops`] does.
pub fn decode_op_record(
    bytes: &[u8],
) -> Result<worktree_registry::OpRecord, worktree_registry::RegistryError> {
    worktree_registry::decode_op(Utf8Path::new("/fuzz"), &cas::sequence_key(1), bytes)
}
