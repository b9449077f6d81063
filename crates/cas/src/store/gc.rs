//! `gc`: drop what nothing reaches, then reclaim log space.

use std::collections::{HashMap, HashSet};

use redb::ReadableTable;

use super::blob::{self, Location, LogWriter};
use super::contain::open_held;
use super::error::{MaintenanceError, StorageResult};
use super::frame::{self, member_share};
use super::handle::Store;
pub use super::mark::Retained;
use super::mark::{self, Marked};
#[cfg(doc)]
use super::owner::Roots;
use super::owner::{HistoryEntry, SideOwner};
use super::reader::{TREE_IN_LOG, tree_record_bytes};
use super::side::{PRUNED, SideDef, SideKey};
use super::tables::{BLOBS, LOG_END_KEY, META, SEGMENTS, SNAPSHOTS, TREES};
use crate::id::{AttestationId, BlobId, ObjectId, SnapshotId, TreeId};
use crate::object::ObjectKind;
use camino::Utf8Path;

/// Knobs for [`Store::gc`].
#[derive(Debug, Clone, Default)]
pub struct StoreGcOptions {
    /// Report what would be removed, change nothing.
    pub dry_run: bool,
    /// Drop history (owners' history entries and snapshot ancestry), oldest first, until
    /// the database file takes at most this many bytes less a 32nd (room for the writes
    /// that follow), or nothing but what keepers keep is
    /// left, or even that much would not fit (then no more goes than fits the bytes the
    /// objects themselves take). Other files in the store folder (mount layers, ...) are not
    /// gc's to shrink and do not count.
    pub max_size: Option<u64>,
}

/// What `gc` removed (or would remove, on a dry run).
#[derive(Debug, Clone, Default)]
pub struct StoreGcOutcome {
    /// Every unreachable object.
    pub removed: Vec<(ObjectKind, ObjectId)>,
    /// Attestations whose tree no snapshot that stays has (their records and signatures are
    /// in `dropped`).
    pub attestations_removed: Vec<AttestationId>,
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
    /// [`StoreGcOptions::max_size`] is about.
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
    /// segments, and compacts the file. With [`StoreGcOptions::max_size`], history beyond what
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
        options: &StoreGcOptions,
        owners: &[&dyn SideOwner],
    ) -> Result<StoreGcOutcome, MaintenanceError> {
        let health = std::sync::Arc::clone(&self.health);
        health.run(|| self.collect(options, owners))
    }

    fn collect(
        &mut self,
        options: &StoreGcOptions,
        owners: &[&dyn SideOwner],
    ) -> Result<StoreGcOutcome, MaintenanceError> {
        let db_path = self.database_path();
        let file_len = || std::fs::metadata(&db_path).map(|m| m.len()).unwrap_or(0);
        let mut outcome = StoreGcOutcome {
            file_bytes_before: file_len(),
            store_bytes_after: store_bytes(self.root()),
            ..StoreGcOutcome::default()
        };
        // What gc aims for: the budget less a 32nd, so the commands that follow have room
        // before the store is past it again (a compacted file has no free page inside).
        let target = options.max_size.map(|max| max - max / 32);
        let mut budget = target;
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
            let (Some(max), Some(last)) = (target, budget) else {
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
        options: &StoreGcOptions,
        outcome: &mut StoreGcOutcome,
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
        outcome
            .attestations_removed
            .extend(marked.attestations_dropped);
        outcome.dropped_parts.extend(marked.dropped_parts);
        outcome.retained = marked.retained;
        Ok(())
    }

    /// Removes from `txn` what `live` leaves out (on a dry run: only counts it).
    fn sweep(
        &self,
        txn: &redb::WriteTransaction,
        marked: &Marked,
        options: &StoreGcOptions,
        outcome: &mut StoreGcOutcome,
    ) -> Result<(), MaintenanceError> {
        let live = &marked.live;
        {
            let mut blobs = open_held(txn, BLOBS).storage()?;
            let mut trees = open_held(txn, TREES).storage()?;
            let mut snapshots = open_held(txn, SNAPSHOTS).storage()?;
            let mut dead_blobs = Vec::new();
            let mut dead_locations = Vec::new();
            let mut frame_members: HashMap<u64, u64> = HashMap::new();
            for item in blobs.iter().storage()? {
                let (k, v) = item.storage()?;
                let id = BlobId::from_bytes(k.value());
                let location = Location::decode(v.value());
                if let Some(Location::Member {
                    frame_offset, size, ..
                }) = &location
                {
                    let total = frame_members.entry(*frame_offset).or_default();
                    *total = total.saturating_add(*size);
                }
                if !live.blobs.contains(&id) {
                    dead_blobs.push(id);
                    dead_locations.extend(location);
                }
            }
            for location in &dead_locations {
                outcome.bytes_freed += match *location {
                    Location::Packed { len, .. } => u64::from(len),
                    Location::Member {
                        frame_offset,
                        frame_len,
                        size,
                        ..
                    } => member_share(frame_len, size, frame_members[&frame_offset]),
                    Location::Chunked { .. } => 0,
                };
            }
            let dead_trees = dead_keys(
                &trees,
                |k| live.trees.contains(&TreeId::from_bytes(k)),
                tree_record_bytes,
                &mut outcome.bytes_freed,
            )?;
            let dead_snaps = dead_keys(
                &snapshots,
                |k| live.snapshots.contains(&SnapshotId::from_bytes(k)),
                |v| v.len() as u64,
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

    /// Deletes segments nothing live uses and moves what lives out of segments that are
    /// less than half live (`tight`: not wholly live), so space from deleted objects comes
    /// back. A frame of small blobs lives while any member does; moved, it keeps only its
    /// live members (see `relocate`), and until then its dead members count as dead bytes.
    fn reclaim_segments(
        &self,
        txn: &redb::WriteTransaction,
        blobs: &mut redb::Table<[u8; 32], &[u8]>,
        tight: bool,
    ) -> Result<(), MaintenanceError> {
        let seg = self.segment_bytes;
        let mut meta = open_held(txn, META).storage()?;
        let mut segments = open_held(txn, SEGMENTS).storage()?;
        let mut trees = open_held(txn, TREES).storage()?;
        let end = meta
            .get(LOG_END_KEY)
            .storage()?
            .map(|v| v.value())
            .unwrap_or(0);
        let tail = end / seg;

        let extents = log_extents(blobs, &trees)?;
        let mut usage: HashMap<u64, u64> = HashMap::new();
        for (offset, extent) in &extents {
            let live = extent.live_bytes(&segments, seg, *offset);
            for (index, n) in pieces(*offset, extent.len(), seg) {
                let share = (u128::from(n) * u128::from(live))
                    .checked_div(u128::from(extent.len()))
                    .unwrap_or(0);
                *usage.entry(index).or_insert(0) += share as u64;
            }
        }
        let floor = if tight { seg } else { seg / 2 };
        let mut sparse: HashSet<u64> = HashSet::new();
        for item in segments.iter().storage()? {
            let (k, _) = item.storage()?;
            let index = k.value();
            if index != tail && usage.get(&index).copied().unwrap_or(0) < floor {
                sparse.insert(index);
            }
        }
        let mut moving: Vec<&(u64, Extent)> = extents
            .iter()
            .filter(|(offset, e)| pieces(*offset, e.len(), seg).any(|(i, _)| sparse.contains(&i)))
            .collect();
        // In the order of their records' keys, as format 2 moved blobs: redb places the
        // pages a transaction writes, and how well `compact` then shrinks the file, by the
        // order of the writes.
        moving.sort_by_key(|(_, e)| e.key());
        let mut log = LogWriter::open(&segments, seg, end)?;
        for (offset, extent) in moving {
            extent.relocate(*offset, &mut segments, &mut log, blobs, &mut trees)?;
        }
        let new_end = log.end();
        log.finish(&mut segments)?;
        meta.insert(LOG_END_KEY, new_end).storage()?;

        let used: HashSet<u64> = log_extents(blobs, &trees)?
            .iter()
            .flat_map(|(offset, e)| pieces(*offset, e.len(), seg).map(|(i, _)| i))
            .collect();
        let new_tail = new_end / seg;
        let mut unused = Vec::new();
        for item in segments.iter().storage()? {
            let (k, _) = item.storage()?;
            let index = k.value();
            if index != new_tail && !used.contains(&index) {
                unused.push(index);
            }
        }
        for index in unused {
            segments.remove(index).storage()?;
        }
        Ok(())
    }
}

/// A stretch of the blob log, and the records pointing into it.
enum Extent {
    /// A blob stored alone.
    Packed {
        id: BlobId,
        len: u32,
        size: u64,
        codec: blob::Codec,
    },
    /// A frame of small blobs, with its recorded members: (id, start, size).
    Frame {
        len: u32,
        members: Vec<(BlobId, u64, u64)>,
    },
    /// A tree's record kept in the log.
    Tree { id: TreeId, len: u32 },
}

type Segments<'t> = redb::Table<'t, u64, &'static [u8]>;

impl Extent {
    fn len(&self) -> u32 {
        match self {
            Extent::Packed { len, .. } | Extent::Frame { len, .. } | Extent::Tree { len, .. } => {
                *len
            }
        }
    }

    /// The key of its (first) record.
    fn key(&self) -> [u8; 32] {
        match self {
            Extent::Packed { id, .. } => *id.as_bytes(),
            Extent::Tree { id, .. } => *id.as_bytes(),
            Extent::Frame { members, .. } => *members[0].0.as_bytes(),
        }
    }

    /// Its live bytes: all of it, except a frame's dead members' share (as far as its
    /// header tells the decoded size).
    fn live_bytes(&self, segments: &Segments, seg: u64, offset: u64) -> u64 {
        let Extent::Frame { len, members } = self else {
            return u64::from(self.len());
        };
        let (id, _, _) = members[0];
        let header = blob::read_log(
            segments,
            seg,
            (ObjectKind::Blob, id.into()),
            offset,
            18.min(*len),
        );
        let decoded = header
            .ok()
            .and_then(|h| zstd::zstd_safe::get_frame_content_size(&h).ok().flatten());
        let live: u64 = members.iter().map(|(_, _, size)| size).sum();
        match decoded {
            Some(decoded) if decoded > 0 => member_share(*len, live, decoded),
            _ => u64::from(*len),
        }
    }

    /// Appends it to `log` (a frame: only its live members) and points its records there.
    fn relocate(
        &self,
        offset: u64,
        segments: &mut Segments,
        log: &mut LogWriter,
        blobs: &mut redb::Table<[u8; 32], &[u8]>,
        trees: &mut redb::Table<[u8; 32], &[u8]>,
    ) -> Result<(), MaintenanceError> {
        let seg = log.segment_bytes();
        let mut copy = |kind, id: ObjectId, len| {
            let bytes = blob::read_log(&*segments, seg, (kind, id), offset, len)
                .map_err(MaintenanceError::Unsafe)?;
            Ok::<_, MaintenanceError>(log.append(segments, &bytes)?)
        };
        match self {
            &Extent::Packed {
                id,
                len,
                size,
                codec,
            } => {
                let offset = copy(ObjectKind::Blob, id.into(), len)?;
                let loc = Location::Packed {
                    offset,
                    len,
                    size,
                    codec,
                };
                blobs
                    .insert(id.as_bytes(), loc.encode().as_slice())
                    .storage()?;
            }
            &Extent::Tree { id, len } => {
                let offset = copy(ObjectKind::Tree, id.into(), len)?;
                let mut record = vec![TREE_IN_LOG];
                blob::put_varint(&mut record, offset);
                blob::put_varint(&mut record, len.into());
                trees.insert(id.as_bytes(), record.as_slice()).storage()?;
            }
            Extent::Frame { len, members } => {
                let (first, _, _) = members[0];
                let stored = blob::read_log(
                    &*segments,
                    seg,
                    (ObjectKind::Blob, first.into()),
                    offset,
                    *len,
                )
                .map_err(MaintenanceError::Unsafe)?;
                let decoded =
                    frame::decode_frame(first, &stored).map_err(MaintenanceError::Unsafe)?;
                let mut live = Vec::new();
                let mut placed = Vec::with_capacity(members.len());
                for &(id, start, size) in members {
                    let content = frame::member_content(id, &decoded, start, size)
                        .map_err(MaintenanceError::Unsafe)?;
                    placed.push((id, live.len() as u64, size));
                    live.extend_from_slice(&content);
                }
                let rewritten = if live.len() < decoded.len() {
                    blob::compress_frame(&live)
                } else {
                    None
                };
                let (bytes, placed) = match rewritten {
                    Some(bytes) => (bytes, placed),
                    None => (stored, members.clone()),
                };
                let frame_offset = log.append(segments, &bytes)?;
                let frame_len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
                for (id, start, size) in placed {
                    let loc = Location::Member {
                        frame_offset,
                        frame_len,
                        start,
                        size,
                    };
                    blobs
                        .insert(id.as_bytes(), loc.encode().as_slice())
                        .storage()?;
                }
            }
        }
        Ok(())
    }
}

/// Everything in the blob log that a record points at, with its offset, in the order of
/// the log (an empty blob shares its offset with what follows it).
fn log_extents(
    blobs: &redb::Table<[u8; 32], &[u8]>,
    trees: &redb::Table<[u8; 32], &[u8]>,
) -> Result<Vec<(u64, Extent)>, MaintenanceError> {
    let mut out = Vec::new();
    let mut frames: HashMap<u64, Vec<(BlobId, u64, u64)>> = HashMap::new();
    let mut frame_lens: HashMap<u64, u32> = HashMap::new();
    for item in blobs.iter().storage()? {
        let (k, v) = item.storage()?;
        let id = BlobId::from_bytes(k.value());
        match Location::decode(v.value()) {
            Some(Location::Packed {
                offset,
                len,
                size,
                codec,
            }) => out.push((
                offset,
                Extent::Packed {
                    id,
                    len,
                    size,
                    codec,
                },
            )),
            Some(Location::Member {
                frame_offset,
                frame_len,
                start,
                size,
            }) => {
                frames
                    .entry(frame_offset)
                    .or_default()
                    .push((id, start, size));
                // Members disagreeing on the length: the longest is read whole.
                let len = frame_lens.entry(frame_offset).or_default();
                *len = (*len).max(frame_len);
            }
            Some(Location::Chunked { .. }) | None => {}
        }
    }
    for item in trees.iter().storage()? {
        let (k, v) = item.storage()?;
        if let Some((&TREE_IN_LOG, body)) = v.value().split_first()
            && let Some((offset, len)) = blob::decode_extent(body)
        {
            let id = TreeId::from_bytes(k.value());
            out.push((offset, Extent::Tree { id, len }));
        }
    }
    for (offset, mut members) in frames {
        members.sort_by_key(|&(_, start, _)| start);
        let len = frame_lens[&offset];
        out.push((offset, Extent::Frame { len, members }));
    }
    out.sort_by_key(|(offset, _)| *offset);
    Ok(out)
}

/// The segments `len` bytes at `offset` of the log lie in, with how many bytes in each (an
/// empty extent: its segment, with none).
fn pieces(offset: u64, len: u32, seg: u64) -> impl Iterator<Item = (u64, u64)> {
    let end = offset + u64::from(len);
    let first = offset / seg;
    let last = if len == 0 { first } else { (end - 1) / seg };
    (first..=last).map(move |index| {
        let from = offset.max(index * seg);
        let to = end.min((index + 1) * seg);
        (index, to.saturating_sub(from))
    })
}

fn dead_keys(
    table: &redb::Table<[u8; 32], &[u8]>,
    is_live: impl Fn([u8; 32]) -> bool,
    record_bytes: impl Fn(&[u8]) -> u64,
    bytes: &mut u64,
) -> Result<Vec<[u8; 32]>, MaintenanceError> {
    let mut out = Vec::new();
    for item in table.iter().storage()? {
        let (k, v) = item.storage()?;
        if !is_live(k.value()) {
            *bytes += record_bytes(v.value());
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
