//! Giving back the space of a write transaction that ran out of it.
//!
//! redb does not: after an I/O error it skips the transaction's abort, which would have cut
//! the file back (`rollback_growth`), and fails every later call of that handle; the next open
//! then takes the grown length as the database's. On a full file system that space stays
//! taken for good, since even `gc`'s or `compact`'s commit then fails, allocating pages in
//! the file's holes.
//!
//! Everything past the length the file had when the failed transaction began is that
//! transaction's alone: redb grows the file only inside a write transaction, one at a time,
//! and a writable store is held by one process. So, while this process still holds the file,
//! those bytes are punched out (the file keeps its length, as redb's layout expects). That is
//! safe even if the commit reached the disk before the error came back: redb commits with
//! checksums (cairn never asks for two-phase commit), so the next open finds that commit's
//! pages zeroed and falls back to the one before it, which is what the caller was told (the
//! write failed). Then the database is opened again, so that redb repairs it, and shrinks
//! the file, while there is room to.

use camino::Utf8Path;
use redb::Database;
use rustix::fs::FallocateFlags;

use super::tables::DATABASE_FILE;

/// Gives back what lies past `len_before` in the database file of the store at `root`;
/// call it before closing the database, which holds the file meanwhile.
pub(super) fn give_back(root: &Utf8Path, len_before: u64) {
    match punch_tail(&root.join(DATABASE_FILE), len_before) {
        Ok(0) => {}
        Ok(bytes) => {
            tracing::info!(store = %root, bytes, "gave back the space of a write that ran out of it");
        }
        Err(e) => {
            tracing::warn!(store = %root, "could not give back the space of a failed write: {e}");
        }
    }
}

/// Opens the closed database once, so that redb repairs it (the failed write left it marked
/// for that) and shrinks the file while there is room; else the next open does.
pub(super) fn repair(root: &Utf8Path) {
    let path = root.join(DATABASE_FILE);
    let repaired =
        super::contain::quietly(|| Database::builder().create(path.as_std_path()).map(drop));
    match repaired {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(store = %root, "repairing after a failed write: {e}"),
        Err(e) => tracing::warn!(store = %root, "repairing after a failed write: {e}"),
    }
}

/// Deallocates the file's bytes past `len`, keeping its length; returns how many there were.
fn punch_tail(path: &Utf8Path, len: u64) -> std::io::Result<u64> {
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    let end = file.metadata()?.len();
    if end <= len {
        return Ok(0);
    }
    rustix::fs::fallocate(
        &file,
        FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
        len,
        end - len,
    )?;
    Ok(end - len)
}
