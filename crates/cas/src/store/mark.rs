//! `gc`'s mark phase: what stays, who keeps it, and under a size budget how much of the
//! history fits.

use std::collections::{BinaryHeap, HashMap, HashSet};

use super::attested::{ATTESTATION_SIGNATURES, ATTESTATIONS};
use super::blob::Location;
use super::error::{MaintenanceError, ReadError};
use super::frame::member_share;
use super::owner::{HistoryEntry, Keeper, Roots, SideOwner};
use super::reader::Reader;
use super::side::{Rewrite, SideKey};
use crate::id::{AttestationId, BlobId, SnapshotId, TreeId};
use crate::object::ObjectKind;

/// Objects that stay.
#[derive(Default)]
pub(super) struct Live {
    pub(super) snapshots: HashSet<SnapshotId>,
    pub(super) trees: HashSet<TreeId>,
    pub(super) blobs: HashSet<BlobId>,
    /// Root trees of live snapshots: their attestations stay.
    pub(super) roots: HashSet<TreeId>,
}

/// Stored bytes that something named or recent keeps, so no budget can free them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Retained {
    /// What keeps them.
    #[serde(flatten)]
    pub keeper: Keeper,
    /// The snapshot it keeps.
    pub snapshot: SnapshotId,
    /// Stored bytes it keeps that no keeper listed before it does (so the entries add up
    /// to what every keeper together keeps).
    pub bytes: u64,
}

/// The outcome of marking.
pub(super) struct Marked {
    pub(super) live: Live,
    /// Stored bytes of `live`.
    pub(super) live_bytes: u64,
    /// Stored bytes the keepers keep: `live_bytes` with no history at all.
    pub(super) kept_bytes: u64,
    /// Side entries to delete: those the owners asked for and history the budget dropped.
    pub(super) drop: Vec<SideKey>,
    /// Parts of side entries the budget dropped.
    pub(super) dropped_parts: Vec<HistoryEntry>,
    /// What the owners made of the entries those parts were of.
    pub(super) rewrites: Vec<Rewrite>,
    /// What keepers keep, those keeping nothing new left out.
    pub(super) retained: Vec<Retained>,
    /// Parents of live snapshots that are not live: what [`PRUNED`](super::side::PRUNED)
    /// is to hold.
    pub(super) cut: Vec<SnapshotId>,
    /// History entries and ancestors the budget kept that added bytes (0 without a budget).
    pub(super) optional_kept: usize,
    /// Attestations whose tree no live snapshot has (their records and signatures are in
    /// `drop`).
    pub(super) attestations_dropped: Vec<AttestationId>,
}

/// What some roots reach beyond what is already live.
#[derive(Default)]
struct Reach {
    added: Live,
    bytes: u64,
    parents: Vec<SnapshotId>,
}

/// What the budget may keep: snapshots and, for a history entry, the entry with its
/// owner's index.
type Candidate = (Vec<SnapshotId>, Option<(usize, HistoryEntry)>);

/// A budget's tiers, kept highest first: history and ancestors (newest first), then spare
/// entries (most recent first), so no history goes while a spare entry could instead.
const HISTORY: u8 = 1;
const SPARE: u8 = 0;

struct Marker<'r> {
    reader: &'r Reader,
    /// What the members of each frame of small blobs add up to, by the frame's offset: a
    /// member counts for its share of the frame.
    frame_members: HashMap<u64, u64>,
    live: Live,
    bytes: u64,
    /// Parents of every live snapshot.
    parents: HashSet<SnapshotId>,
}

/// Marks from refs and every owner's roots. Without `budget`, everything the roots and the
/// history reach stays, ancestry included. With it, the keepers keep their snapshots (not
/// their ancestry), then history entries and ancestors are kept newest first while the
/// stored bytes stay within `budget`; from the first that does not fit on, the rest go,
/// except what adds nothing.
pub(super) fn mark(
    reader: &Reader,
    owners: &[&dyn SideOwner],
    budget: Option<u64>,
) -> Result<Marked, MaintenanceError> {
    let mut keepers: Vec<(SnapshotId, Keeper)> = reader
        .refs()?
        .into_iter()
        .map(|(name, id)| (id, Keeper::new("ref").named(name)))
        .collect();
    // Each history entry with the index of its owner.
    let mut history: Vec<(usize, HistoryEntry)> = Vec::new();
    let mut spare: Vec<(usize, HistoryEntry)> = Vec::new();
    let mut kept_trees: Vec<TreeId> = Vec::new();
    let mut drop = Vec::new();
    for (index, owner) in owners.iter().enumerate() {
        let mut roots = Roots::default();
        owner
            .roots(reader, &mut roots)
            .map_err(|source| MaintenanceError::Owner {
                owner: owner.name(),
                source,
            })?;
        keepers.extend(roots.kept);
        keepers.extend(
            roots
                .snapshots
                .into_iter()
                .map(|id| (id, Keeper::new(owner.name()))),
        );
        history.extend(roots.history.into_iter().map(|e| (index, e)));
        spare.extend(roots.spare.into_iter().map(|e| (index, e)));
        kept_trees.extend(roots.trees);
        drop.extend(roots.drop);
    }

    // What names a snapshot is listed (and credited with its bytes) before what merely
    // holds it.
    keepers.sort_by_key(|(_, keeper)| rank(keeper.reason));
    let ancestry = budget.is_none();
    let mut marker = Marker {
        reader,
        frame_members: reader.frame_members_bytes()?,
        live: Live::default(),
        bytes: 0,
        parents: HashSet::new(),
    };
    let mut retained = Vec::new();
    for (snapshot, keeper) in keepers {
        let reach = marker.reach(&[snapshot], ancestry)?;
        if reach.bytes > 0 {
            retained.push(Retained {
                keeper,
                snapshot,
                bytes: reach.bytes,
            });
        }
        marker.take(reach);
    }
    let reach = marker.reach_from(&[], &kept_trees, false)?;
    marker.take(reach);
    let kept_bytes = marker.bytes;
    let (optional_kept, dropped) = match budget {
        None => {
            for (_, entry) in history.iter().chain(&spare) {
                let reach = marker.reach(&entry.snapshots, true)?;
                marker.take(reach);
            }
            (0, Vec::new())
        }
        Some(budget) => marker.fit(history, spare, budget)?,
    };
    let (parts, whole): (Vec<_>, Vec<_>) = dropped.into_iter().partition(|(_, e)| e.part.is_some());
    drop.extend(whole.into_iter().map(|(_, e)| e.key));
    let mut rewrites = Vec::new();
    for (index, owner) in owners.iter().enumerate() {
        let mine: Vec<HistoryEntry> = parts
            .iter()
            .filter(|(i, _)| *i == index)
            .map(|(_, e)| e.clone())
            .collect();
        if !mine.is_empty() {
            rewrites.extend(owner.forget(reader, &mine).map_err(|source| {
                MaintenanceError::Owner {
                    owner: owner.name(),
                    source,
                }
            })?);
        }
    }
    let attestations_dropped = marker.attestations(&mut drop)?;
    let cut = marker.cut()?;
    Ok(Marked {
        live: marker.live,
        live_bytes: marker.bytes,
        kept_bytes,
        drop,
        dropped_parts: parts.into_iter().map(|(_, e)| e).collect(),
        rewrites,
        retained,
        cut,
        optional_kept,
        attestations_dropped,
    })
}

/// Where a keeper's reason comes in `retained`: names first, then states, then the rest.
fn rank(reason: &str) -> u8 {
    match reason {
        "ref" => 0,
        "remote ref" => 1,
        "named checkpoint" => 2,
        "task baseline" => 3,
        "worktree head" => 4,
        "checkpoint" => 5,
        "mount base" => 6,
        "undo" => 7,
        "recent op" => 8,
        _ => 9,
    }
}

impl Marker<'_> {
    /// What `roots` reach (with their ancestry if `ancestry`) that is not live yet.
    fn reach(&self, roots: &[SnapshotId], ancestry: bool) -> Result<Reach, MaintenanceError> {
        self.reach_from(roots, &[], ancestry)
    }

    /// What the snapshots `roots` (with their ancestry if `ancestry`) and the trees
    /// `tree_roots` reach that is not live yet.
    fn reach_from(
        &self,
        roots: &[SnapshotId],
        tree_roots: &[TreeId],
        ancestry: bool,
    ) -> Result<Reach, MaintenanceError> {
        let reader = self.reader;
        let mut out = Reach::default();
        let mut pending = roots.to_vec();
        let mut trees = tree_roots.to_vec();
        while let Some(id) = pending.pop() {
            if self.live.snapshots.contains(&id) || out.added.snapshots.contains(&id) {
                continue;
            }
            if reader.absent_by_design(id)? {
                continue;
            }
            out.added.snapshots.insert(id);
            let snap = reader.snapshot(id).map_err(MaintenanceError::Unsafe)?;
            out.bytes += reader.record_len(ObjectKind::Snapshot, id.into())?;
            out.added.roots.insert(snap.tree);
            trees.push(snap.tree);
            out.parents.extend(&snap.parents);
            if ancestry {
                pending.extend(snap.parents);
            }
        }
        while let Some(id) = trees.pop() {
            if self.live.trees.contains(&id) || !out.added.trees.insert(id) {
                continue;
            }
            if !reader.has_tree(id)? && reader.promised(id.into())?.is_some() {
                continue;
            }
            let tree = reader.tree(id).map_err(MaintenanceError::Unsafe)?;
            out.bytes += reader.record_len(ObjectKind::Tree, id.into())?;
            for entry in tree.entries() {
                match (entry.blob(), entry.tree()) {
                    (Some(b), _) => self.reach_blob(b, &mut out)?,
                    (_, Some(t)) => trees.push(t),
                    _ => {}
                }
            }
        }
        Ok(out)
    }

    fn reach_blob(&self, id: BlobId, out: &mut Reach) -> Result<(), MaintenanceError> {
        if self.live.blobs.contains(&id) || !out.added.blobs.insert(id) {
            return Ok(());
        }
        let location = match self.reader.location(id) {
            Ok(location) => location,
            // Only promised by a remote (a lazily mounted snapshot's): nothing here to keep.
            Err(ReadError::NotFound { .. }) if self.reader.promised(id.into())?.is_some() => {
                return Ok(());
            }
            Err(e) => return Err(MaintenanceError::Unsafe(e)),
        };
        match location {
            Location::Packed { len, .. } => out.bytes += u64::from(len),
            Location::Member {
                frame_offset,
                frame_len,
                size,
                ..
            } => {
                let members = self.frame_members.get(&frame_offset).copied().unwrap_or(0);
                out.bytes += member_share(frame_len, size, members);
            }
            Location::Chunked { chunks, .. } => {
                for chunk in chunks {
                    self.reach_blob(chunk, out)?;
                }
            }
        }
        Ok(())
    }

    fn take(&mut self, reach: Reach) {
        self.live.snapshots.extend(reach.added.snapshots);
        self.live.trees.extend(reach.added.trees);
        self.live.blobs.extend(reach.added.blobs);
        self.live.roots.extend(reach.added.roots);
        self.bytes += reach.bytes;
        self.parents.extend(reach.parents);
    }

    /// Keeps history entries (each with its owner's index) and ancestors of what is live,
    /// newest first, then spare entries, most recent first, while the stored bytes stay
    /// within `budget`. Returns how many that added bytes it kept, and the entries it
    /// dropped.
    fn fit(
        &mut self,
        history: Vec<(usize, HistoryEntry)>,
        spare: Vec<(usize, HistoryEntry)>,
        budget: u64,
    ) -> Result<(usize, Vec<(usize, HistoryEntry)>), MaintenanceError> {
        // Each candidate: the snapshots it keeps and, for a history entry, the entry.
        let mut candidates: Vec<Candidate> = Vec::new();
        let mut queue = BinaryHeap::new();
        for (tier, entries) in [(HISTORY, history), (SPARE, spare)] {
            for (owner, entry) in entries {
                queue.push((tier, entry.time, candidates.len()));
                candidates.push((entry.snapshots.clone(), Some((owner, entry))));
            }
        }
        let mut dropped = Vec::new();
        let mut queued: HashSet<SnapshotId> = HashSet::new();
        let parents: Vec<SnapshotId> = self.parents.iter().copied().collect();
        self.queue_ancestors(&parents, &mut queued, &mut candidates, &mut queue)?;
        let mut full = false;
        let mut kept = 0;
        while let Some((_, _, index)) = queue.pop() {
            let reach = self.reach(&candidates[index].0, false)?;
            if reach.bytes == 0 || (!full && self.bytes + reach.bytes <= budget) {
                if reach.bytes > 0 {
                    kept += 1;
                }
                let parents = reach.parents.clone();
                self.take(reach);
                self.queue_ancestors(&parents, &mut queued, &mut candidates, &mut queue)?;
                continue;
            }
            full = true;
            if let Some(entry) = candidates[index].1.take() {
                dropped.push(entry);
            }
        }
        Ok((kept, dropped))
    }

    /// Queues the stored parents not yet live or queued, by their creation time.
    fn queue_ancestors(
        &self,
        parents: &[SnapshotId],
        queued: &mut HashSet<SnapshotId>,
        candidates: &mut Vec<Candidate>,
        queue: &mut BinaryHeap<(u8, jiff::Timestamp, usize)>,
    ) -> Result<(), MaintenanceError> {
        for &p in parents {
            if self.live.snapshots.contains(&p)
                || !self.reader.has_snapshot(p)?
                || !queued.insert(p)
            {
                continue;
            }
            let created = self
                .reader
                .snapshot(p)
                .map_err(MaintenanceError::Unsafe)?
                .created;
            queue.push((HISTORY, created, candidates.len()));
            candidates.push((vec![p], None));
        }
        Ok(())
    }

    /// Keeps the output blobs of the attestations of live root trees; adds the records of
    /// the others, with their signatures, to `drop`, and returns their ids. A record that
    /// does not say its tree or its blobs is kept as it is, for `fsck` to report.
    fn attestations(
        &mut self,
        drop: &mut Vec<SideKey>,
    ) -> Result<Vec<AttestationId>, MaintenanceError> {
        let mut dropped = Vec::new();
        for (scope, key, value) in self.reader.attestation_records()? {
            let (Ok(tree), Ok(id)) = (
                scope.parse::<TreeId>(),
                <[u8; 32]>::try_from(key.as_slice()),
            ) else {
                continue;
            };
            let id = AttestationId::from_bytes(id);
            if self.live.roots.contains(&tree) {
                let Ok(attestation) = crate::attestation::decode_attestation(id, &value) else {
                    continue;
                };
                let mut reach = Reach::default();
                for output in [attestation.stdout, attestation.stderr] {
                    if self.reader.has_blob(output.blob)? {
                        self.reach_blob(output.blob, &mut reach)?;
                    }
                }
                self.take(reach);
                continue;
            }
            drop.push(SideKey {
                table: ATTESTATIONS,
                scope,
                key,
            });
            for (fingerprint, _) in self
                .reader
                .side_scope(ATTESTATION_SIGNATURES, &id.to_hex())?
            {
                drop.push(SideKey {
                    table: ATTESTATION_SIGNATURES,
                    scope: id.to_hex(),
                    key: fingerprint,
                });
            }
            dropped.push(id);
        }
        Ok(dropped)
    }

    /// Parents of live snapshots that will be missing on purpose: not live, and either
    /// stored now (so about to go) or pruned before (see `Reader::pruned`).
    fn cut(&self) -> Result<Vec<SnapshotId>, MaintenanceError> {
        let mut out = Vec::new();
        for &p in &self.parents {
            if !self.live.snapshots.contains(&p)
                && (self.reader.has_snapshot(p)? || self.reader.pruned(p)?)
            {
                out.push(p);
            }
        }
        out.sort();
        Ok(out)
    }
}
