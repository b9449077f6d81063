//! Remote gc, in two phases so that a push under way on another machine is never cut: a
//! pack nothing reaches is first condemned (recorded under `gc/`), and deleted only by a
//! gc at least the grace period later that still finds it unreachable. A push counts
//! objects of condemned packs as missing and sends them again, so what it builds on is
//! never one of them; a push that started before the condemnation ends within the grace
//! period and makes what it used reachable again.

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use object_store::PutMode;
use serde::{Deserialize, Serialize};

use cas::{ObjectId, ObjectKind, VerifiedObject};

use crate::catalog::{Catalog, Condemned, Located, is_hex_id};
use crate::error::RemoteError;
use crate::fetch::{read_chunk_lists, read_objects};
use crate::layout::{
    Encoding, PACK_TARGET, PackBuilder, PackEntry, decode_pack, index_key, pack_key,
};
use crate::refs;
use crate::transport::Remote;

/// How remote gc runs.
#[derive(Debug, Clone, Copy)]
pub struct RemoteGcOptions {
    /// Seconds a pack stays condemned before it is deleted.
    pub grace_seconds: u64,
    /// Report only.
    pub dry_run: bool,
}

/// What remote gc did, or would do.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RemoteGcOutcome {
    /// Packs deleted.
    pub packs_removed: u64,
    /// Their ids.
    pub removed: Vec<String>,
    /// Their bytes.
    pub bytes_freed: u64,
    /// Packs condemned and waiting for the grace period to pass.
    pub packs_condemned: u64,
    /// Condemned packs that something reaches again.
    pub packs_rescued: u64,
    /// Old entries of refs' histories dropped.
    pub ref_entries_dropped: u64,
    /// Objects the refs and pins reach.
    pub reachable: u64,
    /// Attestations deleted: no snapshot kept has their tree, and they are older than the
    /// grace period.
    #[serde(default)]
    pub attestations_removed: u64,
    /// Small packs (under [`REPACK_BELOW`] bytes, older than the grace period, once there
    /// are [`REPACK_AT`] of them) whose live objects were copied into new packs; they are condemned, and deleted by a gc after
    /// the grace period.
    #[serde(default)]
    pub packs_repacked: u64,
    /// The new packs they were copied into.
    #[serde(default)]
    pub packs_written: u64,
}

/// Live packs smaller than this are copied together into packs near
/// [`PACK_TARGET`](crate::layout::PACK_TARGET), so their count stays bounded however many
/// small pushes a remote takes.
pub const REPACK_BELOW: u64 = 4 << 20;
/// Small packs are repacked once there are at least this many: fewer cost little to list
/// and read, and copying them again at every gc would be churn.
pub const REPACK_AT: usize = 32;

/// Runs remote gc on `remote`; `store` supplies objects it holds (others are read from
/// the remote, checked, and not stored).
pub fn gc(
    remote: &Remote,
    store: &cas::Store,
    options: &RemoteGcOptions,
) -> Result<RemoteGcOutcome, RemoteError> {
    // A gc sees everything: an incremental listing could miss what a lagging clock named.
    let catalog = Catalog::sync_full(remote, store)?;
    let condemned = catalog.condemned()?;
    let mut roots: Vec<cas::SnapshotId> = refs::list(remote)?
        .into_iter()
        .map(|r| r.snapshot)
        .collect();
    roots.extend(refs::pins(remote)?);
    // A pack kept for one live object keeps every snapshot its index shows visible, so
    // those snapshots must stay whole too: they are roots as well, until nothing is added.
    let (live, live_packs, live_trees) = loop {
        let (live, live_trees) = reachable(remote, store, &catalog, roots.clone())?;
        let live_packs = packs_holding(&catalog, &live)?;
        let shown: Vec<cas::SnapshotId> = catalog
            .packs()?
            .filter(|(pack, _)| live_packs.contains(&***pack))
            .flat_map(|(_, entries)| entries)
            .filter(|e| e.kind == ObjectKind::Snapshot && !live.contains(&e.id))
            .map(|e| e.id.as_snapshot())
            .collect();
        if shown.is_empty() {
            break (live, live_packs, live_trees);
        }
        roots.extend(shown);
    };

    let now = jiff::Timestamp::now().as_second();
    let mut out = RemoteGcOutcome {
        reachable: live.len() as u64,
        ..RemoteGcOutcome::default()
    };
    // Only what a push writes: anything else under packs/ is not cairn's to delete.
    let listed: Vec<_> = remote
        .block_on(remote.list("packs"))?
        .into_iter()
        .filter(|(k, _)| is_hex_id(k))
        .collect();
    let mut keep: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    let mut delete: Vec<(String, u64)> = Vec::new();
    for (pack, meta) in &listed {
        // A pack whose index cannot be read may hold anything: it is kept (sync said so).
        if catalog.unreadable.contains(pack) {
            continue;
        }
        if live_packs.contains(pack) {
            if condemned.contains_key(pack) {
                out.packs_rescued += 1;
            }
            continue;
        }
        let at = condemned.get(pack).copied().unwrap_or(now);
        if now.saturating_sub(at) >= options.grace_seconds as i64 {
            delete.push((pack.clone(), meta.size));
        } else {
            if !condemned.contains_key(pack) {
                out.packs_condemned += 1;
            }
            keep.entry(at).or_default().push(pack.clone());
        }
    }
    // An index whose pack is gone (a deletion cut off between the two).
    let listed_packs: HashSet<&String> = listed.iter().map(|(p, _)| p).collect();
    let mut stray_indexes: Vec<String> = catalog
        .packs()?
        .map(|(p, _)| p.to_string())
        .filter(|p| !listed_packs.contains(p))
        .collect();
    // Small live packs, old enough that no push under way still writes them.
    let mut small: Vec<String> = listed
        .iter()
        .filter(|(pack, meta)| {
            meta.size < REPACK_BELOW
                && live_packs.contains(pack)
                && !condemned.contains_key(pack)
                && !catalog.unreadable.contains(pack)
                && now.saturating_sub(meta.last_modified.timestamp())
                    >= options.grace_seconds as i64
        })
        .map(|(pack, _)| pack.clone())
        .collect();
    small.sort();
    if small.len() < REPACK_AT {
        small.clear();
    }
    out.packs_repacked = small.len() as u64;
    let tally = |out: &mut RemoteGcOutcome, delete: &[(String, u64)]| {
        out.packs_removed = delete.len() as u64;
        out.removed = delete.iter().map(|(pack, _)| pack.clone()).collect();
        out.bytes_freed = delete.iter().map(|(_, size)| *size).sum();
    };
    tally(&mut out, &delete);
    if options.dry_run {
        out.ref_entries_dropped = remote.block_on(refs::compact(remote, true))?;
        out.attestations_removed = remote.block_on(crate::attestations::gc(
            remote,
            &live_trees,
            options.grace_seconds,
            now,
            true,
        ))?;
        return Ok(out);
    }
    if !small.is_empty() {
        // The copies are written, indexes and all, before the originals are condemned: a
        // gc killed in between leaves both, whole.
        let written = remote.block_on(repack(remote, &small, &live))?;
        out.packs_written = written.len() as u64;
        keep.entry(now).or_default().extend(small.iter().cloned());
        // A pack is named by its bytes: a copy can be a pack listed above without its
        // index (a gc killed between the two writes made the same copy), now indexed
        // and what the originals' objects are read from, so neither condemned nor deleted.
        for packs in keep.values_mut() {
            packs.retain(|p| !written.contains(p));
        }
        delete.retain(|(pack, _)| !written.contains(pack));
        stray_indexes.retain(|pack| !written.contains(pack));
        tally(&mut out, &delete);
    }
    // What is about to be deleted is recorded as condemned too: a store that lists only
    // new indexes keeps its cached ones until `gc/` changes, and must not count on these
    // meanwhile; the next gc's records leave them out, and so tell it to list whole.
    let mut recorded = keep.clone();
    for (pack, _) in &delete {
        let at = condemned.get(pack).copied().unwrap_or(now);
        recorded.entry(at).or_default().push(pack.clone());
    }
    if !stray_indexes.is_empty() {
        recorded
            .entry(now)
            .or_default()
            .extend(stray_indexes.iter().cloned());
    }
    remote.block_on(async {
        // The new condemnation records first, then the old ones go: a gc cut off in
        // between leaves duplicates, read as the earliest time.
        let nonce = blake3::hash(format!("{now}-{}", std::process::id()).as_bytes()).to_hex();
        let mut written = Vec::new();
        for (key, body) in records(&recorded, &nonce[..12]) {
            remote
                .put(&key, Bytes::from(body), PutMode::Overwrite)
                .await
                .map_err(|e| remote.fail(e))?;
            written.push(key.trim_start_matches("gc/").to_owned());
        }
        for old in catalog.condemned_keys.iter() {
            if !written.contains(old) {
                remote.delete(&format!("gc/{old}")).await?;
            }
        }
        // The index first: a pack without an index is invisible; an index without its
        // pack would not be.
        // Many at once: a repack condemns thousands.
        let doomed: Vec<(String, Vec<String>)> = delete
            .iter()
            .map(|(pack, _)| Ok((pack.clone(), catalog.index_names(pack)?)))
            .collect::<Result<_, RemoteError>>()?;
        futures_util::stream::iter(doomed.into_iter().map(|(pack, names)| async move {
            for name in names {
                remote.delete(&index_key(&name)).await?;
            }
            remote.delete(&pack_key(&pack)).await
        }))
        .buffer_unordered(crate::catalog::CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
        for pack in &stray_indexes {
            for name in catalog.index_names(pack)? {
                remote.delete(&index_key(&name)).await?;
            }
        }
        out.ref_entries_dropped = refs::compact(remote, false).await?;
        out.attestations_removed =
            crate::attestations::gc(remote, &live_trees, options.grace_seconds, now, false).await?;
        Ok::<_, RemoteError>(())
    })?;
    Ok(out)
}

/// Packs one record under `gc/` names at most: some 6.7 MB of JSON, well under the
/// [`MAX_RECORD`](crate::layout::MAX_RECORD) every reader takes, however many packs a
/// repack condemns (a record over it would stop every sync of the remote).
const RECORD_PACKS: usize = 100_000;

/// The records under `gc/` that say `recorded` (time → packs condemned then), keys and
/// bodies: one per time, or more, each naming at most [`RECORD_PACKS`] packs.
fn records(recorded: &BTreeMap<i64, Vec<String>>, nonce: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (at, packs) in recorded {
        for (part, packs) in packs.chunks(RECORD_PACKS).enumerate() {
            let key = match part {
                0 => format!("gc/{at:012}-{nonce}"),
                n => format!("gc/{at:012}-{nonce}-{n}"),
            };
            let body = serde_json::to_vec(&Condemned {
                at: *at,
                packs: packs.to_vec(),
            })
            .unwrap_or_default();
            out.push((key, body));
        }
    }
    out
}

/// Copies the payloads of `packs` that hold a `live` object into new packs of about
/// [`PACK_TARGET`](crate::layout::PACK_TARGET) bytes, each checked against its id as read;
/// gives back the ids of the packs it wrote.
async fn repack(
    remote: &Remote,
    packs: &[String],
    live: &HashSet<ObjectId>,
) -> Result<HashSet<String>, RemoteError> {
    crate::probe::mark_for_push(remote).await?;
    let new_pack = || PackBuilder::with_capacity(PACK_TARGET + (1 << 20));
    let mut builder = new_pack();
    let mut written = HashSet::new();
    let sent = std::sync::atomic::AtomicU64::new(0);
    let mut reads = futures_util::stream::iter(packs.iter().cloned().map(|pack| async move {
        let bytes = remote.get(&pack_key(&pack), REPACK_BELOW).await?;
        Ok::<_, RemoteError>((pack, bytes))
    }))
    .buffered(crate::catalog::CONCURRENCY);
    while let Some(read) = reads.next().await {
        let (pack, bytes) = read?;
        // Gone since the listing (another gc): its objects are wherever that gc left them.
        let Some(bytes) = bytes else { continue };
        let entries = decode_pack(&bytes, &pack)
            .map_err(|e| RemoteError::corrupt(remote.name(), pack_key(&pack), e))?;
        // A frame's members share one payload: it goes once, whole, if any is live.
        let mut payloads: BTreeMap<u64, (Vec<PackEntry>, &[u8])> = BTreeMap::new();
        for (entry, payload) in entries {
            payloads
                .entry(entry.offset)
                .or_insert_with(|| (Vec::new(), payload))
                .0
                .push(entry);
        }
        for (held, payload) in payloads.into_values() {
            if !held.iter().any(|e| live.contains(&e.id)) {
                continue;
            }
            builder
                .copy_payload(&held, payload)
                .map_err(|e| RemoteError::unpackable(remote.name(), e))?;
            if builder.len() >= PACK_TARGET {
                let full = std::mem::replace(&mut builder, new_pack()).finish();
                written.insert(full.id.clone());
                crate::push::upload(remote, full, &sent).await?;
            }
        }
    }
    if !builder.is_empty() {
        let last = builder.finish();
        written.insert(last.id.clone());
        crate::push::upload(remote, last, &sent).await?;
    }
    Ok(written)
}

/// The packs that hold a copy of a `live` object that readers use (an object in a
/// condemned pack and again in a new one is read from the new one).
fn packs_holding(
    catalog: &Catalog,
    live: &HashSet<ObjectId>,
) -> Result<HashSet<String>, RemoteError> {
    let mut out = HashSet::new();
    for (pack, entries) in catalog.packs()? {
        for e in entries {
            if live.contains(&e.id) && catalog.locate(e.id)?.is_some_and(|l| l.pack == *pack) {
                out.insert(pack.to_string());
                break;
            }
        }
    }
    Ok(out)
}

/// Every object the roots reach, reading trees and snapshots from the store where it has
/// them and from the remote otherwise; and the root trees of the snapshots among them,
/// whose attestations stay.
fn reachable(
    remote: &Remote,
    store: &cas::Store,
    catalog: &Catalog,
    roots: Vec<cas::SnapshotId>,
) -> Result<(HashSet<ObjectId>, HashSet<cas::TreeId>), RemoteError> {
    let reader = store.reader()?;
    let mut live: HashSet<ObjectId> = HashSet::new();
    let mut snaps: Vec<cas::SnapshotId> = roots;
    let mut trees: Vec<cas::TreeId> = Vec::new();
    let mut root_trees: HashSet<cas::TreeId> = HashSet::new();
    let mut scratch = crate::fetch::FetchOutcome::default();
    while !snaps.is_empty() {
        let level: Vec<cas::SnapshotId> = snaps
            .drain(..)
            .filter(|s| live.insert((*s).into()))
            .collect();
        let mut remote_ids = Vec::new();
        for id in level {
            if reader.has_snapshot(id)? {
                let s = reader.snapshot(id)?;
                root_trees.insert(s.tree);
                trees.push(s.tree);
                snaps.extend(s.parents);
            } else {
                remote_ids.push(id.into());
            }
        }
        for object in read_objects(
            remote,
            catalog,
            &remote_ids,
            ObjectKind::Snapshot,
            &mut scratch,
        )?
        .objects
        {
            if let VerifiedObject::Snapshot(s) = object {
                root_trees.insert(s.tree);
                trees.push(s.tree);
                snaps.extend(s.parents);
            }
        }
    }
    while !trees.is_empty() {
        let level: Vec<cas::TreeId> = trees
            .drain(..)
            .filter(|t| live.insert((*t).into()))
            .collect();
        let mut remote_ids = Vec::new();
        let mut visit = |tree: &cas::Tree, trees: &mut Vec<cas::TreeId>| {
            for entry in tree.entries() {
                match (entry.blob(), entry.tree()) {
                    (Some(b), _) => {
                        live.insert(b.into());
                    }
                    (_, Some(t)) => trees.push(t),
                    _ => {}
                }
            }
        };
        for id in level {
            if reader.has_tree(id)? {
                visit(&reader.tree(id)?, &mut trees);
            } else {
                remote_ids.push(id.into());
            }
        }
        for object in
            read_objects(remote, catalog, &remote_ids, ObjectKind::Tree, &mut scratch)?.objects
        {
            if let VerifiedObject::Tree(t) = object {
                visit(&t, &mut trees);
            }
        }
    }
    // A blob sent as a list of its chunks keeps them.
    let mut lists: Vec<Located> = Vec::new();
    for id in &live {
        if let Some(l) = catalog.locate(*id)?
            && l.entry.kind == ObjectKind::Blob
            && l.entry.encoding == Encoding::Chunks
        {
            lists.push(l);
        }
    }
    for (_, _, chunks) in read_chunk_lists(remote, catalog, lists, &mut scratch)? {
        live.extend(chunks.into_iter().map(ObjectId::from));
    }
    Ok((live, root_trees))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condemnation_of_any_number_of_packs_goes_in_records_every_reader_takes() {
        let packs: Vec<String> = (0..250_001u64)
            .map(|i| blake3::hash(&i.to_le_bytes()).to_hex().to_string())
            .collect();
        let recorded =
            BTreeMap::from([(1_795_312_345, packs.clone()), (7, vec![packs[0].clone()])]);
        let records = records(&recorded, "0123456789ab");
        assert_eq!(records.len(), 4);
        let keys: HashSet<&String> = records.iter().map(|(k, _)| k).collect();
        assert_eq!(keys.len(), records.len(), "every key its own");
        let mut named = HashSet::new();
        for (key, body) in &records {
            assert!(
                body.len() as u64 <= crate::layout::MAX_RECORD,
                "{key}: {} bytes",
                body.len()
            );
            let record: Condemned = serde_json::from_slice(body).unwrap();
            assert!(key.starts_with(&format!("gc/{:012}-", record.at)), "{key}");
            named.extend(record.packs);
        }
        assert_eq!(named.len(), packs.len());
    }
}
