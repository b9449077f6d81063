//! [`Reader`]: a consistent, read-only view of a store, and the stored records' decoding.

use std::collections::{BTreeSet, BinaryHeap, HashSet};
use std::io::Write;
use std::sync::Arc;

use camino::{Utf8Path, Utf8PathBuf};
use redb::{ReadOnlyTable, ReadableTable};

use super::blob::Location;
use super::contain::Health;
use super::error::StorageResult;

use super::blob::CHUNK_BYTES;
use super::error::*;
use crate::id::{BlobId, IdPrefix, ObjectId, SnapshotId, TreeId};
use crate::object::{Snapshot, Tree};

use crate::object::ObjectKind;

use super::batch::*;
use super::side::{KeyValue, ScopedEntry, SideTable, scope_bounds};

/// A `trees` record's codec byte: the encoding follows raw.
pub(crate) const TREE_RAW: u8 = 0;
/// The encoding follows as one zstd frame.
pub(crate) const TREE_ZSTD: u8 = 1;
/// The encoding is a zstd frame in the blob log; its offset and length follow as varints.
pub(crate) const TREE_IN_LOG: u8 = 2;

/// Decodes a stored tree value and checks it against its id; `read_log` reads the blob
/// log (offset, length) for a record kept there.
pub(crate) fn decode_tree_value(
    id: TreeId,
    value: &[u8],
    read_log: impl FnOnce(u64, u32) -> Result<Vec<u8>, ReadError>,
) -> Result<Tree, ReadError> {
    let corrupt = |reason: String| ReadError::corrupt(ObjectKind::Tree, id, reason);
    let Some((&codec, body)) = value.split_first() else {
        return Err(corrupt("empty record".into()));
    };
    let unzstd = |frame: &[u8]| {
        super::blob::decompress_frame(frame)
            .map_err(|e| ReadError::damaged(ObjectKind::Tree, id, Damage::Zstd(e)))
    };
    let owned;
    let encoded = match codec {
        TREE_RAW => body,
        TREE_ZSTD => {
            owned = unzstd(body)?;
            owned.as_slice()
        }
        TREE_IN_LOG => {
            let (offset, len) = super::blob::decode_extent(body)
                .ok_or_else(|| corrupt("unreadable blob log record".into()))?;
            owned = unzstd(&read_log(offset, len)?)?;
            owned.as_slice()
        }
        other => return Err(corrupt(format!("unknown codec {other}"))),
    };
    if crate::object::hash_with(crate::object::TREE_CONTEXT, encoded) != *id.as_bytes() {
        return Err(corrupt("encoding does not match its hash".into()));
    }
    Tree::decode(encoded).map_err(|e| ReadError::damaged(ObjectKind::Tree, id, Damage::Object(e)))
}

/// Decodes a stored snapshot and checks it against its id.
pub(crate) fn decode_snapshot_value(id: SnapshotId, value: &[u8]) -> Result<Snapshot, ReadError> {
    if crate::object::hash_with(crate::object::SNAPSHOT_CONTEXT, value) != *id.as_bytes() {
        return Err(ReadError::corrupt(
            ObjectKind::Snapshot,
            id,
            "encoding does not match its hash",
        ));
    }
    Snapshot::decode(value)
        .map_err(|e| ReadError::damaged(ObjectKind::Snapshot, id, Damage::Object(e)))
}

/// A consistent, read-only view of the store. Cheap to create; many may exist at once.
pub struct Reader {
    pub(super) health: Arc<Health>,
    pub(super) blobs: ReadOnlyTable<[u8; 32], &'static [u8]>,
    pub(super) segments: ReadOnlyTable<u64, &'static [u8]>,
    pub(super) trees: ReadOnlyTable<[u8; 32], &'static [u8]>,
    pub(super) snapshots: ReadOnlyTable<[u8; 32], &'static [u8]>,
    pub(super) refs: ReadOnlyTable<&'static str, [u8; 32]>,
    /// Every side table written so far, by database name.
    pub(super) sides: super::side::SideTables,
    pub(super) segment_bytes: u64,
    /// The frames of small blobs read last, decoded.
    pub(super) frames: super::frame::FrameCache,
}

/// The bytes a `trees` record takes in the store: the record, and what it keeps in the blob
/// log.
pub(crate) fn tree_record_bytes(value: &[u8]) -> u64 {
    let in_log = match value.split_first() {
        Some((&TREE_IN_LOG, body)) => super::blob::decode_extent(body).map_or(0, |(_, l)| l),
        _ => 0,
    };
    value.len() as u64 + u64::from(in_log)
}

impl Reader {
    pub(super) fn location(&self, id: BlobId) -> Result<Location, ReadError> {
        self.health.run(|| {
            let Some(v) = self.blobs.get(id.as_bytes()).storage()? else {
                return Err(ReadError::NotFound {
                    kind: ObjectKind::Blob,
                    id: id.into(),
                });
            };
            Location::decode(v.value()).ok_or_else(|| {
                ReadError::corrupt(ObjectKind::Blob, id, "unreadable location record")
            })
        })
    }

    /// True if the blob is stored.
    pub fn has_blob(&self, id: BlobId) -> Result<bool, StorageFailure> {
        self.health
            .run(|| Ok(self.blobs.get(id.as_bytes()).storage()?.is_some()))
    }

    /// True if the tree is stored.
    pub fn has_tree(&self, id: TreeId) -> Result<bool, StorageFailure> {
        self.health
            .run(|| Ok(self.trees.get(id.as_bytes()).storage()?.is_some()))
    }

    /// True if the snapshot is stored.
    pub fn has_snapshot(&self, id: SnapshotId) -> Result<bool, StorageFailure> {
        self.health
            .run(|| Ok(self.snapshots.get(id.as_bytes()).storage()?.is_some()))
    }

    /// The bytes a tree's or snapshot's record takes in the store (0 if absent), as `gc`
    /// counts them.
    pub(super) fn record_len(&self, kind: ObjectKind, id: ObjectId) -> Result<u64, StorageFailure> {
        self.health.run(|| {
            let table = match kind {
                ObjectKind::Tree => &self.trees,
                ObjectKind::Snapshot => &self.snapshots,
                ObjectKind::Blob => return Ok(0),
            };
            Ok(table
                .get(id.as_bytes())
                .storage()?
                .map_or(0, |v| match kind {
                    ObjectKind::Tree => tree_record_bytes(v.value()),
                    _ => v.value().len() as u64,
                }))
        })
    }

    /// True if the store lacks snapshot `id` because `gc` pruned it from the history of a
    /// snapshot it kept (see [`PRUNED`](crate::PRUNED)): history ends there.
    pub fn pruned(&self, id: SnapshotId) -> Result<bool, StorageFailure> {
        Ok(!self.has_snapshot(id)?
            && self
                .side_get(super::side::PRUNED, "", id.as_bytes())?
                .is_some())
    }

    /// True if a parent `id` that the store lacks is meant to be missing: it is on a remote
    /// or `gc` pruned it.
    pub fn absent_by_design(&self, id: SnapshotId) -> Result<bool, StorageFailure> {
        Ok(self.pruned(id)? || (!self.has_snapshot(id)? && self.promised(id.into())?.is_some()))
    }

    /// The size of a stored blob, without reading it.
    pub fn blob_size(&self, id: BlobId) -> Result<u64, ReadError> {
        Ok(self.location(id)?.size())
    }

    /// A blob's bytes, verified against its id.
    pub fn blob(&self, id: BlobId) -> Result<Vec<u8>, ReadError> {
        let mut out = Vec::new();
        self.write_blob_to(id, &mut out)?;
        Ok(out)
    }

    pub(super) fn packed(&self, id: BlobId) -> Result<Vec<u8>, ReadError> {
        self.health.run(|| match self.location(id)? {
            Location::Packed {
                offset,
                len,
                size,
                codec,
            } => {
                // Payloads are never larger than their chunk (else stored raw): a damaged
                // length must not make a huge allocation.
                if u64::from(len) > CHUNK_BYTES as u64 {
                    return Err(ReadError::corrupt(
                        ObjectKind::Blob,
                        id,
                        format!("stored length {len} is more than a chunk"),
                    ));
                }
                let payload = self.read_log(ObjectKind::Blob, id.into(), offset, len)?;
                super::blob::unpack(id, codec, payload, size)
            }
            Location::Member {
                frame_offset,
                frame_len,
                start,
                size,
            } => {
                let frame = self.frames.get_or_load(frame_offset, || {
                    if u64::from(frame_len) > super::frame::MAX_FRAME_BYTES {
                        return Err(ReadError::corrupt(
                            ObjectKind::Blob,
                            id,
                            format!("its group's frame of {frame_len} bytes is too large"),
                        ));
                    }
                    let stored =
                        self.read_log(ObjectKind::Blob, id.into(), frame_offset, frame_len)?;
                    super::frame::decode_frame(id, &stored)
                })?;
                super::frame::member_content(id, &frame, start, size)
            }
            Location::Chunked { .. } => Err(ReadError::corrupt(
                ObjectKind::Blob,
                id,
                "a chunk that is itself chunked",
            )),
        })
    }

    /// Reads `len` bytes at `offset` of the blob log for object `id` of `kind`.
    pub(super) fn read_log(
        &self,
        kind: ObjectKind,
        id: ObjectId,
        offset: u64,
        len: u32,
    ) -> Result<Vec<u8>, ReadError> {
        super::blob::read_log(&self.segments, self.segment_bytes, (kind, id), offset, len)
    }

    /// Decodes `trees` record `value` of tree `id` and checks it against its id.
    pub(super) fn tree_from_record(&self, id: TreeId, value: &[u8]) -> Result<Tree, ReadError> {
        decode_tree_value(id, value, |offset, len| {
            self.read_log(ObjectKind::Tree, id.into(), offset, len)
        })
    }

    /// For every frame of small blobs, by its offset in the log: the bytes of the members
    /// recorded in it, which each member's share of the frame is counted against.
    pub(super) fn frame_members_bytes(
        &self,
    ) -> Result<std::collections::HashMap<u64, u64>, StorageFailure> {
        self.health.run(|| {
            let mut out = std::collections::HashMap::new();
            for item in self.blobs.iter().storage()? {
                let (_, v) = item.storage()?;
                if let Some(Location::Member {
                    frame_offset, size, ..
                }) = Location::decode(v.value())
                {
                    let total: &mut u64 = out.entry(frame_offset).or_default();
                    *total = total.saturating_add(size);
                }
            }
            Ok(out)
        })
    }

    /// Streams a blob into `sink`, one verified chunk at a time, and checks the whole content
    /// against `id` at the end. On error the sink may hold a prefix of verified chunks: write
    /// to a temporary file and keep it only on `Ok`.
    pub fn write_blob_to(&self, id: BlobId, sink: &mut impl Write) -> Result<u64, ReadError> {
        let sink_err = |source| ReadError::Sink {
            id: id.into(),
            source,
        };
        let chunks = self.blob_chunks(id)?;
        let mut hasher = blake3::Hasher::new();
        let mut written = 0u64;
        for chunk in (0..chunks.ids().len()).filter_map(|i| chunks.chunk(i)) {
            let bytes = self.chunk(chunk)?;
            if chunks.ids().len() > 1 {
                hasher.update(&bytes);
            }
            written += bytes.len() as u64;
            sink.write_all(&bytes).map_err(sink_err)?;
        }
        // A blob of one piece was checked whole as it was read.
        if chunks.ids().len() > 1 && hasher.finalize().as_bytes() != id.as_bytes() {
            return Err(ReadError::corrupt(
                ObjectKind::Blob,
                id,
                "chunks do not add up to the blob",
            ));
        }
        Ok(written)
    }

    /// A tree, verified against its id.
    pub fn tree(&self, id: TreeId) -> Result<Tree, ReadError> {
        self.health.run(|| {
            let Some(v) = self.trees.get(id.as_bytes()).storage()? else {
                return Err(ReadError::NotFound {
                    kind: ObjectKind::Tree,
                    id: id.into(),
                });
            };
            self.tree_from_record(id, v.value())
        })
    }

    /// A snapshot, verified against its id.
    pub fn snapshot(&self, id: SnapshotId) -> Result<Snapshot, ReadError> {
        self.health.run(|| {
            let Some(v) = self.snapshots.get(id.as_bytes()).storage()? else {
                return Err(ReadError::NotFound {
                    kind: ObjectKind::Snapshot,
                    id: id.into(),
                });
            };
            decode_snapshot_value(id, v.value())
        })
    }

    /// Where ref `name` points.
    pub fn ref_target(&self, name: &str) -> Result<Option<SnapshotId>, StorageFailure> {
        self.health.run(|| {
            Ok(self
                .refs
                .get(name)
                .storage()?
                .map(|v| SnapshotId::from_bytes(v.value())))
        })
    }

    /// Every ref, by name.
    pub fn refs(&self) -> Result<Vec<(String, SnapshotId)>, StorageFailure> {
        self.health.run(|| {
            let mut out = Vec::new();
            for item in self.refs.iter().storage()? {
                let (k, v) = item.storage()?;
                out.push((k.value().to_owned(), SnapshotId::from_bytes(v.value())));
            }
            Ok(out)
        })
    }

    pub(super) fn prefix_matches(
        table: &ReadOnlyTable<[u8; 32], &'static [u8]>,
        prefix: &IdPrefix,
        out: &mut Vec<ObjectId>,
    ) -> Result<(), StorageFailure> {
        let (low, high) = (prefix.low(), prefix.high());
        for item in table.range::<&[u8; 32]>(&low..=&high).storage()? {
            let (k, _) = item.storage()?;
            out.push(ObjectId::from_bytes(k.value()));
            if out.len() > 16 {
                break;
            }
        }
        Ok(())
    }

    /// Resolves a ref name or unique id prefix (at least 6 hex digits) to a snapshot.
    /// Checkpoint names are worktree-specific and resolved by the caller first.
    pub fn resolve_snapshot(&self, spec: &str) -> Result<SnapshotId, ResolveError> {
        self.health.run(|| {
            if let Some(id) = self.ref_target(spec)? {
                return Ok(id);
            }
            let unknown = || ResolveError::Unknown {
                spec: spec.to_owned(),
                wanted: "snapshot",
            };
            let prefix = IdPrefix::parse(spec).ok_or_else(unknown)?;
            let mut found = Vec::new();
            Self::prefix_matches(&self.snapshots, &prefix, &mut found)?;
            match found.as_slice() {
                [] => Err(unknown()),
                [one] => Ok(one.as_snapshot()),
                many => Err(ResolveError::Ambiguous {
                    spec: spec.to_owned(),
                    candidates: many.iter().map(|id| (ObjectKind::Snapshot, *id)).collect(),
                }),
            }
        })
    }

    /// Resolves a ref name or unique id prefix to an object of any kind.
    pub fn resolve_object(&self, spec: &str) -> Result<(ObjectKind, ObjectId), ResolveError> {
        self.health.run(|| {
            if let Some(id) = self.ref_target(spec)? {
                return Ok((ObjectKind::Snapshot, id.into()));
            }
            let unknown = || ResolveError::Unknown {
                spec: spec.to_owned(),
                wanted: "object",
            };
            let prefix = IdPrefix::parse(spec).ok_or_else(unknown)?;
            let mut candidates = BTreeSet::new();
            for (kind, table) in [
                (ObjectKind::Snapshot, &self.snapshots),
                (ObjectKind::Tree, &self.trees),
                (ObjectKind::Blob, &self.blobs),
            ] {
                let mut found = Vec::new();
                Self::prefix_matches(table, &prefix, &mut found)?;
                candidates.extend(found.into_iter().map(|id| (kind, id)));
            }
            let mut candidates: Vec<_> = candidates.into_iter().collect();
            match candidates.len() {
                0 => Err(unknown()),
                1 => Ok(candidates.remove(0)),
                _ => Err(ResolveError::Ambiguous {
                    spec: spec.to_owned(),
                    candidates,
                }),
            }
        })
    }

    /// History from `start`: it and its ancestors, newest first (by creation time, ties by
    /// id), at most `limit` of them. It ends at parents `gc` pruned.
    pub fn log(
        &self,
        start: SnapshotId,
        limit: Option<usize>,
    ) -> Result<Vec<(SnapshotId, Snapshot)>, ReadError> {
        self.health.run(|| {
            let mut out = Vec::new();
            let mut seen = HashSet::new();
            let mut loaded = std::collections::HashMap::new();
            let mut queue = BinaryHeap::new();
            let first = self.snapshot(start)?;
            seen.insert(start);
            queue.push((first.created, start));
            loaded.insert(start, first);
            while let Some((_, id)) = queue.pop() {
                if limit.is_some_and(|n| out.len() >= n) {
                    break;
                }
                let Some(snap) = loaded.remove(&id) else {
                    continue;
                };
                for &p in &snap.parents {
                    // History that `gc` pruned ends here.
                    if !self.pruned(p)? && seen.insert(p) {
                        let parent = self.snapshot(p).map_err(ReadError::as_referenced)?;
                        queue.push((parent.created, p));
                        loaded.insert(p, parent);
                    }
                }
                out.push((id, snap));
            }
            Ok(out)
        })
    }

    /// Refuses a batch whose trees or snapshots name an object that neither the batch nor
    /// the store holds (the [`WriteError::Dangling`] that [`Store::write`](crate::Store::write) would give for
    /// them): for writers that commit a batch later, with more added to it. Refs, registry
    /// records and the parts of chunked blobs are not checked here.
    pub fn check_references(&self, batch: &WriteBatch) -> Result<(), WriteError> {
        self.health.run(|| {
            let blobs: HashSet<BlobId> = batch.blobs.iter().map(|b| b.id).collect();
            let trees: HashSet<TreeId> = batch.trees.iter().map(|(id, _)| *id).collect();
            let snapshots: HashSet<SnapshotId> =
                batch.snapshots.iter().map(|(id, _)| *id).collect();
            let dangling = |kind, id| Err(WriteError::Dangling { kind, id });
            for (id, tree) in &batch.trees {
                if self.has_tree(*id)? {
                    continue;
                }
                for entry in tree.entries() {
                    match (entry.blob(), entry.tree()) {
                        (Some(b), _) if !blobs.contains(&b) && !self.has_blob(b)? => {
                            return dangling(ObjectKind::Blob, entry.id);
                        }
                        (_, Some(t)) if !trees.contains(&t) && !self.has_tree(t)? => {
                            return dangling(ObjectKind::Tree, entry.id);
                        }
                        _ => {}
                    }
                }
            }
            for (_, snap) in &batch.snapshots {
                if !trees.contains(&snap.tree) && !self.has_tree(snap.tree)? {
                    return dangling(ObjectKind::Tree, snap.tree.into());
                }
                for p in &snap.parents {
                    if !snapshots.contains(p) && !self.has_snapshot(*p)? {
                        return dangling(ObjectKind::Snapshot, (*p).into());
                    }
                }
            }
            Ok(())
        })
    }

    /// The intent journal of an unfinished operation on directory `dir`, if any (see
    /// [`JOURNALS`](crate::JOURNALS)).
    pub fn journal(&self, dir: &Utf8Path) -> Result<Option<Vec<u8>>, StorageFailure> {
        self.side_get(super::side::JOURNALS, dir.as_str(), b"")
    }

    /// Every directory with an unfinished operation.
    pub fn journaled_dirs(&self) -> Result<Vec<Utf8PathBuf>, StorageFailure> {
        Ok(self
            .side_entries(super::side::JOURNALS)?
            .into_iter()
            .map(|(dir, _, _)| Utf8PathBuf::from(dir))
            .collect())
    }
}

impl Reader {
    // Side tables (see `side`).

    /// The value of `key` in `scope` of `table`.
    pub fn side_get(
        &self,
        table: SideTable,
        scope: &str,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, StorageFailure> {
        self.health.run(|| {
            let Some(t) = self.side_table(table) else {
                return Ok(None);
            };
            Ok(t.get((scope, key)).storage()?.map(|v| v.value().to_vec()))
        })
    }

    /// Every entry of `scope` in `table`, sorted by key: (key, value).
    pub fn side_scope(
        &self,
        table: SideTable,
        scope: &str,
    ) -> Result<Vec<KeyValue>, StorageFailure> {
        let mut out = Vec::new();
        self.side_scope_each(table, scope, |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })?;
        Ok(out)
    }

    /// Calls `f` on every entry of `scope` in `table`, in key order, while it returns true.
    pub fn side_scope_each(
        &self,
        table: SideTable,
        scope: &str,
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageFailure> {
        self.health.run(|| {
            let Some(t) = self.side_table(table) else {
                return Ok(());
            };
            let (low, high) = scope_bounds(scope);
            let range = t
                .range::<(&str, &[u8])>((low.as_str(), &[][..])..(high.as_str(), &[][..]))
                .storage()?;
            for item in range {
                let (k, v) = item.storage()?;
                if !f(k.value().1, v.value()) {
                    break;
                }
            }
            Ok(())
        })
    }

    /// Calls `f` on every entry of `scope` in `table` whose key starts with `prefix`, in
    /// key order, while it returns true: a lookup costing per entry matched, not per entry
    /// of the scope.
    pub fn side_prefix_each(
        &self,
        table: SideTable,
        scope: &str,
        prefix: &[u8],
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageFailure> {
        self.health.run(|| {
            let Some(t) = self.side_table(table) else {
                return Ok(());
            };
            let (_, high) = scope_bounds(scope);
            let range = t
                .range::<(&str, &[u8])>((scope, prefix)..(high.as_str(), &[][..]))
                .storage()?;
            for item in range {
                let (k, v) = item.storage()?;
                let (k_scope, key) = k.value();
                if k_scope != scope || !key.starts_with(prefix) || !f(key, v.value()) {
                    break;
                }
            }
            Ok(())
        })
    }

    /// The last entry of `scope` in `table`, by key.
    pub fn side_last(
        &self,
        table: SideTable,
        scope: &str,
    ) -> Result<Option<KeyValue>, StorageFailure> {
        self.health.run(|| match self.side_table(table) {
            Some(t) => super::side::last_in_scope(t, scope),
            None => Ok(None),
        })
    }

    /// Every entry of `table`: (scope, key, value), sorted by scope, then key.
    pub fn side_entries(&self, table: SideTable) -> Result<Vec<ScopedEntry>, StorageFailure> {
        self.health.run(|| {
            let Some(t) = self.side_table(table) else {
                return Ok(Vec::new());
            };
            let mut out = Vec::new();
            for item in t.iter().storage()? {
                let (k, v) = item.storage()?;
                let (scope, key) = k.value();
                out.push((scope.to_owned(), key.to_vec(), v.value().to_vec()));
            }
            Ok(out)
        })
    }

    /// The value recorded for object `id` in a table [keyed by object](SideTable::keyed_by_object).
    pub fn side_of_object(
        &self,
        table: SideTable,
        id: ObjectId,
    ) -> Result<Option<Vec<u8>>, StorageFailure> {
        self.side_get(table, "", id.as_bytes())
    }

    fn side_table(&self, table: SideTable) -> Option<&super::side::SideReadTable> {
        self.sides.get(table)
    }
}
