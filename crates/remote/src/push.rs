//! Push: send a remote what it lacks of some snapshots, packs first and the snapshots
//! last, so nothing becomes visible before everything it reaches is there.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use object_store::PutMode;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use cas::{
    BlobId, BlobSource, CHUNK_BYTES, FrameMember, FrameRef, ObjectKind, ReadError, Reader,
    SnapshotId, TreeId, WriteBatch,
};

use crate::Progress;
use crate::catalog::Catalog;
use crate::error::RemoteError;
use crate::layout::{
    Encoding, MAX_FRAME_MEMBERS, Pack, PackBuilder, decode_index, index_key, index_name_now,
    pack_key, parse_index_name,
};
use crate::transport::Remote;

/// Packs uploaded at once, and packs built and waiting for an upload: with the one being
/// built and a read step, what a push holds (some 50 MB at most, whatever it sends).
const UPLOADS: usize = 3;
const WAITING: usize = 1;
/// Packs this build writes are cut once they reach this many bytes (restic cuts at 4 to
/// 16 MiB; the layout allows up to [`PACK_TARGET`](crate::layout::PACK_TARGET)).
const PACK_CUT: usize = 8 << 20;
/// Blobs or frames read from the store per parallel step.
const READ_STEP: usize = 256;
/// At most this many bytes of blobs are read at once.
const READ_BYTES: u64 = 8 << 20;

/// What a push sent (SPEC's fields; `cairn push`'s outcome adds the remote's name, the refs
/// set and a refusal).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemotePushOutcome {
    /// The snapshots now on the remote, as asked.
    pub pushed: Vec<SnapshotId>,
    /// Objects sent.
    pub objects_sent: u64,
    /// Bytes sent: packs and their indexes.
    pub bytes_sent: u64,
    /// Objects the remote had already (counted where the walk met them).
    pub objects_present: u64,
    /// Attestation records and signatures sent (of the snapshots' trees and their
    /// history's, those the remote lacked).
    #[serde(default)]
    pub attestations_sent: u64,
    /// What of the remote was skipped (files under `index/` that are no readable index),
    /// each naming the file and the remote.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// What the remote lacks of `snapshots` and their history.
struct Missing {
    snapshots: Vec<SnapshotId>,
    trees: Vec<TreeId>,
    blobs: Vec<BlobId>,
    /// Blobs over a chunk the remote has as lists of chunks, whose chunks an interrupted
    /// push may not have delivered: each chunk is checked on its own.
    large_present: Vec<BlobId>,
    present: u64,
}

fn find_missing(
    reader: &Reader,
    catalog: &Catalog,
    remote: &str,
    snapshots: &[SnapshotId],
) -> Result<Missing, RemoteError> {
    let mut out = Missing {
        snapshots: Vec::new(),
        trees: Vec::new(),
        blobs: Vec::new(),
        large_present: Vec::new(),
        present: 0,
    };
    let mut seen_snaps = HashSet::new();
    let mut seen_trees = HashSet::new();
    let mut seen_blobs = HashSet::new();
    let mut pending: Vec<SnapshotId> = snapshots.to_vec();
    let mut trees = Vec::new();
    while let Some(id) = pending.pop() {
        if !seen_snaps.insert(id) {
            continue;
        }
        // A snapshot the remote has comes with everything it reaches.
        if catalog.has_for_push(id.into())? {
            out.present += 1;
            continue;
        }
        if !reader.has_snapshot(id)? {
            return Err(RemoteError::Unpushable {
                remote: remote.to_owned(),
                reason: format!(
                    "snapshot {id} is neither in this store nor on it (fetched without its history from another remote, or pruned by `gc --max-size`?)"
                ),
                layout: None,
            });
        }
        let snap = reader.snapshot(id)?;
        trees.push(snap.tree);
        pending.extend(snap.parents.iter().copied());
        out.snapshots.push(id);
    }
    while let Some(id) = trees.pop() {
        if !seen_trees.insert(id) {
            continue;
        }
        // Present trees are still walked: an interrupted push may have left a tree
        // indexed whose blobs never arrived.
        if catalog.has_for_push(id.into())? {
            out.present += 1;
            if !reader.has_tree(id)? {
                continue;
            }
        } else {
            out.trees.push(id);
        }
        for entry in reader.tree(id)?.entries() {
            match (entry.blob(), entry.tree()) {
                (Some(b), _) if seen_blobs.insert(b) => {
                    if catalog.has_for_push(b.into())? {
                        out.present += 1;
                        let listed = catalog
                            .locate(b.into())?
                            .is_some_and(|l| l.entry.encoding == Encoding::Chunks);
                        if entry.size > CHUNK_BYTES as u64 && listed && reader.has_blob(b)? {
                            out.large_present.push(b);
                        }
                    } else {
                        out.blobs.push(b);
                    }
                }
                (_, Some(t)) => trees.push(t),
                _ => {}
            }
        }
    }
    // The order of trees does not matter (nothing is visible before the snapshots' pack,
    // written last); blobs keep the walk's order, so files of one directory share a pack.
    Ok(out)
}

/// What a push reads for the blobs the remote lacks, in the walk's order: a blob alone, or
/// a group frame of the store, once for all its members wanted (where the first of them
/// was met), or a blob over a chunk as the list of its chunks (after those of its chunks
/// the remote lacks, each alone).
enum Item {
    Alone(BlobId, u64),
    Frame(FrameRef, Vec<FrameMember>),
    Chunks(BlobId, u64, Vec<BlobId>),
}

fn members_bytes(members: &[FrameMember]) -> u64 {
    members.iter().map(|m| u64::from(m.size)).sum()
}

impl Item {
    /// Its blobs' decoded bytes.
    fn bytes(&self) -> u64 {
        match self {
            Item::Alone(_, size) => *size,
            Item::Frame(_, members) => members_bytes(members),
            Item::Chunks(..) => 0,
        }
    }

    /// The objects it sends.
    fn objects(&self) -> u64 {
        match self {
            Item::Frame(_, members) => members.len() as u64,
            Item::Alone(..) | Item::Chunks(..) => 1,
        }
    }
}

fn items(reader: &Reader, catalog: &Catalog, missing: &Missing) -> Result<Vec<Item>, RemoteError> {
    let mut out = Vec::new();
    let mut frames: HashMap<FrameRef, usize> = HashMap::new();
    // Chunks the remote lacks, each sent once however many blobs hold it.
    let mut chunks_sent: HashSet<BlobId> = HashSet::new();
    let mut send_chunks = |out: &mut Vec<Item>, id: BlobId| -> Result<Vec<BlobId>, RemoteError> {
        let cut = reader.blob_chunks(id)?;
        for c in (0..cut.ids().len()).filter_map(|i| cut.chunk(i)) {
            if !catalog.has_for_push(c.id.into())? && chunks_sent.insert(c.id) {
                out.push(Item::Alone(c.id, c.len as u64));
            }
        }
        Ok(cut.ids().to_vec())
    };
    for id in &missing.large_present {
        send_chunks(&mut out, *id)?;
    }
    for id in &missing.blobs {
        match reader.blob_source(*id)? {
            BlobSource::Alone { size } => out.push(Item::Alone(*id, size)),
            BlobSource::Chunked { size } => {
                let chunks = send_chunks(&mut out, *id)?;
                out.push(Item::Chunks(*id, size, chunks));
            }
            BlobSource::Member { frame, member } => match frames.get(&frame) {
                Some(&at) => {
                    if let Item::Frame(_, members) = &mut out[at] {
                        members.push(member);
                    }
                }
                None => {
                    frames.insert(frame, out.len());
                    out.push(Item::Frame(frame, vec![member]));
                }
            },
        }
    }
    Ok(out)
}

/// An item as read, verified: a blob's payload, a frame as stored, or a chunk list.
enum Read {
    Payload(BlobId, cas::BlobPayload),
    Frame(cas::Frame),
    Chunks(BlobId, u64, Vec<BlobId>),
}

/// Reads `item`: a frame goes whole when its wanted members take at least half of it
/// (`Reader::frame`), else each of them goes alone, compressed on its own.
fn read_item(reader: &Reader, item: &Item) -> Result<Vec<Read>, ReadError> {
    let alone = |id: BlobId| Ok(Read::Payload(id, reader.blob_payload(id)?));
    match item {
        Item::Alone(id, _) => Ok(vec![alone(*id)?]),
        Item::Chunks(id, size, chunks) => Ok(vec![Read::Chunks(*id, *size, chunks.clone())]),
        Item::Frame(at, members) => {
            if members.len() <= MAX_FRAME_MEMBERS
                && let Some(frame) = reader.frame(*at, members.clone())?
            {
                return Ok(vec![Read::Frame(frame)]);
            }
            members.iter().map(|m| alone(m.id)).collect()
        }
    }
}

/// Sends `snapshots` (and their history) to `remote`: only the objects its indexes lack,
/// in packs of about [`PACK_CUT`] bytes, verified as read; the snapshots' own pack
/// goes last. A push that was cut off resumes: what reached the remote with its index is
/// not sent again.
pub fn push(
    remote: &Remote,
    store: &cas::Store,
    snapshots: &[SnapshotId],
    progress: &dyn Progress,
) -> Result<RemotePushOutcome, RemoteError> {
    let catalog = Catalog::sync(remote, store)?;
    let reader = store.reader()?;
    let missing = find_missing(&reader, &catalog, remote.name(), snapshots)?;
    let items = items(&reader, &catalog, &missing)?;
    let total_bytes: u64 = items.iter().map(Item::bytes).sum();
    let objects = items.iter().map(Item::objects).sum::<u64>()
        + (missing.trees.len() + missing.snapshots.len()) as u64;
    progress.start("push", objects, total_bytes);
    if objects > 0 {
        remote.block_on(crate::probe::mark_for_push(remote))?;
    }

    let sent_bytes = AtomicU64::new(0);
    let mut uploaded: Vec<(String, Vec<u8>)> = Vec::new();
    if !items.is_empty() || !missing.trees.is_empty() {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Pack, RemoteError>>(WAITING);
        uploaded = std::thread::scope(|s| {
            let reader = &reader;
            let missing = &missing;
            let items = &items;
            s.spawn(move || {
                if let Err(e) = build_packs(reader, remote.name(), missing, items, progress, &tx) {
                    let _ = tx.blocking_send(Err(e));
                }
            });
            remote.block_on(async {
                tokio_stream(rx)
                    .map(|pack| async { upload(remote, pack?, &sent_bytes).await })
                    .buffer_unordered(UPLOADS)
                    .try_collect::<Vec<_>>()
                    .await
            })
        })?;
    }

    // Last, the snapshots: once their index is there, they are visible.
    if !missing.snapshots.is_empty() {
        let mut builder = PackBuilder::default();
        for id in &missing.snapshots {
            let encoded = reader.snapshot(*id)?.encode();
            builder
                .add(
                    ObjectKind::Snapshot,
                    (*id).into(),
                    false,
                    encoded.len() as u64,
                    &encoded,
                )
                .map_err(|e| RemoteError::unpackable(remote.name(), e))?;
            progress.advance(1, 0);
        }
        uploaded.push(remote.block_on(upload(remote, builder.finish(), &sent_bytes))?);
    }
    // Then the attestations of every tree of the history here, not only of what was sent:
    // a check recorded after an earlier push goes with the next one.
    let attestations_sent =
        crate::attestations::push(remote, &reader, &history_trees(&reader, snapshots)?)?;
    progress.finish();

    // The next sync need not read back what this push wrote.
    let mut batch = WriteBatch::new();
    for (name, index) in uploaded {
        let pack = parse_index_name(&name).map_or(name.as_str(), |(pack, _)| pack);
        // Just built; one that did not decode is read back by the next sync.
        if let Ok(entries) = decode_index(&index, pack) {
            crate::catalog::record_index(&mut batch, remote.name(), &name, index, &entries);
        }
    }
    drop(reader);
    if !batch.is_empty() {
        store.write(&batch)?;
    }
    Ok(RemotePushOutcome {
        pushed: snapshots.to_vec(),
        objects_sent: objects,
        bytes_sent: sent_bytes.load(Ordering::Relaxed),
        objects_present: missing.present,
        attestations_sent,
        warnings: catalog.warnings().to_vec(),
    })
}

/// The root trees of `snapshots` and of their history this store holds (a parent only
/// promised by a remote ends the walk there).
fn history_trees(
    reader: &Reader,
    snapshots: &[SnapshotId],
) -> Result<HashSet<TreeId>, RemoteError> {
    let mut trees = HashSet::new();
    let mut seen = HashSet::new();
    let mut pending = snapshots.to_vec();
    while let Some(id) = pending.pop() {
        if !seen.insert(id) || !reader.has_snapshot(id)? {
            continue;
        }
        let snap = reader.snapshot(id)?;
        trees.insert(snap.tree);
        pending.extend(snap.parents);
    }
    Ok(trees)
}

fn tokio_stream<T>(mut rx: tokio::sync::mpsc::Receiver<T>) -> impl futures_util::Stream<Item = T> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// A pack, then its index (so an index never names a pack that is not there), named by
/// the clock once the pack is there; gives back the index's name and bytes.
pub(crate) async fn upload(
    remote: &Remote,
    pack: Pack,
    sent: &AtomicU64,
) -> Result<(String, Vec<u8>), RemoteError> {
    let size = (pack.bytes.len() + pack.index.len()) as u64;
    remote
        .put(
            &pack_key(&pack.id),
            Bytes::from(pack.bytes),
            PutMode::Overwrite,
        )
        .await
        .map_err(|e| remote.fail(e))?;
    let name = index_name_now(&pack.id);
    remote
        .put(
            &index_key(&name),
            Bytes::copy_from_slice(&pack.index),
            PutMode::Overwrite,
        )
        .await
        .map_err(|e| remote.fail(e))?;
    sent.fetch_add(size, Ordering::Relaxed);
    Ok((name, pack.index))
}

/// Reads the missing blobs (in parallel, each verified, a frame once) and trees into
/// packs, handing each full pack to the uploader.
fn build_packs(
    reader: &Reader,
    remote: &str,
    missing: &Missing,
    items: &[Item],
    progress: &dyn Progress,
    tx: &tokio::sync::mpsc::Sender<Result<Pack, RemoteError>>,
) -> Result<(), RemoteError> {
    let new_pack = || PackBuilder::with_capacity(PACK_CUT + CHUNK_BYTES + (64 << 10));
    let mut builder = new_pack();
    // An error here only stops this thread: the uploader stopped on a failure of its own,
    // and that is the one reported.
    let send = |builder: PackBuilder| -> Result<(), RemoteError> {
        tx.blocking_send(Ok(builder.finish()))
            .map_err(|_| RemoteError::Unpushable {
                remote: remote.to_owned(),
                reason: "the upload stopped".to_owned(),
                layout: None,
            })
    };
    let mut start = 0;
    while start < items.len() {
        // Read in parallel, but never more than READ_BYTES (or one item) at once.
        let mut end = start;
        let mut bytes = 0;
        while end < items.len() && end - start < READ_STEP && (end == start || bytes < READ_BYTES) {
            bytes += items[end].bytes();
            end += 1;
        }
        let step = &items[start..end];
        start = end;
        let reads: Vec<Vec<Read>> = step
            .par_iter()
            .map(|item| read_item(reader, item))
            .collect::<Result<_, _>>()?;
        for read in reads.into_iter().flatten() {
            let (count, size) = match read {
                Read::Payload(id, p) => {
                    builder
                        .add(ObjectKind::Blob, id.into(), p.zstd, p.size, &p.bytes)
                        .map_err(|e| RemoteError::unpackable(remote, e))?;
                    (1, p.size)
                }
                Read::Frame(frame) => {
                    builder
                        .add_frame(frame.bytes(), frame.members())
                        .map_err(|e| RemoteError::unpackable(remote, e))?;
                    let members = frame.members();
                    (members.len() as u64, members_bytes(members))
                }
                Read::Chunks(id, size, chunks) => {
                    builder
                        .add_chunks(id, size, &chunks)
                        .map_err(|e| RemoteError::unpackable(remote, e))?;
                    (1, 0)
                }
            };
            progress.advance(count, size);
            if builder.len() >= PACK_CUT {
                send(std::mem::replace(&mut builder, new_pack()))?;
            }
        }
    }
    for id in &missing.trees {
        let encoded = reader.tree(*id)?.encode();
        let compressed = zstd::bulk::compress(&encoded, 3)
            .ok()
            .filter(|c| c.len() < encoded.len());
        let (zstd, payload) = match &compressed {
            Some(c) => (true, c.as_slice()),
            None => (false, encoded.as_slice()),
        };
        builder
            .add(
                ObjectKind::Tree,
                (*id).into(),
                zstd,
                encoded.len() as u64,
                payload,
            )
            .map_err(|e| RemoteError::unpackable(remote, e))?;
        progress.advance(1, 0);
        if builder.len() >= PACK_CUT {
            send(std::mem::replace(&mut builder, new_pack()))?;
        }
    }
    if !builder.is_empty() {
        send(builder)?;
    }
    Ok(())
}
