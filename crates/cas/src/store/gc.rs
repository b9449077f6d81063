//! `gc`: drop what nothing reaches, then reclaim log space.

use std::collections::{HashMap, HashSet};

use redb::ReadableTable;

use super::blob::{self, Location, LogWriter};
use super::contain::open_held;
use super::error::{MaintenanceError, StorageResult};
use super::handle::Store;
use super::owner::{Roots, SideOwner};
use super::reader::Reader;
use super::side::SideKey;
use super::tables::{BLOBS, LOG_END_KEY, META, SEGMENTS, SNAPSHOTS, TREES};
use crate::id::{BlobId, ObjectId, SnapshotId, TreeId};
use crate::object::ObjectKind;

/// Knobs for [`Store::gc`].
#[derive(Debug, Clone, Default)]
pub struct GcOptions {
    /// Report what would be removed, change nothing.
    pub dry_run: bool,
}

/// What `gc` removed (or would remove, on a dry run).
#[derive(Debug, Clone, Default)]
pub struct GcOutcome {
    /// Every unreachable object.
    pub removed: Vec<(ObjectKind, ObjectId)>,
    /// Stored bytes of those objects.
    pub bytes_freed: u64,
    /// Side entries dropped at their owners' request (see [`Roots::drop`]).
    pub dropped: Vec<SideKey>,
    /// Size of the database file before.
    pub file_bytes_before: u64,
    /// Size of the database file after (equal to before on a dry run).
    pub file_bytes_after: u64,
}

#[derive(Default)]
struct Live {
    snapshots: HashSet<SnapshotId>,
    trees: HashSet<TreeId>,
    blobs: HashSet<BlobId>,
}

impl Store {
    /// Removes every object that no ref, no root of `owners` (the layers that keep records
    /// in side tables) and no ancestry of those reaches, drops the side entries the owners
    /// ask it to and those about removed objects, moves live blobs out of mostly-dead log
    /// segments, and compacts the file.
    ///
    /// It stops before removing anything if an operation is under way on some directory
    /// (a [`JOURNALS`](crate::JOURNALS) entry), if an owner cannot say what it keeps, or if a
    /// reachable object is missing or corrupt: what lies below a damaged tree cannot be
    /// told apart from garbage.
    pub fn gc(
        &mut self,
        options: &GcOptions,
        owners: &[&dyn SideOwner],
    ) -> Result<GcOutcome, MaintenanceError> {
        let health = std::sync::Arc::clone(&self.health);
        health.run(|| self.collect(options, owners))
    }

    fn collect(
        &mut self,
        options: &GcOptions,
        owners: &[&dyn SideOwner],
    ) -> Result<GcOutcome, MaintenanceError> {
        let db_path = self.database_path();
        let file_len = || std::fs::metadata(&db_path).map(|m| m.len()).unwrap_or(0);
        let mut outcome = GcOutcome {
            file_bytes_before: file_len(),
            ..GcOutcome::default()
        };
        let (live, dropped) = self.mark(owners)?;

        let db = self.writer().map_err(|_| MaintenanceError::ReadOnly {
            path: self.root().to_owned(),
        })?;
        let (txn, len_before) = self.begin_write_on(db)?;
        let swept = self
            .sweep(&txn, &live, &dropped, options, &mut outcome)
            .and_then(|()| {
                if options.dry_run {
                    txn.abort().storage()?;
                } else {
                    txn.commit().storage()?;
                }
                Ok(())
            });
        swept.map_err(|e| self.after_failed_write(len_before, e))?;
        outcome.dropped = dropped;
        if options.dry_run {
            outcome.file_bytes_after = outcome.file_bytes_before;
            return Ok(outcome);
        }
        self.compact()?;
        outcome.file_bytes_after = file_len();
        Ok(outcome)
    }

    /// Removes from `txn` what `live` leaves out (on a dry run: only counts it).
    fn sweep(
        &self,
        txn: &redb::WriteTransaction,
        live: &Live,
        dropped: &[SideKey],
        options: &GcOptions,
        outcome: &mut GcOutcome,
    ) -> Result<(), MaintenanceError> {
        {
            let mut blobs = open_held(txn, BLOBS).storage()?;
            let mut trees = open_held(txn, TREES).storage()?;
            let mut snapshots = open_held(txn, SNAPSHOTS).storage()?;
            let mut dead_blobs = Vec::new();
            for item in blobs.iter().storage()? {
                let (k, v) = item.storage()?;
                let id = BlobId::from_bytes(k.value());
                if !live.blobs.contains(&id) {
                    if let Some(Location::Packed { len, .. }) = Location::decode(v.value()) {
                        outcome.bytes_freed += u64::from(len);
                    }
                    dead_blobs.push(id);
                }
            }
            let dead_trees = dead_keys(
                &trees,
                |k| live.trees.contains(&TreeId::from_bytes(k)),
                &mut outcome.bytes_freed,
            )?;
            let dead_snaps = dead_keys(
                &snapshots,
                |k| live.snapshots.contains(&SnapshotId::from_bytes(k)),
                &mut outcome.bytes_freed,
            )?;
            outcome.removed.extend(
                dead_snaps
                    .iter()
                    .map(|k| (ObjectKind::Snapshot, ObjectId::from_bytes(*k))),
            );
            outcome.removed.extend(
                dead_trees
                    .iter()
                    .map(|k| (ObjectKind::Tree, ObjectId::from_bytes(*k))),
            );
            outcome
                .removed
                .extend(dead_blobs.iter().map(|id| (ObjectKind::Blob, (*id).into())));
            if !options.dry_run {
                for id in &dead_blobs {
                    blobs.remove(id.as_bytes()).storage()?;
                }
                for k in &dead_trees {
                    trees.remove(k).storage()?;
                }
                for k in &dead_snaps {
                    snapshots.remove(k).storage()?;
                }
                drop((trees, snapshots));
                let dead_objects: Vec<[u8; 32]> = dead_blobs
                    .iter()
                    .map(|b| *b.as_bytes())
                    .chain(dead_trees.iter().copied())
                    .chain(dead_snaps.iter().copied())
                    .collect();
                super::side::drop_with_objects(txn, &dead_objects)?;
                super::side::drop_entries(txn, dropped)?;
                self.reclaim_segments(txn, &mut blobs)?;
            }
        }
        Ok(())
    }

    /// What is reachable, and the side entries the owners want dropped.
    fn mark(&self, owners: &[&dyn SideOwner]) -> Result<(Live, Vec<SideKey>), MaintenanceError> {
        let reader = self.reader()?;
        if let Some(root) = reader.journaled_dirs()?.into_iter().next() {
            return Err(MaintenanceError::Interrupted { root });
        }
        let mut live = Live::default();
        let mut roots = Roots::default();
        for owner in owners {
            owner
                .roots(&reader, &mut roots)
                .map_err(|source| MaintenanceError::Owner {
                    owner: owner.name(),
                    source,
                })?;
        }
        let mut pending: Vec<SnapshotId> = reader.refs()?.into_iter().map(|(_, id)| id).collect();
        pending.extend(roots.snapshots);
        let mut trees = Vec::new();
        while let Some(id) = pending.pop() {
            if !live.snapshots.insert(id) {
                continue;
            }
            if !reader.has_snapshot(id)? && reader.promised(id.into())?.is_some() {
                continue;
            }
            let snap = reader.snapshot(id).map_err(MaintenanceError::Unsafe)?;
            trees.push(snap.tree);
            pending.extend(snap.parents);
        }
        while let Some(id) = trees.pop() {
            if !live.trees.insert(id) {
                continue;
            }
            if !reader.has_tree(id)? && reader.promised(id.into())?.is_some() {
                continue;
            }
            let tree = reader.tree(id).map_err(MaintenanceError::Unsafe)?;
            for entry in tree.entries() {
                match (entry.blob(), entry.tree()) {
                    (Some(b), _) => mark_blob(&reader, b, &mut live)?,
                    (_, Some(t)) => trees.push(t),
                    _ => {}
                }
            }
        }
        Ok((live, roots.drop))
    }

    /// Deletes segments no live blob uses and relocates blobs out of segments that are less
    /// than half live, so space from deleted blobs comes back.
    fn reclaim_segments(
        &self,
        txn: &redb::WriteTransaction,
        blobs: &mut redb::Table<[u8; 32], &[u8]>,
    ) -> Result<(), MaintenanceError> {
        let seg = self.segment_bytes;
        let mut meta = open_held(txn, META).storage()?;
        let mut segments = open_held(txn, SEGMENTS).storage()?;
        let end = meta
            .get(LOG_END_KEY)
            .storage()?
            .map(|v| v.value())
            .unwrap_or(0);
        let tail = end / seg;

        let packed = packed_locations(blobs)?;
        let usage = segment_usage(&packed, seg);
        let mut sparse: HashSet<u64> = HashSet::new();
        for item in segments.iter().storage()? {
            let (k, _) = item.storage()?;
            let index = k.value();
            if index != tail && usage.get(&index).copied().unwrap_or(0) < seg / 2 {
                sparse.insert(index);
            }
        }
        let mut log = LogWriter::open(&segments, seg, end)?;
        for (id, offset, len, size, codec) in &packed {
            let first = offset / seg;
            let last = (offset + u64::from(*len)).saturating_sub(1) / seg;
            if !(first..=last).any(|i| sparse.contains(&i)) {
                continue;
            }
            let payload = blob::read_log(&*segments, seg, *id, *offset, *len)
                .map_err(MaintenanceError::Unsafe)?;
            let new_offset = log.append(&mut segments, &payload)?;
            let loc = Location::Packed {
                offset: new_offset,
                len: *len,
                size: *size,
                codec: *codec,
            };
            blobs
                .insert(id.as_bytes(), loc.encode().as_slice())
                .storage()?;
        }
        let new_end = log.end();
        log.finish(&mut segments)?;
        meta.insert(LOG_END_KEY, new_end).storage()?;

        let usage = segment_usage(&packed_locations(blobs)?, seg);
        let new_tail = new_end / seg;
        let mut unused = Vec::new();
        for item in segments.iter().storage()? {
            let (k, _) = item.storage()?;
            let index = k.value();
            if index != new_tail && !usage.contains_key(&index) {
                unused.push(index);
            }
        }
        for index in unused {
            segments.remove(index).storage()?;
        }
        Ok(())
    }
}

type Packed = (BlobId, u64, u32, u64, blob::Codec);

fn packed_locations(blobs: &redb::Table<[u8; 32], &[u8]>) -> Result<Vec<Packed>, MaintenanceError> {
    let mut out = Vec::new();
    for item in blobs.iter().storage()? {
        let (k, v) = item.storage()?;
        if let Some(Location::Packed {
            offset,
            len,
            size,
            codec,
        }) = Location::decode(v.value())
        {
            out.push((BlobId::from_bytes(k.value()), offset, len, size, codec));
        }
    }
    Ok(out)
}

/// Live bytes per segment.
fn segment_usage(packed: &[Packed], seg: u64) -> HashMap<u64, u64> {
    let mut usage = HashMap::new();
    for &(_, offset, len, _, _) in packed {
        let mut pos = offset;
        let end = offset + u64::from(len);
        while pos < end {
            let index = pos / seg;
            let n = ((index + 1) * seg).min(end) - pos;
            *usage.entry(index).or_insert(0) += n;
            pos += n;
        }
        if len == 0 {
            usage.entry(offset / seg).or_insert(0);
        }
    }
    usage
}

fn dead_keys(
    table: &redb::Table<[u8; 32], &[u8]>,
    is_live: impl Fn([u8; 32]) -> bool,
    bytes: &mut u64,
) -> Result<Vec<[u8; 32]>, MaintenanceError> {
    let mut out = Vec::new();
    for item in table.iter().storage()? {
        let (k, v) = item.storage()?;
        if !is_live(k.value()) {
            *bytes += v.value().len() as u64;
            out.push(k.value());
        }
    }
    Ok(out)
}

fn mark_blob(reader: &Reader, id: BlobId, live: &mut Live) -> Result<(), MaintenanceError> {
    if !live.blobs.insert(id) {
        return Ok(());
    }
    if let Location::Chunked { chunks, .. } =
        reader.location(id).map_err(MaintenanceError::Unsafe)?
    {
        live.blobs.extend(chunks);
    }
    Ok(())
}
