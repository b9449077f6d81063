//! [`Store`]: an open store, and writing to it (opening and closing it is `open`; blobs
//! streamed from a reader are `stream`).

use std::collections::HashSet;
use std::sync::Arc;

use camino::{Utf8Path, Utf8PathBuf};
use redb::{
    Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, Table, WriteTransaction,
};

use super::blob::{Body, Codec, Location, LogWriter};
use super::contain::{Health, open_held};
use super::error::StorageResult;
use super::frame::Frame;
use super::reader::{TREE_IN_LOG, TREE_ZSTD};
use super::tables::*;

use super::blob::PreparedBlob;
use super::error::*;
use crate::id::{BlobId, SnapshotId, TreeId};
use crate::object::Tree;
use std::sync::Mutex;

use crate::object::ObjectKind;

use super::batch::*;
use super::group::{Leader, Pending};
use super::options::*;
use super::reader::*;
use super::side::{PROMISED, SideDef, SideTable};
use std::sync::PoisonError;

/// Trees whose encoding is larger than this are stored zstd-compressed.
const TREE_COMPRESS_THRESHOLD: usize = 512;

/// Tree records larger than this (compressed) go to the blob log: redb would round such a
/// value up to a run of pages, a power of two long.
const TREE_LOG_THRESHOLD: usize = 2 << 10;
/// The database, opened for writing or read-only; closed only while the store is dropped.
pub(super) enum Db {
    Write(Database),
    Read(redb::ReadOnlyDatabase),
    Closed,
}

impl Db {
    pub(super) fn begin_read(&self) -> Result<redb::ReadTransaction, redb::TransactionError> {
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
    pub(super) db: Db,
    pub(super) root: Utf8PathBuf,
    /// Every call into redb runs through it (see `contain`).
    pub(super) health: Arc<Health>,
    pub(super) segment_bytes: u64,
    pub(super) group: super::group::Group,
    pub(super) versions: super::versions::Versions,
    /// Set when a write transaction ran out of space: the database file's length when it
    /// began, so that what it took is given back when the store closes (see `reclaim`).
    pub(super) reclaim_past: std::sync::Mutex<Option<u64>>,
    /// How it was opened, to open it again after such a write.
    pub(super) options: Box<OpenOptions>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl Store {
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

    pub(super) fn open_reader(&self) -> Result<Reader, StorageFailure> {
        let txn = self.db.begin_read().storage()?;
        Ok(Reader {
            health: Arc::clone(&self.health),
            blobs: txn.open_table(BLOBS).storage()?,
            segments: txn.open_table(SEGMENTS).storage()?,
            trees: txn.open_table(TREES).storage()?,
            snapshots: txn.open_table(SNAPSHOTS).storage()?,
            refs: txn.open_table(REFS).storage()?,
            sides: super::side::SideTables::open(&txn)?,
            segment_bytes: self.segment_bytes,
            frames: super::frame::FrameCache::default(),
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
        self.versions.bump(batch.side_scopes());
        let result = self.health.run(|| {
            let frames = self.frames_for(batch)?;
            if batch.held_bytes() > super::group::GROUP_MAX_BYTES {
                self.write_alone(batch, &frames)
            } else {
                self.write_grouped(batch, frames)
            }
        });
        self.versions.bump(batch.side_scopes());
        result
    }

    /// The version of `scope` of side table `table` in this store: every write that
    /// touches it changes it. A copy of the scope read, or written, while this returned `v`
    /// is still what the store holds while it returns `v`, provided its writers take turns
    /// (as `fs_manager`'s operations do, holding the worktree).
    pub fn side_version(&self, table: SideTable, scope: &str) -> u64 {
        self.versions.of(table, scope)
    }

    /// The frames of the batch's small blobs that the store lacks, compressed in parallel
    /// outside the write transaction (see `frame`).
    fn frames_for(&self, batch: &WriteBatch) -> Result<Vec<Frame>, StorageFailure> {
        let small = batch
            .blobs
            .iter()
            .filter(|b| matches!(b.body, Body::Small { .. }));
        if small.take(2).count() < 2 {
            return Ok(Vec::new());
        }
        let txn = self.db.begin_read().storage()?;
        let blobs = txn.open_table(BLOBS).storage()?;
        super::frame::frames_for(&batch.blobs, |id| {
            Ok(blobs.get(id.as_bytes()).storage()?.is_some())
        })
    }

    /// Writes `batch` in `txn`: its own frames, then `frames`, which hold its small blobs
    /// (those they leave out are written alone).
    pub(super) fn write_in(
        &self,
        txn: &WriteTransaction,
        batch: &WriteBatch,
        frames: &[Frame],
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
        for frame in batch.frames.iter().chain(frames) {
            write_frame(&mut blobs, &mut segments, &mut log, frame, &mut outcome)?;
        }
        for blob in &batch.blobs {
            write_blob(&mut blobs, &mut segments, &mut log, blob, &mut outcome)?;
        }
        // Large tree records go to the log before it is finished; everything else is written
        // in format 2's order (redb places pages by the order of the writes, and how well
        // gc's compaction shrinks the file follows).
        let mut tree_records = tree_records(txn, &batch.trees, &mut segments, &mut log)?;
        let new_end = log.end();
        log.finish(&mut segments)?;
        if new_end != end {
            meta.insert(LOG_END_KEY, new_end).storage()?;
        }

        let mut promised = open_held(txn, SideDef::new(&PROMISED.table_name())).storage()?;
        let batch_promised = batch.promised();
        let is_promised = |t: &redb::Table<(&str, &[u8]), &[u8]>, id: &[u8; 32]| {
            Ok::<_, WriteError>(
                batch_promised.contains(id) || t.get(("", &id[..])).storage()?.is_some(),
            )
        };
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
                if !present && !is_promised(&promised, entry.id.as_bytes())? {
                    let kind = if entry.kind.is_blob() {
                        ObjectKind::Blob
                    } else {
                        ObjectKind::Tree
                    };
                    return Err(WriteError::Dangling { kind, id: entry.id });
                }
            }
            let record = tree_records
                .remove(id)
                .unwrap_or_else(|| encode_tree_value(tree));
            trees.insert(id.as_bytes(), record.as_slice()).storage()?;
            outcome.trees_written += 1;
        }

        let mut snapshots = open_held(txn, SNAPSHOTS).storage()?;
        for (id, snap) in &batch.snapshots {
            if snapshots.get(id.as_bytes()).storage()?.is_some() {
                continue;
            }
            if trees.get(snap.tree.as_bytes()).storage()?.is_none()
                && !is_promised(&promised, snap.tree.as_bytes())?
            {
                return Err(WriteError::Dangling {
                    kind: ObjectKind::Tree,
                    id: snap.tree.into(),
                });
            }
            for p in &snap.parents {
                if snapshots.get(p.as_bytes()).storage()?.is_none()
                    && !is_promised(&promised, p.as_bytes())?
                {
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
        for id in &batch.required {
            snapshot_present(id)?;
        }
        // What the batch stores is no longer only promised.
        if !ReadableTableMetadata::is_empty(&*promised).storage()? {
            let members = batch.frames.iter().flat_map(|f| &f.members);
            let stored = (batch.blobs.iter().map(|b| *b.id.as_bytes()))
                .chain(members.map(|m| *m.id.as_bytes()))
                .chain(batch.trees.iter().map(|(id, _)| *id.as_bytes()))
                .chain(batch.snapshots.iter().map(|(id, _)| *id.as_bytes()));
            for id in stored {
                promised.remove(("", &id[..])).storage()?;
            }
        }
        drop((refs, snapshots, trees, promised));
        super::side::apply(txn, &batch.side, &mut outcome.appended)?;
        Ok(outcome)
    }

    /// Stores one blob given in memory and returns its id.
    pub fn put_blob(&self, content: &[u8]) -> Result<BlobId, WriteError> {
        let mut batch = WriteBatch::new();
        let id = batch.add_blob(PreparedBlob::new(content));
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

    pub(super) fn remove_ref_in_db(&self, name: &str) -> Result<SnapshotId, RefError> {
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
    pub fn compact(&mut self) -> Result<(), MaintenanceError> {
        let health = Arc::clone(&self.health);
        let compacted = health.run(|| match &mut self.db {
            Db::Write(db) => db.compact().storage(),
            _ => Ok(false),
        })?;
        if compacted {
            // redb records its allocator state at every close, in pages of its own. A file
            // compacted to its last page grows by that record at the next close, and once
            // more at the one after, which frees the previous record's pages only as it
            // commits. Two rounds now leave the file at the size later closes keep, so the
            // size gc reports is the one that stays.
            for _ in 0..2 {
                self.reopen_db()
                    .map_err(|e| MaintenanceError::Reopen(Box::new(e)))?;
            }
        }
        Ok(())
    }
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
    let mut append = |codec: Codec, payload: &[u8]| {
        let offset = log.append(segments, payload)?;
        outcome.bytes_written += payload.len() as u64;
        Ok::<_, WriteError>(Location::Packed {
            offset,
            len: u32::try_from(payload.len()).unwrap_or(u32::MAX),
            size: blob.size,
            codec,
        })
    };
    let location = match &blob.body {
        // A small blob no frame took (alone in its batch, or stored meanwhile).
        Body::Small { content } => {
            let (codec, payload) = super::blob::compress(content);
            append(codec, &payload)?
        }
        Body::Packed { codec, payload } => append(*codec, payload)?,
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

/// Every tree's `trees` record, by id; a record over [`TREE_LOG_THRESHOLD`] of a tree the
/// store lacks is appended to the log and its record says where.
fn tree_records(
    txn: &WriteTransaction,
    trees: &[(TreeId, Tree)],
    segments: &mut Table<u64, &[u8]>,
    log: &mut LogWriter,
) -> Result<std::collections::HashMap<TreeId, Vec<u8>>, WriteError> {
    let mut records: std::collections::HashMap<TreeId, Vec<u8>> = trees
        .iter()
        .map(|(id, tree)| (*id, encode_tree_value(tree)))
        .collect();
    let large = |r: &Vec<u8>| r.len() > TREE_LOG_THRESHOLD && r[0] == TREE_ZSTD;
    if !records.values().any(large) {
        return Ok(records);
    }
    let stored = open_held(txn, TREES).storage()?;
    // In batch order, so that a directory's trees sit together.
    for (id, _) in trees {
        let Some(record) = records.get_mut(id) else {
            continue;
        };
        if !large(record) || stored.get(id.as_bytes()).storage()?.is_some() {
            continue;
        }
        let offset = log.append(segments, &record[1..])?;
        let len = record.len() as u64 - 1;
        *record = vec![TREE_IN_LOG];
        super::blob::put_varint(record, offset);
        super::blob::put_varint(record, len);
    }
    Ok(records)
}

/// Appends `frame` to the log and records its members the store still lacks; a frame
/// whose members are all stored by now is left out.
fn write_frame(
    blobs: &mut Table<[u8; 32], &[u8]>,
    segments: &mut Table<u64, &[u8]>,
    log: &mut LogWriter,
    frame: &Frame,
    outcome: &mut WriteOutcome,
) -> Result<(), WriteError> {
    let mut absent = Vec::with_capacity(frame.members.len());
    for m in &frame.members {
        if blobs.get(m.id.as_bytes()).storage()?.is_none() {
            absent.push(m);
        }
    }
    if absent.is_empty() {
        return Ok(());
    }
    let frame_offset = log.append(segments, &frame.bytes)?;
    outcome.bytes_written += frame.bytes.len() as u64;
    let frame_len = u32::try_from(frame.bytes.len()).unwrap_or(u32::MAX);
    for m in absent {
        let location = Location::Member {
            frame_offset,
            frame_len,
            start: m.start.into(),
            size: m.size.into(),
        };
        blobs
            .insert(m.id.as_bytes(), location.encode().as_slice())
            .storage()?;
        outcome.blobs_written += 1;
    }
    Ok(())
}

pub(super) fn encode_tree_value(tree: &Tree) -> Vec<u8> {
    let encoded = tree.encode();
    if encoded.len() > TREE_COMPRESS_THRESHOLD
        && let (super::blob::Codec::Zstd, c) = super::blob::compress(&encoded)
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

impl Store {
    /// [`Store::write`] through the group: returns once `batch` is durable (or refused).
    pub(crate) fn write_grouped(
        &self,
        batch: &WriteBatch,
        frames: Vec<Frame>,
    ) -> Result<WriteOutcome, WriteError> {
        let pending = Arc::new(Pending {
            batch: batch.clone(),
            frames,
            result: Mutex::new(None),
        });
        let group = &self.group;
        let mut state = group.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.queue.push(Arc::clone(&pending));
        loop {
            if let Some(r) = pending.take() {
                return r;
            }
            if !state.leading {
                state.leading = true;
                let members = std::mem::take(&mut state.queue);
                drop(state);
                // Even if committing panics, the next writer must be able to lead and every
                // member must get an answer.
                let leader = Leader {
                    group,
                    members: &members,
                };
                self.commit_group(&members);
                drop(leader);
                state = group.state.lock().unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            state = group
                .done
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Durable write transactions committed by the group so far (for tests and stats).
    pub fn group_transactions(&self) -> u64 {
        self.group
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .transactions
    }

    /// Commits `members` in one transaction and sets each one's result. If any batch is
    /// refused, that transaction is dropped and each batch is committed on its own, so a
    /// refusal reaches only its writer.
    pub(crate) fn commit_group(&self, members: &[Arc<Pending>]) {
        // Each member's answer names the store, and a panic in redb fails them all.
        if members.len() > 1 {
            let together = self
                .health
                .catch(|| self.try_together(members))
                .unwrap_or_else(|damaged| Err(Some(damaged.into())));
            match together {
                Ok(results) => {
                    for (m, r) in members.iter().zip(results) {
                        m.set(Ok(r));
                    }
                    return;
                }
                Err(Some(e)) => {
                    let reason = e.in_store(&self.root).to_string();
                    for m in members {
                        m.set(Err(WriteError::Commit {
                            reason: reason.clone(),
                        }));
                    }
                    return;
                }
                Err(None) => {}
            }
        }
        for m in members {
            m.set(self.health.run(|| self.write_alone(&m.batch, &m.frames)));
        }
    }

    /// All of `members` in one transaction. `Err(None)`: a batch was refused, nothing was
    /// committed; `Err(Some(e))`: the transaction failed.
    pub(super) fn try_together(
        &self,
        members: &[Arc<Pending>],
    ) -> Result<Vec<WriteOutcome>, Option<WriteError>> {
        let (txn, len_before) = self.begin_write().map_err(Some)?;
        let mut outcomes = Vec::with_capacity(members.len());
        for m in members {
            match self.write_in(&txn, &m.batch, &m.frames) {
                Ok(o) => outcomes.push(o),
                // Out of space is the transaction's failure, not one batch's refusal.
                Err(e) if e.is_out_of_space() => {
                    return Err(Some(self.after_failed_write(len_before, e)));
                }
                Err(_) => {
                    let _ = txn.abort();
                    return Err(None);
                }
            }
        }
        txn.commit()
            .storage()
            .map_err(|e| Some(self.after_failed_write(len_before, e.into())))?;
        Ok(outcomes)
    }

    /// One batch in its own transaction.
    pub(crate) fn write_alone(
        &self,
        batch: &WriteBatch,
        frames: &[Frame],
    ) -> Result<WriteOutcome, WriteError> {
        let (txn, len_before) = self.begin_write()?;
        let written = self.write_in(&txn, batch, frames).and_then(|outcome| {
            txn.commit().storage()?;
            Ok(outcome)
        });
        written.map_err(|e| self.after_failed_write(len_before, e))
    }
}
