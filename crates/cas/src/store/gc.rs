//! `gc`: drop what nothing reaches, then reclaim log space.

use std::collections::{HashMap, HashSet};

use redb::ReadableTable;

use super::blob::{self, Location, LogWriter};
use super::contain::open_held;
use super::error::{MaintenanceError, StorageResult};
use super::handle::Store;
pub use super::mark::Retained;
use super::mark::{self, Marked};
#[cfg(doc)]
use super::owner::Roots;
use super::owner::{HistoryEntry, SideOwner};
use super::side::{PRUNED, SideDef, SideKey};
use super::tables::{BLOBS, LOG_END_KEY, META, SEGMENTS, SNAPSHOTS, TREES};
use crate::id::{BlobId, ObjectId, SnapshotId, TreeId};
use crate::object::ObjectKind;
use camino::Utf8Path;

/// Knobs for [`Store::gc`].
#[derive(Debug, Clone, Default)]
pub struct GcOptions {
    /// Report what would be removed, change nothing.
    pub dry_run: bool,
    /// Drop history (owners' history entries and snapshot ancestry), oldest first, until
    /// the database file takes at most this many bytes, or nothing but what keepers keep is
    /// left, or even that much would not fit (then no more goes than fits the bytes the
    /// objects themselves take). Other files in the store folder (mount layers, ...) are not
    /// gc's to shrink and do not count.
    pub max_size: Option<u64>,
}

/// What `gc` removed (or would remove, on a dry run).
#[derive(Debug, Clone, Default)]
pub struct GcOutcome {
    /// Every unreachable object.
    pub removed: Vec<(ObjectKind, ObjectId)>,
    /// Stored bytes of those objects.
    pub bytes_freed: u64,
    /// Side entries dropped at their owners' request (see [`Roots::drop`]) or because the
    /// size budget dropped them as history.
    pub dropped: Vec<SideKey>,
    /// Parts of side entries the size budget dropped (see [`HistoryEntry::part`]).
    pub dropped_parts: Vec<HistoryEntry>,
    /// What keepers keep (refs, worktree heads, ...), each with the stored bytes only it
    /// keeps; keepers keeping nothing new are left out.
    pub retained: Vec<Retained>,
    /// Size of the database file before.
    pub file_bytes_before: u64,
    /// Size of the database file after (equal to before on a dry run): what
    /// [`GcOptions::max_size`] is about.
    pub file_bytes_after: u64,
    /// What the store folder's files take after, mount layers included (see
    /// [`store_bytes`]; before, on a dry run).
    pub store_bytes_after: u64,
}

/// How many times `gc --max-size` marks, sweeps and compacts again when the compacted
/// database file is still over its budget (each time with the budget less the overhead it
/// measured).
const MAX_BUDGET_PASSES: usize = 8;

/// The bytes the store folder's files take: the sum of the lengths of every regular file
/// in it and below it (symlinks not followed), mounts' layers included. What a user sees
/// the store take; `gc --max-size` can shrink only the database file of it.
pub fn store_bytes(root: &Utf8Path) -> u64 {
    walkdir::WalkDir::new(root)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

impl Store {
    /// Removes every object that no ref, no root of `owners` (the layers that keep records
    /// in side tables) and no ancestry of those reaches, drops the side entries the owners
    /// ask it to and those about removed objects, moves live blobs out of mostly-dead log
    /// segments, and compacts the file. With [`GcOptions::max_size`], history beyond what
    /// keepers keep stays only as far as it fits (see `mark`), and the passes repeat until
    /// the compacted file fits, nothing optional is left, or the file would not fit even
    /// without any of it.
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
            store_bytes_after: store_bytes(self.root()),
            ..GcOutcome::default()
        };
        let mut budget = options.max_size;
        for _ in 0..MAX_BUDGET_PASSES {
            let marked = self.mark(owners, budget)?;
            let (live_bytes, kept_bytes, optional_kept) =
                (marked.live_bytes, marked.kept_bytes, marked.optional_kept);
            self.sweep_marked(marked, options, &mut outcome)?;
            if options.dry_run {
                outcome.file_bytes_after = outcome.file_bytes_before;
                return Ok(outcome);
            }
            self.compact()?;
            outcome.file_bytes_after = file_len();
            outcome.store_bytes_after = store_bytes(self.root());
            tracing::debug!(
                budget,
                live_bytes,
                kept_bytes,
                optional_kept,
                file_bytes = outcome.file_bytes_after,
                "gc pass"
            );
            let (Some(max), Some(last)) = (options.max_size, budget) else {
                break;
            };
            if outcome.file_bytes_after <= max || optional_kept == 0 || last == 0 {
                break;
            }
            let overhead = outcome.file_bytes_after.saturating_sub(live_bytes);
            if kept_bytes.saturating_add(overhead) > max {
                // Out of reach even with all history gone: dropping more frees it for nothing.
                break;
            }
            budget = Some(max.saturating_sub(overhead).min(last - 1));
        }
        Ok(outcome)
    }

    /// What is reachable, and the side entries to drop.
    fn mark(
        &self,
        owners: &[&dyn SideOwner],
        budget: Option<u64>,
    ) -> Result<Marked, MaintenanceError> {
        let reader = self.reader()?;
        if let Some(root) = reader.journaled_dirs()?.into_iter().next() {
            return Err(MaintenanceError::Interrupted { root });
        }
        mark::mark(&reader, owners, budget)
    }

    /// One sweep in its own write transaction (aborted on a dry run).
    fn sweep_marked(
        &self,
        marked: Marked,
        options: &GcOptions,
        outcome: &mut GcOutcome,
    ) -> Result<(), MaintenanceError> {
        let db = self.writer().map_err(|_| MaintenanceError::ReadOnly {
            path: self.root().to_owned(),
        })?;
        let (txn, len_before) = self.begin_write_on(db)?;
        let swept = self.sweep(&txn, &marked, options, outcome).and_then(|()| {
            if options.dry_run {
                txn.abort().storage()?;
            } else {
                txn.commit().storage()?;
            }
            Ok(())
        });
        swept.map_err(|e| self.after_failed_write(len_before, e))?;
        outcome.dropped.extend(marked.drop);
        outcome.dropped_parts.extend(marked.dropped_parts);
        outcome.retained = marked.retained;
        Ok(())
    }

    /// Removes from `txn` what `live` leaves out (on a dry run: only counts it).
    fn sweep(
        &self,
        txn: &redb::WriteTransaction,
        marked: &Marked,
        options: &GcOptions,
        outcome: &mut GcOutcome,
    ) -> Result<(), MaintenanceError> {
        let live = &marked.live;
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
                super::side::drop_entries(txn, &marked.drop)?;
                super::side::rewrite_entries(txn, &marked.rewrites)?;
                write_pruned(txn, &marked.cut)?;
                self.reclaim_segments(txn, &mut blobs, options.max_size.is_some())?;
            }
        }
        Ok(())
    }

    /// Deletes segments no live blob uses and relocates blobs out of segments that are less
    /// than half live (`tight`: not wholly live), so space from deleted blobs comes back.
    fn reclaim_segments(
        &self,
        txn: &redb::WriteTransaction,
        blobs: &mut redb::Table<[u8; 32], &[u8]>,
        tight: bool,
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
            let floor = if tight { seg } else { seg / 2 };
            if index != tail && usage.get(&index).copied().unwrap_or(0) < floor {
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

/// Makes [`PRUNED`] hold exactly `cut`.
fn write_pruned(txn: &redb::WriteTransaction, cut: &[SnapshotId]) -> Result<(), MaintenanceError> {
    let mut table = open_held(txn, SideDef::new(&PRUNED.table_name())).storage()?;
    table.retain(|_, _| false).storage()?;
    for id in cut {
        table.insert(("", &id.as_bytes()[..]), &[][..]).storage()?;
    }
    Ok(())
}
