//! Remote gc, in two phases so that a push under way on another machine is never cut: a
//! pack nothing reaches is first condemned (recorded under `gc/`), and deleted only by a
//! gc at least the grace period later that still finds it unreachable. A push counts
//! objects of condemned packs as missing and sends them again, so what it builds on is
//! never one of them; a push that started before the condemnation ends within the grace
//! period and makes what it used reachable again.

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;
use object_store::PutMode;
use serde::{Deserialize, Serialize};

use cas::{ObjectId, ObjectKind, VerifiedObject};

use crate::catalog::{Catalog, Condemned, Located, is_hex_id};
use crate::error::RemoteError;
use crate::fetch::{read_chunk_lists, read_objects};
use crate::layout::{Encoding, index_key, pack_key};
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
}

/// Runs remote gc on `remote`; `store` supplies objects it holds (others are read from
/// the remote, checked, and not stored).
pub fn gc(
    remote: &Remote,
    store: &cas::Store,
    options: &RemoteGcOptions,
) -> Result<RemoteGcOutcome, RemoteError> {
    let catalog = Catalog::sync(remote, store)?;
    let mut roots: Vec<cas::SnapshotId> = refs::list(remote)?
        .into_iter()
        .map(|r| r.snapshot)
        .collect();
    roots.extend(refs::pins(remote)?);
    // A pack kept for one live object keeps every snapshot its index shows visible, so
    // those snapshots must stay whole too: they are roots as well, until nothing is added.
    let (live, live_packs, live_trees) = loop {
        let (live, live_trees) = reachable(remote, store, &catalog, roots.clone())?;
        let live_packs = packs_holding(&catalog, &live);
        let shown: Vec<cas::SnapshotId> = catalog
            .packs()
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
            if catalog.condemned.contains_key(pack) {
                out.packs_rescued += 1;
            }
            continue;
        }
        let at = catalog.condemned.get(pack).copied().unwrap_or(now);
        if now.saturating_sub(at) >= options.grace_seconds as i64 {
            delete.push((pack.clone(), meta.size));
        } else {
            if !catalog.condemned.contains_key(pack) {
                out.packs_condemned += 1;
            }
            keep.entry(at).or_default().push(pack.clone());
        }
    }
    // An index whose pack is gone (a deletion cut off between the two).
    let listed_packs: HashSet<&String> = listed.iter().map(|(p, _)| p).collect();
    let stray_indexes: Vec<String> = catalog
        .packs()
        .map(|(p, _)| p.to_string())
        .filter(|p| !listed_packs.contains(p))
        .collect();
    out.packs_removed = delete.len() as u64;
    out.removed = delete.iter().map(|(pack, _)| pack.clone()).collect();
    out.bytes_freed = delete.iter().map(|(_, size)| *size).sum();
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
    remote.block_on(async {
        // The new condemnation records first, then the old ones go: a gc cut off in
        // between leaves duplicates, read as the earliest time.
        let nonce = blake3::hash(format!("{now}-{}", std::process::id()).as_bytes()).to_hex();
        let mut written = Vec::new();
        for (at, packs) in &keep {
            let key = format!("gc/{at:012}-{}", &nonce[..12]);
            let body = serde_json::to_vec(&Condemned {
                at: *at,
                packs: packs.clone(),
            })
            .unwrap_or_default();
            remote
                .put(&key, Bytes::from(body), PutMode::Overwrite)
                .await
                .map_err(|e| remote.fail(e))?;
            written.push(key.trim_start_matches("gc/").to_owned());
        }
        for old in &catalog.condemned_keys {
            if !written.contains(old) {
                remote.delete(&format!("gc/{old}")).await?;
            }
        }
        // The index first: a pack without an index is invisible; an index without its
        // pack would not be.
        for (pack, _) in &delete {
            remote.delete(&index_key(pack)).await?;
            remote.delete(&pack_key(pack)).await?;
        }
        for pack in &stray_indexes {
            remote.delete(&index_key(pack)).await?;
        }
        out.ref_entries_dropped = refs::compact(remote, false).await?;
        out.attestations_removed =
            crate::attestations::gc(remote, &live_trees, options.grace_seconds, now, false).await?;
        Ok::<_, RemoteError>(())
    })?;
    Ok(out)
}

/// The packs that hold a copy of a `live` object that readers use (an object in a
/// condemned pack and again in a new one is read from the new one).
fn packs_holding(catalog: &Catalog, live: &HashSet<ObjectId>) -> HashSet<String> {
    catalog
        .packs()
        .filter(|(pack, entries)| {
            entries.iter().any(|e| {
                live.contains(&e.id) && catalog.locate(e.id).is_some_and(|l| l.pack == **pack)
            })
        })
        .map(|(pack, _)| pack.to_string())
        .collect()
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
    let lists: Vec<Located> = live
        .iter()
        .filter_map(|id| catalog.locate(*id))
        .filter(|l| l.entry.kind == ObjectKind::Blob && l.entry.encoding == Encoding::Chunks)
        .cloned()
        .collect();
    for (_, _, chunks) in read_chunk_lists(remote, catalog, lists, &mut scratch)? {
        live.extend(chunks.into_iter().map(ObjectId::from));
    }
    Ok((live, root_trees))
}
