//! Fetch: bring snapshots from a remote, reading only the byte ranges of the objects this
//! store lacks, each checked as a local read is before anything is stored.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use futures_util::{StreamExt, TryStreamExt};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use cas::{
    BlobId, BlobPayload, FrameMember, ObjectId, ObjectKind, ReceivedFrame, Snapshot, SnapshotId,
    Tree, TreeId, VerifiedObject, WriteBatch,
};

use crate::Progress;
use crate::catalog::{CONCURRENCY, Catalog, Located};
use crate::error::{CorruptCause, RemoteError};
use crate::layout::{Encoding, pack_key};
use crate::transport::Remote;

/// How much of a snapshot's history to bring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// The snapshot and everything its tree reaches; its parents stay on the remote
    /// (recorded as promised there), as a partial clone leaves them.
    Closure,
    /// The snapshot and all its history.
    History,
    /// The snapshot and its trees (and symlinks' targets, which a listing shows), as
    /// [`Need::Closure`]; every other blob it reaches that the store lacks is recorded as
    /// promised by the remote, to be read when first used (a lazy mount).
    Trees,
}

/// What a fetch brought (SPEC's `pull` fields).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchOutcome {
    /// The snapshots now here, as asked.
    pub pulled: Vec<SnapshotId>,
    /// Objects received and stored.
    pub objects_received: u64,
    /// Payload bytes received.
    pub bytes_received: u64,
    /// Attestation records and signatures received (of the snapshots' trees).
    #[serde(default)]
    pub attestations_received: u64,
    /// What of the remote was skipped (files under `index/` that are no readable index),
    /// each naming the file and the remote.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Blobs fetched and written per batch, by payload bytes: a batch is held about three
/// times (as read, as checked, as written), so this bounds a fetch's memory.
const BATCH_BYTES: u64 = 8 << 20;
/// The largest zstd window a streamed payload may need (16 MiB; cairn's frames use 2).
const MAX_WINDOW_LOG: u32 = 24;
/// The most a blob read whole from a remote may decode to (larger ones come a chunk at a
/// time), and a tree or snapshot (decoded in memory) before it is refused.
const MAX_BLOB: u64 = cas::CHUNK_BYTES as u64;
const MAX_TREE: u64 = 256 << 20;

/// Brings `snapshots` from `remote` into `store` as `need` says; what the store has
/// already is not fetched. A fetch that lists only the remote's new indexes and then
/// misses an object, or a pack, lists them all once and tries again (`docs/format.md`:
/// a writer's clock may lag, a gc may have deleted a pack).
pub fn fetch(
    remote: &Remote,
    store: &cas::Store,
    snapshots: &[SnapshotId],
    need: Need,
    progress: &dyn Progress,
) -> Result<FetchOutcome, RemoteError> {
    let catalog = Catalog::sync(remote, store)?;
    let mut out = FetchOutcome::default();
    match fetch_with(remote, store, &catalog, snapshots, need, progress, &mut out) {
        Err(e) if !catalog.is_full() && e.may_be_stale_catalog() => {
            tracing::debug!("remote {}: {e}; listing every index", remote.name());
            let catalog = Catalog::sync_full(remote, store)?;
            fetch_with(remote, store, &catalog, snapshots, need, progress, &mut out)?;
            Ok(out)
        }
        done => done.map(|()| out),
    }
}

/// [`fetch`] with `catalog`, counting into `out`. A snapshot already here is completed
/// (unless `need` is [`Need::Trees`]): the blobs its tree reaches that the store lacks,
/// promised by a lazy mount, are fetched.
pub(crate) fn fetch_with(
    remote: &Remote,
    store: &cas::Store,
    catalog: &Catalog,
    snapshots: &[SnapshotId],
    need: Need,
    progress: &dyn Progress,
    out: &mut FetchOutcome,
) -> Result<(), RemoteError> {
    let name = remote.name();
    for id in snapshots {
        let here = store.reader()?.has_snapshot(*id)?;
        // Another kind of object with that id (a blob named where a snapshot is expected)
        // is no snapshot there either.
        let there = catalog
            .locate((*id).into())?
            .is_some_and(|l| l.entry.kind == ObjectKind::Snapshot);
        if !here && !there {
            return Err(RemoteError::NotOnRemote {
                remote: name.to_owned(),
                id: *id,
            });
        }
    }
    out.pulled = snapshots.to_vec();
    out.warnings = catalog.warnings().to_vec();

    // Snapshots, level by level through the history when it is wanted.
    let mut snaps: Vec<(SnapshotId, Snapshot)> = Vec::new();
    let mut promised: Vec<SnapshotId> = Vec::new();
    let mut seen: HashSet<SnapshotId> = HashSet::new();
    // The root trees of every snapshot met: their attestations come too.
    let mut checked_trees: HashSet<TreeId> = HashSet::new();
    // The root trees of the snapshots asked for that are here: completed.
    let mut complete: Vec<TreeId> = Vec::new();
    let mut level: Vec<SnapshotId> = snapshots.to_vec();
    while !level.is_empty() {
        let reader = store.reader()?;
        let mut wanted: Vec<ObjectId> = Vec::new();
        let mut next = Vec::new();
        for id in level.drain(..).filter(|id| seen.insert(*id)) {
            if !reader.has_snapshot(id)? {
                wanted.push(id.into());
            } else {
                let snap = reader.snapshot(id)?;
                checked_trees.insert(snap.tree);
                if need != Need::Trees && snapshots.contains(&id) {
                    complete.push(snap.tree);
                }
                if need == Need::History {
                    // Here, but its history may be only promised.
                    next.extend(snap.parents);
                }
            }
        }
        let got = read_objects(remote, catalog, &wanted, ObjectKind::Snapshot, out)?;
        for object in got.objects {
            let VerifiedObject::Snapshot(snap) = object else {
                continue;
            };
            for p in &snap.parents {
                match need {
                    Need::History => next.push(*p),
                    Need::Closure | Need::Trees if !reader.has_snapshot(*p)? => promised.push(*p),
                    Need::Closure | Need::Trees => {}
                }
            }
            checked_trees.insert(snap.tree);
            snaps.push((snap.id(), snap));
        }
        level = next;
    }

    // Trees, level by level (those here already are read here: a snapshot being completed,
    // or one sharing them); the blobs they name that the store lacks.
    let reader = store.reader()?;
    let mut trees: Vec<Tree> = Vec::new();
    let mut blobs: Vec<BlobId> = Vec::new();
    let mut lazy: Vec<BlobId> = Vec::new();
    let mut seen_trees: HashSet<TreeId> = HashSet::new();
    let mut seen_blobs: HashSet<BlobId> = HashSet::new();
    let mut level: Vec<TreeId> = snaps.iter().map(|(_, s)| s.tree).collect();
    level.extend(complete);
    // A mount waits for its trees: those of a pack come together (see `TreesAhead`).
    let mut ahead = TreesAhead::default();
    while !level.is_empty() {
        let mut wanted: Vec<ObjectId> = Vec::new();
        let mut here: Vec<Tree> = Vec::new();
        let fetched_from = trees.len();
        for t in level.drain(..) {
            if !seen_trees.insert(t) {
                continue;
            }
            if let Some(tree) = ahead.take(t, out) {
                trees.push(tree);
            } else if !reader.has_tree(t)? {
                wanted.push(t.into());
            } else if need != Need::Trees {
                here.push(reader.tree(t)?);
            }
        }
        if need == Need::Trees {
            let got = ahead.read(remote, catalog, &reader, &wanted, &seen_trees, out)?;
            trees.extend(got);
        } else {
            let got = read_objects(remote, catalog, &wanted, ObjectKind::Tree, out)?.objects;
            trees.extend(got.into_iter().filter_map(|object| match object {
                VerifiedObject::Tree(tree) => Some(tree),
                _ => None,
            }));
        }
        for tree in here.iter().chain(&trees[fetched_from..]) {
            for entry in tree.entries() {
                match (entry.blob(), entry.tree()) {
                    (Some(b), _) if seen_blobs.insert(b) && !reader.has_blob(b)? => {
                        if need == Need::Trees && entry.kind != cas::EntryKind::Symlink {
                            // Refused now if the remote lacks it, not when first read.
                            locate(remote, catalog, b.into(), ObjectKind::Blob)?;
                            lazy.push(b);
                        } else {
                            blobs.push(b);
                        }
                    }
                    (_, Some(t)) => level.push(t),
                    _ => {}
                }
            }
        }
    }
    drop(reader);
    fetch_blob_set(remote, store, catalog, blobs, progress, out)?;

    // Their attestations, checked before any is recorded (their outputs are stored as
    // blobs are, unreachable until then).
    let attestations = crate::attestations::fetch(remote, store, &checked_trees)?;

    // Last, trees, snapshots and attestations together: the snapshots appear whole or not
    // at all, with the checks recorded of them.
    let mut batch = WriteBatch::new();
    for tree in trees {
        batch.add_tree(tree);
    }
    for snap in parents_first(snaps) {
        batch.add_snapshot(snap);
    }
    for p in promised {
        batch.promise(p.into(), name);
    }
    for b in lazy {
        batch.promise(b.into(), name);
    }
    for received in attestations {
        if received.new {
            batch.add_attestation(&received.attestation);
            out.attestations_received += 1;
        }
        for (fingerprint, armored) in received.signatures {
            batch.add_attestation_signature(received.id, &fingerprint, armored);
            out.attestations_received += 1;
        }
    }
    store.write(&batch)?;
    Ok(())
}

/// Brings `blobs` from `remote` into `store` (those it lacks; a blob of a lazily mounted
/// snapshot, say), each checked as a fetch checks it.
pub fn fetch_blobs_by_id(
    remote: &Remote,
    store: &cas::Store,
    blobs: &[BlobId],
    progress: &dyn Progress,
) -> Result<FetchOutcome, RemoteError> {
    let catalog = Catalog::sync(remote, store)?;
    let reader = store.reader()?;
    let mut lacking = Vec::with_capacity(blobs.len());
    for b in blobs {
        if !reader.has_blob(*b)? && !lacking.contains(b) {
            lacking.push(*b);
        }
    }
    drop(reader);
    let mut out = FetchOutcome {
        warnings: catalog.warnings().to_vec(),
        ..FetchOutcome::default()
    };
    fetch_blob_set(remote, store, &catalog, lacking, progress, &mut out)?;
    Ok(out)
}

/// Fetches `blobs` (which the store lacks) and stores them: those over a chunk as their
/// chunks and then their own records (a list of chunks, layout 3, is checked once its
/// chunks are stored; one an older layout holds whole is streamed in, a chunk at a time),
/// the rest in batches as they lie on the remote.
pub(crate) fn fetch_blob_set(
    remote: &Remote,
    store: &cas::Store,
    catalog: &Catalog,
    blobs: Vec<BlobId>,
    progress: &dyn Progress,
    out: &mut FetchOutcome,
) -> Result<(), RemoteError> {
    let name = remote.name();
    let mut seen_blobs: HashSet<BlobId> = blobs.iter().copied().collect();
    let mut lists: Vec<Located> = Vec::new();
    let mut whole: Vec<Located> = Vec::new();
    let mut small: Vec<BlobId> = Vec::with_capacity(blobs.len());
    for b in blobs {
        let located = locate(remote, catalog, b.into(), ObjectKind::Blob)?;
        match route(&located.entry) {
            Route::Chunks => lists.push(located.clone()),
            Route::Streamed => whole.push(located.clone()),
            Route::Read => small.push(b),
        }
    }
    let lists = read_chunk_lists(remote, catalog, lists, out)?;
    {
        let reader = store.reader()?;
        for (_, _, chunks) in &lists {
            for c in chunks {
                if seen_blobs.insert(*c) && !reader.has_blob(*c)? {
                    small.push(*c);
                }
            }
        }
    }
    let streamed_bytes: u64 = whole.iter().map(|l| u64::from(l.entry.len)).sum();
    fetch_blobs(
        remote,
        store,
        catalog,
        small,
        (whole.len() as u64, streamed_bytes),
        progress,
        out,
    )?;
    let mut batch = WriteBatch::new();
    for located in &whole {
        batch.add_blob(receive_whole(remote, store, located, out)?);
        progress.advance(1, u64::from(located.entry.len));
    }
    progress.finish();
    let reader = store.reader()?;
    for (id, size, chunks) in lists {
        let blob = reader.chunked_blob(id, size, chunks).map_err(|e| {
            let reason = format!("as its chunks: {e}");
            RemoteError::damaged(name, format!("object {id}"), reason, e)
        })?;
        batch.add_blob(blob);
    }
    drop(reader);
    if !batch.is_empty() {
        store.write(&batch)?;
    }
    Ok(())
}

/// How a blob comes from a remote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// Read whole, with others (at most a chunk, or a group frame's member).
    Read,
    /// A list of its chunks, each read as a blob.
    Chunks,
    /// Larger than a chunk and held whole (layouts 1 and 2): streamed, however large.
    Streamed,
}

/// How the blob of index entry `e` comes: nothing over a chunk is read whole, whatever its
/// size (64 bits all the way: a blob over 4 GiB is streamed like any other).
fn route(e: &crate::layout::PackEntry) -> Route {
    match e.encoding {
        Encoding::Chunks => Route::Chunks,
        Encoding::Raw | Encoding::Zstd if e.size > MAX_BLOB => Route::Streamed,
        _ => Route::Read,
    }
}

/// Reads blobs of at most a chunk `blobs` in batches written as they come (unreachable
/// until the snapshots land), in the order they lie on the remote, so a group frame's
/// members are read together; a payload counts once. `later` are the blobs and bytes
/// streamed after them, for the progress.
fn fetch_blobs(
    remote: &Remote,
    store: &cas::Store,
    catalog: &Catalog,
    mut blobs: Vec<BlobId>,
    later: (u64, u64),
    progress: &dyn Progress,
    out: &mut FetchOutcome,
) -> Result<(), RemoteError> {
    let mut located: Vec<(BlobId, Option<Located>)> = blobs
        .iter()
        .map(|b| Ok((*b, catalog.locate((*b).into())?)))
        .collect::<Result<_, RemoteError>>()?;
    located.sort_by_cached_key(|(_, l)| {
        l.as_ref()
            .map(|l| (l.pack.clone(), l.entry.offset, l.entry.start))
    });
    blobs = located.iter().map(|(b, _)| *b).collect();
    let mut last = None;
    let costs: Vec<u64> = located
        .iter()
        .map(|(_, l)| match l {
            Some(l) if last != Some((&l.pack, l.entry.offset)) => {
                last = Some((&l.pack, l.entry.offset));
                u64::from(l.entry.len)
            }
            _ => 0,
        })
        .collect();
    progress.start(
        "fetch",
        blobs.len() as u64 + later.0,
        costs.iter().sum::<u64>() + later.1,
    );
    let mut start = 0;
    while start < blobs.len() {
        let mut end = start;
        let mut bytes = 0;
        while end < blobs.len() && (end == start || bytes < BATCH_BYTES) {
            bytes += costs[end];
            end += 1;
        }
        let wanted: Vec<ObjectId> = blobs[start..end].iter().map(|b| (*b).into()).collect();
        let got = read_objects(remote, catalog, &wanted, ObjectKind::Blob, out)?;
        let count = got.len() as u64;
        let mut batch = WriteBatch::new();
        for object in got.objects {
            batch.add_verified(object);
        }
        for frame in got.frames {
            batch.add_frame(frame);
        }
        store.write(&batch)?;
        progress.advance(count, bytes);
        start = end;
    }
    Ok(())
}

/// Reads the chunk lists of blobs `lists`, checking each against the blob's size and
/// every chunk it names against the remote's index (a blob, as long as its place in the
/// blob says): (blob, size, chunks).
pub(crate) fn read_chunk_lists(
    remote: &Remote,
    catalog: &Catalog,
    lists: Vec<Located>,
    out: &mut FetchOutcome,
) -> Result<Vec<(BlobId, u64, Vec<BlobId>)>, RemoteError> {
    let name = remote.name();
    let mut result = Vec::with_capacity(lists.len());
    for (located, data) in read_payloads(remote, lists)? {
        out.bytes_received += data.len() as u64;
        for l in located {
            let e = &l.entry;
            check_length(name, &l, &data)?;
            let bad = |reason: String| {
                RemoteError::object(name, e.id, format!("{reason} (pack {})", l.pack))
            };
            let chunks = crate::layout::decode_chunk_list(e.id, e.size, &data).map_err(|err| {
                let reason = format!("{err} (pack {})", l.pack);
                RemoteError::damaged(name, format!("object {}", e.id), reason, err)
            })?;
            let mut left = e.size;
            for c in &chunks {
                let expected = left.min(cas::CHUNK_BYTES as u64);
                left -= expected;
                let chunk = locate(remote, catalog, (*c).into(), ObjectKind::Blob)
                    .map_err(|err| bad(format!("its chunk {c}: {err}")))?;
                if chunk.entry.size != expected || route(&chunk.entry) != Route::Read {
                    return Err(bad(format!(
                        "its chunk {c} is {} bytes on the remote, not {expected}",
                        chunk.entry.size
                    )));
                }
            }
            out.objects_received += 1;
            result.push((e.id.as_blob(), e.size, chunks));
        }
    }
    Ok(result)
}

/// Receives blob `located`, held whole by a pack of an older layout, however large: its
/// payload is read as it arrives, decoded, and cut into chunks stored as they fill
/// (unnamed until its own record is written); it is checked against its id and size
/// before it is given back, to join a batch.
fn receive_whole(
    remote: &Remote,
    store: &cas::Store,
    located: &Located,
    out: &mut FetchOutcome,
) -> Result<cas::PreparedBlob, RemoteError> {
    let name = remote.name();
    let e = &located.entry;
    let bad = |reason: String| {
        RemoteError::object(name, e.id, format!("{reason} (pack {})", located.pack))
    };
    let payload = remote.read_range(
        &pack_key(&located.pack),
        e.offset..e.offset + u64::from(e.len),
    );
    let input: Box<dyn std::io::Read> = match e.encoding {
        Encoding::Zstd => {
            let mut decoder = zstd::stream::read::Decoder::new(payload)
                .map_err(|err| bad(format!("zstd: {err}")))?;
            // A frame needing a larger window than cairn's ever do is refused, not
            // given the memory it asks for.
            decoder
                .window_log_max(MAX_WINDOW_LOG)
                .map_err(|err| bad(format!("zstd: {err}")))?;
            Box::new(decoder)
        }
        _ => Box::new(payload),
    };
    // One byte past the size is enough to tell a payload that decodes to more.
    let what = format!("blob {} of remote {name}", e.id);
    let input = std::io::Read::take(input, e.size.saturating_add(1));
    let blob = match store.prepare_blob_stream(input, &what) {
        Ok(blob) => blob,
        Err(cas::WriteError::Input { source, .. }) => {
            return Err(match source.into_inner() {
                Some(inner) => match inner.downcast::<RemoteError>() {
                    Ok(remote_error) => *remote_error,
                    Err(other) => bad(format!("decoding it: {other}")),
                },
                None => bad("decoding it failed".to_owned()),
            });
        }
        Err(other) => return Err(other.into()),
    };
    if blob.size() != e.size || ObjectId::from(blob.id()) != e.id {
        return Err(bad(format!(
            "its payload decodes to blob {} of {} bytes, its index says {} bytes",
            blob.id(),
            blob.size(),
            e.size
        )));
    }
    out.objects_received += 1;
    out.bytes_received += u64::from(e.len);
    Ok(blob)
}

/// What [`read_objects`] brought, checked: objects one by one, and group frames whose
/// members are most of them, kept as they came.
#[derive(Default)]
pub(crate) struct Received {
    pub(crate) objects: Vec<VerifiedObject>,
    pub(crate) frames: Vec<cas::Frame>,
}

impl Received {
    fn extend(&mut self, other: Received) {
        self.objects.extend(other.objects);
        self.frames.extend(other.frames);
    }

    /// Objects, a frame's members each.
    fn len(&self) -> usize {
        self.objects.len() + self.frames.iter().map(|f| f.members().len()).sum::<usize>()
    }
}

/// `snaps` ordered as a write takes them: each after its parents among them (the levels
/// of the walk are not enough: a parent met early through a merge may be an ancestor of
/// a snapshot met later).
fn parents_first(snaps: Vec<(SnapshotId, Snapshot)>) -> Vec<Snapshot> {
    let order: Vec<SnapshotId> = snaps.iter().map(|(id, _)| *id).collect();
    let mut waiting: HashMap<SnapshotId, Snapshot> = snaps.into_iter().collect();
    let mut out = Vec::with_capacity(order.len());
    let mut stack: Vec<(SnapshotId, bool)> = Vec::new();
    for id in order {
        stack.push((id, false));
        while let Some((id, parents_done)) = stack.pop() {
            if parents_done {
                out.extend(waiting.remove(&id));
                continue;
            }
            let Some(snap) = waiting.get(&id) else {
                continue;
            };
            stack.push((id, true));
            stack.extend(
                (snap.parents.iter())
                    .filter(|p| waiting.contains_key(p))
                    .map(|p| (*p, false)),
            );
        }
    }
    out
}

/// Of one pack, per payload (offset and length), the objects wanted of it.
type Payloads = BTreeMap<(u64, u32), Vec<Located>>;

/// Where object `id` of `kind` is on the remote, refused if it is not there as that kind.
fn locate(
    remote: &Remote,
    catalog: &Catalog,
    id: ObjectId,
    kind: ObjectKind,
) -> Result<Located, RemoteError> {
    let located = catalog.locate(id)?.ok_or_else(|| {
        RemoteError::object(
            remote.name(),
            id,
            "is not on the remote, yet a snapshot there reaches it",
        )
    })?;
    if located.entry.kind != kind {
        return Err(RemoteError::object(
            remote.name(),
            id,
            format!("its index says {:?}, expected {kind:?}", located.entry.kind),
        ));
    }
    Ok(located)
}

/// Reads objects of `kind` from the remote, grouped by pack and by payload (a group
/// frame is read once for all the members wanted of it), and checks each. A blob is at
/// most a chunk here: a larger one comes as a list of chunks, or streamed.
pub(crate) fn read_objects(
    remote: &Remote,
    catalog: &Catalog,
    ids: &[ObjectId],
    kind: ObjectKind,
    out: &mut FetchOutcome,
) -> Result<Received, RemoteError> {
    let name = remote.name();
    let mut wanted = Vec::with_capacity(ids.len());
    for id in ids {
        wanted.push(readable(remote, catalog, *id, kind)?);
    }
    let pairs = read_payloads(remote, wanted)?;
    out.objects_received += pairs.iter().map(|(l, _)| l.len() as u64).sum::<u64>();
    out.bytes_received += pairs.iter().map(|(_, d)| d.len() as u64).sum::<u64>();
    let parts: Vec<Received> = pairs
        .into_par_iter()
        .map(|(located, data)| verify_payload(name, located, data))
        .collect::<Result<_, _>>()?;
    let mut received = Received::default();
    for part in parts {
        received.extend(part);
    }
    Ok(received)
}

/// Where object `id` of `kind` is, refused before anything is read if its index entry
/// says more than cairn reads from a remote at once: a damaged or hostile index must not
/// make a huge read (a frame's length is bounded by `decode_index`).
fn readable(
    remote: &Remote,
    catalog: &Catalog,
    id: ObjectId,
    kind: ObjectKind,
) -> Result<Located, RemoteError> {
    let located = locate(remote, catalog, id, kind)?;
    let e = &located.entry;
    let limit = if kind == ObjectKind::Blob {
        MAX_BLOB
    } else {
        MAX_TREE
    };
    let most_stored = e.size + e.size / 64 + 4096;
    if e.size > limit
        || e.encoding == Encoding::Chunks
        || (e.encoding != Encoding::Frame && u64::from(e.len) > most_stored)
    {
        return Err(RemoteError::object(
            remote.name(),
            id,
            format!(
                "its index says {} bytes stored, {} decoded: more than cairn reads from a remote at once (pack {})",
                e.len, e.size, located.pack
            ),
        ));
    }
    Ok(located.clone())
}

/// Trees read before a walk reaches them. The first time a level of the walk needs a tree
/// of a pack, every other tree of that pack the store lacks comes in the same request (a
/// snapshot's trees lie together in the packs of its push, and requests for scattered
/// ranges are merged into one read of the span anyway), so a deep tree costs a round trip
/// per pack, not one per level, and each byte of the span is read once. Each is checked as
/// any tree; one that fails is dropped here (nothing asked for it yet) and read again,
/// and refused, if the walk reaches it.
#[derive(Default)]
struct TreesAhead {
    trees: HashMap<TreeId, Tree>,
    packs: HashSet<Arc<str>>,
}

impl TreesAhead {
    /// Reads the trees `ids` (refused as [`read_objects`] refuses) and, beside them, the
    /// other trees of their packs the store lacks, not yet read nor `seen`.
    fn read(
        &mut self,
        remote: &Remote,
        catalog: &Catalog,
        reader: &cas::Reader,
        ids: &[ObjectId],
        seen: &HashSet<TreeId>,
        out: &mut FetchOutcome,
    ) -> Result<Vec<Tree>, RemoteError> {
        let name = remote.name();
        let mut wanted: Vec<Located> = Vec::with_capacity(ids.len());
        for id in ids {
            wanted.push(readable(remote, catalog, *id, ObjectKind::Tree)?);
        }
        let asked: HashSet<ObjectId> = ids.iter().copied().collect();
        let mut extra: Vec<Located> = Vec::new();
        let new_packs: Vec<Arc<str>> = wanted
            .iter()
            .map(|l| l.pack.clone())
            .filter(|p| self.packs.insert(p.clone()))
            .collect();
        for pack in new_packs {
            for entry in catalog.pack_entries(&pack)?.unwrap_or_default() {
                let tree = entry.id.as_tree();
                if entry.kind != ObjectKind::Tree
                    || asked.contains(&entry.id)
                    || seen.contains(&tree)
                    || self.trees.contains_key(&tree)
                    || reader.has_tree(tree)?
                {
                    continue;
                }
                // Only the copy the catalog reads, and only one it would read at once.
                match readable(remote, catalog, entry.id, ObjectKind::Tree) {
                    Ok(located) if located.pack == pack => extra.push(located),
                    _ => {}
                }
            }
        }
        let mut all = wanted;
        all.extend(extra);
        let pairs = read_payloads(remote, all)?;
        out.bytes_received += pairs.iter().map(|(_, d)| d.len() as u64).sum::<u64>();
        let mut got = Vec::with_capacity(ids.len());
        for (located, data) in pairs {
            for l in located {
                let asked_for = asked.contains(&l.entry.id);
                match verify(name, &l, &data) {
                    Ok(VerifiedObject::Tree(tree)) if asked_for => got.push(tree),
                    Ok(VerifiedObject::Tree(tree)) => {
                        self.trees.insert(tree.id(), tree);
                    }
                    Ok(_) => {}
                    Err(e) if asked_for => return Err(e),
                    Err(e) => tracing::debug!("remote {name}: a tree read ahead: {e}"),
                }
            }
        }
        out.objects_received += got.len() as u64;
        Ok(got)
    }

    /// Tree `id` if it was read ahead (and counts it received).
    fn take(&mut self, id: TreeId, out: &mut FetchOutcome) -> Option<Tree> {
        let tree = self.trees.remove(&id)?;
        out.objects_received += 1;
        Some(tree)
    }
}

/// Reads the payloads of `wanted` objects, grouped by pack and by payload (one read for
/// all the members wanted of a group frame): per payload, the objects wanted of it and
/// its bytes.
fn read_payloads(
    remote: &Remote,
    wanted: Vec<Located>,
) -> Result<Vec<(Vec<Located>, bytes::Bytes)>, RemoteError> {
    let mut by_pack: HashMap<Arc<str>, Payloads> = HashMap::new();
    for located in wanted {
        let e = &located.entry;
        by_pack
            .entry(located.pack.clone())
            .or_default()
            .entry((e.offset, e.len))
            .or_default()
            .push(located);
    }
    let fetched: Vec<(Vec<Vec<Located>>, Vec<bytes::Bytes>)> = remote.block_on(async {
        futures_util::stream::iter(by_pack.into_iter().map(|(pack, payloads)| async move {
            let ranges: Vec<std::ops::Range<u64>> = payloads
                .keys()
                .map(|(offset, len)| *offset..offset + u64::from(*len))
                .collect();
            let payloads: Vec<Vec<Located>> = payloads.into_values().collect();
            let data = match remote.get_ranges(&pack_key(&pack), &ranges).await {
                Ok(data) => data,
                Err(RemoteError::Transport { source, .. }) => {
                    let more = match payloads.iter().map(Vec::len).sum::<usize>() {
                        1 => String::new(),
                        n => format!(" and {} more", n - 1),
                    };
                    return Err(RemoteError::Read {
                        remote: remote.name().to_owned(),
                        what: format!("object {}{more} from pack {pack}", payloads[0][0].entry.id),
                        source,
                    });
                }
                Err(other) => return Err(other),
            };
            Ok::<_, RemoteError>((payloads, data))
        }))
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await
    })?;
    Ok(fetched
        .into_iter()
        .flat_map(|(payloads, data)| payloads.into_iter().zip(data))
        .collect())
}

/// Checks the objects wanted of one payload: a group frame's members together, any
/// other object alone.
fn verify_payload(
    remote: &str,
    located: Vec<Located>,
    data: bytes::Bytes,
) -> Result<Received, RemoteError> {
    let (members, alone): (Vec<Located>, Vec<Located>) = located
        .into_iter()
        .partition(|l| l.entry.encoding == Encoding::Frame);
    let mut out = Received::default();
    for l in &alone {
        out.objects.push(verify(remote, l, &data)?);
    }
    let Some(first) = members.first() else {
        return Ok(out);
    };
    check_length(remote, first, &data)?;
    let wanted: Vec<FrameMember> = members
        .iter()
        .map(|l| FrameMember {
            id: l.entry.id.as_blob(),
            start: l.entry.start,
            // Within MAX_FRAME_BYTES: `decode_index` checked it.
            size: u32::try_from(l.entry.size).unwrap_or(u32::MAX),
        })
        .collect();
    match cas::verify_frame(data.to_vec(), wanted) {
        Ok(ReceivedFrame::Whole(frame)) => out.frames.push(frame),
        Ok(ReceivedFrame::Apart(blobs)) => {
            out.objects
                .extend(blobs.into_iter().map(VerifiedObject::Blob));
        }
        Err(err) => {
            return Err(RemoteError::object(
                remote,
                err.id(),
                format!("{err} (a group frame in pack {})", first.pack),
            ));
        }
    }
    Ok(out)
}

/// Refuses a payload whose length is not what its index says.
fn check_length(remote: &str, located: &Located, data: &[u8]) -> Result<(), RemoteError> {
    let e = &located.entry;
    if data.len() == e.len as usize {
        return Ok(());
    }
    Err(RemoteError::object(
        remote,
        e.id,
        format!(
            "{} bytes read, its index says {} (pack {})",
            data.len(),
            e.len,
            located.pack
        ),
    ))
}

fn verify(remote: &str, located: &Located, data: &[u8]) -> Result<VerifiedObject, RemoteError> {
    let e = &located.entry;
    let bad = |reason: String| {
        RemoteError::object(remote, e.id, format!("{reason} (pack {})", located.pack))
    };
    let damaged = |reason: String, cause: CorruptCause| {
        let reason = format!("{reason} (pack {})", located.pack);
        RemoteError::damaged(remote, format!("object {}", e.id), reason, cause)
    };
    check_length(remote, located, data)?;
    let limit = if e.kind == ObjectKind::Blob {
        MAX_BLOB
    } else {
        MAX_TREE
    };
    if e.size > limit {
        return Err(bad(format!(
            "{} bytes is more than cairn reads from a remote",
            e.size
        )));
    }
    let zstd = e.encoding == Encoding::Zstd;
    if e.kind == ObjectKind::Blob {
        let payload = BlobPayload {
            size: e.size,
            zstd,
            bytes: data.to_vec(),
        };
        let blob = cas::verify_blob_payload(e.id.as_blob(), payload)
            .map_err(|err| damaged(err.to_string(), err.into()))?;
        return Ok(VerifiedObject::Blob(blob));
    }
    let encoded = if zstd {
        zstd::bulk::decompress(data, e.size as usize)
            .map_err(|err| damaged(format!("zstd: {err}"), CorruptCause::Zstd(err)))?
    } else {
        data.to_vec()
    };
    if encoded.len() as u64 != e.size {
        return Err(bad(format!(
            "{} bytes, its index says {}",
            encoded.len(),
            e.size
        )));
    }
    cas::verify_object(e.kind, e.id, &encoded).map_err(|err| damaged(err.to_string(), err.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_are_written_after_their_parents_even_when_a_merge_meets_one_early() {
        let snap = |parents: Vec<SnapshotId>, message: &str| Snapshot {
            tree: TreeId::from_bytes([0; 32]),
            parents,
            created: jiff::Timestamp::UNIX_EPOCH,
            message: message.into(),
            labels: Default::default(),
            source: None,
        };
        let p = snap(vec![], "p");
        let c = snap(vec![p.id()], "c");
        let x = snap(vec![c.id()], "x");
        let m = snap(vec![x.id(), p.id()], "m");
        // The walk's levels: m; then x and p; then c.
        let walked: Vec<(SnapshotId, Snapshot)> =
            [m, x, p, c].into_iter().map(|s| (s.id(), s)).collect();
        let ordered = parents_first(walked);
        let names: Vec<&str> = ordered.iter().map(|s| s.message.as_str()).collect();
        assert_eq!(names, ["p", "c", "x", "m"]);
    }

    #[test]
    fn a_blob_over_a_chunk_is_never_read_whole_whatever_its_size() {
        use crate::layout::PackEntry;
        let entry = |encoding, size| PackEntry {
            kind: ObjectKind::Blob,
            id: ObjectId::from_bytes([7; 32]),
            encoding,
            size,
            offset: 62,
            len: 1000,
            start: 0,
        };
        // A layout 2 blob of 4.5 GiB held whole was refused as more than a fetch reads
        // (the cap was 4 GiB); now it is streamed, as any blob over a chunk.
        for size in [MAX_BLOB + 1, 4 << 30, (4 << 30) + (1 << 29), u64::MAX] {
            assert_eq!(
                route(&entry(Encoding::Zstd, size)),
                Route::Streamed,
                "{size}"
            );
            assert_eq!(
                route(&entry(Encoding::Raw, size)),
                Route::Streamed,
                "{size}"
            );
            assert_eq!(
                route(&entry(Encoding::Chunks, size)),
                Route::Chunks,
                "{size}"
            );
        }
        assert_eq!(route(&entry(Encoding::Zstd, MAX_BLOB)), Route::Read);
        assert_eq!(route(&entry(Encoding::Frame, 10)), Route::Read);
    }
}
