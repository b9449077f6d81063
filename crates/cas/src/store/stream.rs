//! Storing a blob streamed from a reader, in chunks, with memory bounded by a few of them.

use super::batch::*;
use super::blob::{Body, CHUNK_BYTES, PreparedBlob};
use super::error::*;
use super::handle::Store;
use crate::id::BlobId;

/// A streamed blob's chunks are committed in batches of about this many stored bytes:
/// what a stream holds in memory, besides the chunk it reads.
const STREAM_BATCH_BYTES: u64 = 16 << 20;

impl Store {
    /// The blob of everything `input` reads, and how many bytes that was: stored as
    /// [`Store::put_blob_stream`] stores it if `store_it`, else only hashed (a dry run).
    /// Memory stays bounded by a few chunks either way.
    pub fn blob_of_stream(
        &self,
        input: impl std::io::Read,
        what: &str,
        store_it: bool,
    ) -> Result<(BlobId, u64), WriteError> {
        let mut counted = Counted {
            inner: input,
            bytes: 0,
        };
        let id = if store_it {
            self.put_blob_stream(&mut counted, what)?
        } else {
            let mut hasher = blake3::Hasher::new();
            hasher
                .update_reader(&mut counted)
                .map_err(|source| WriteError::Input {
                    what: what.to_owned(),
                    source,
                })?;
            BlobId::from_bytes(*hasher.finalize().as_bytes())
        };
        Ok((id, counted.bytes))
    }

    /// Streams a blob of any size from `input` with memory bounded by a few chunks.
    ///
    /// Chunks are committed in batches of about 16 MiB; the blob's own entry
    /// goes in last, so an interrupted call leaves only unreferenced chunks, which `gc`
    /// removes.
    pub fn put_blob_stream(
        &self,
        input: impl std::io::Read,
        what: &str,
    ) -> Result<BlobId, WriteError> {
        let (blob, mut rest) = self.stream_chunks(input, what)?;
        let id = rest.add_blob(blob);
        self.write(&rest)?;
        Ok(id)
    }

    /// Like [`Store::put_blob_stream`], but the blob's own entry is left to the caller: its
    /// chunks are stored (none of them named by anything yet) and the blob comes back ready
    /// to join the caller's batch, which records it with whatever names it (a tree, or
    /// nothing if its id is not the one expected). A blob of at most [`CHUNK_BYTES`]
    /// comes back whole, nothing of it stored.
    pub fn prepare_blob_stream(
        &self,
        input: impl std::io::Read,
        what: &str,
    ) -> Result<PreparedBlob, WriteError> {
        let (blob, rest) = self.stream_chunks(input, what)?;
        if !rest.is_empty() {
            self.write(&rest)?;
        }
        Ok(blob)
    }

    /// Reads `input` a chunk at a time, committing chunks the store lacks in batches of
    /// about 16 MiB: the blob, and the batch of chunks not written yet.
    fn stream_chunks(
        &self,
        mut input: impl std::io::Read,
        what: &str,
    ) -> Result<(PreparedBlob, WriteBatch), WriteError> {
        let read_err = |source| WriteError::Input {
            what: what.to_owned(),
            source,
        };
        let mut buf = vec![0u8; CHUNK_BYTES];
        let mut next = vec![0u8; CHUNK_BYTES];
        let mut n = read_full(&mut input, &mut buf).map_err(read_err)?;
        let mut after = if n == CHUNK_BYTES {
            read_full(&mut input, &mut next).map_err(read_err)?
        } else {
            0
        };
        if after == 0 {
            // One chunk or less: the blob is its own chunk, its id the content's.
            return Ok((PreparedBlob::new(&buf[..n]), WriteBatch::new()));
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
            if batch.stored_bytes() >= STREAM_BATCH_BYTES {
                self.write(&batch)?;
                batch = WriteBatch::new();
            }
            std::mem::swap(&mut buf, &mut next);
            n = after;
            after = if n == CHUNK_BYTES {
                read_full(&mut input, &mut next).map_err(read_err)?
            } else {
                0
            };
        }
        let id = BlobId::from_bytes(*hasher.finalize().as_bytes());
        let body = Body::Chunked {
            chunks,
            parts: Vec::new(),
        };
        Ok((PreparedBlob { id, size, body }, batch))
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

/// Counts the bytes read through it.
struct Counted<R> {
    inner: R,
    bytes: u64,
}

impl<R: std::io::Read> std::io::Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
}
