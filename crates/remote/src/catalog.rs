//! What a remote holds and where: every pack index it has, read once and cached in the
//! local store, and the packs remote gc has condemned.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use cas::{ObjectId, WriteBatch};

use crate::config::INDEX_CACHE;
use crate::error::RemoteError;
use crate::layout::{
    MAX_INDEX, MAX_RECORD, PackEntry, decode_index, index_key, now_millis, parse_index_name,
    time_prefix,
};
use crate::transport::Remote;

/// Requests in flight at once.
pub(crate) const CONCURRENCY: usize = 16;

/// Where an object is on the remote.
#[derive(Debug, Clone)]
pub struct Located {
    /// The pack (hex id).
    pub pack: Arc<str>,
    /// Its entry in the pack's index.
    pub entry: PackEntry,
}

/// Packs a remote gc condemned, and when: `gc/<time>-<nonce>`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Condemned {
    /// Unix seconds.
    pub(crate) at: i64,
    /// Pack ids.
    pub(crate) packs: Vec<String>,
}

/// How far back from the last name a store saw its next listing starts (see
/// [`Catalog::sync`]): a pack whose index is named by a clock lagging more than this is
/// missed by incremental listings, and found by the full one a fetch does when it cannot
/// find an object.
pub const LIST_MARGIN_MILLIS: u64 = 5 * 60 * 1000;

/// The key, beside a remote's cached indexes, of what the store last saw of the remote
/// ([`Mark`]); no name under `index/` is this.
const MARK_KEY: &[u8] = b"mark";

/// What a store last saw of a remote's `index/` and `gc/`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Mark {
    /// When it last listed `index/`, by its own clock (Unix milliseconds): every name
    /// written before then by a clock within the margin of it sorts after the mark less
    /// the margin.
    seen_millis: u64,
    /// The keys under `gc/` then, sorted: any change means a gc ran since, and may have
    /// deleted indexes, so the next listing is a full one.
    gc: Vec<String>,
}

/// How [`Catalog`] lists `index/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// Only what is new since the store's mark, when it has one and no gc ran since.
    Incremental,
    /// Everything, dropping cached indexes the remote no longer has.
    Full,
}

/// The remote's objects, as its indexes say.
pub struct Catalog {
    objects: HashMap<ObjectId, Located>,
    packs: HashMap<Arc<str>, Vec<PackEntry>>,
    /// Pack → the names under `index/` of its index (one, unless two writers made the
    /// same pack).
    names: HashMap<Arc<str>, Vec<String>>,
    /// Pack → when a remote gc first condemned it.
    pub(crate) condemned: HashMap<String, i64>,
    /// The condemnation records read (their keys under `gc/`).
    pub(crate) condemned_keys: Vec<String>,
    /// Packs whose index is there but could not be read: no object of theirs is counted
    /// on, and remote gc leaves them alone.
    pub(crate) unreadable: std::collections::HashSet<String>,
    /// What under `index/` was skipped, and why (see [`Catalog::warnings`]).
    warnings: Vec<String>,
    /// Whether `index/` was listed whole.
    full: bool,
}

impl Catalog {
    /// Reads the remote's indexes, fetching only those `store` has not cached, and
    /// updates the cache. The listing starts [`LIST_MARGIN_MILLIS`] before the latest
    /// index name the store saw last time (names sort by the writer's clock), unless the
    /// store never listed this remote or `gc/` changed since (a gc may have deleted
    /// indexes): then it is a full one, which drops cached indexes of packs the remote no
    /// longer has. Anything under `index/` that is not a readable index (a file another
    /// program left, a damaged index) is skipped, each named in [`Catalog::warnings`]: the
    /// rest of the remote still serves.
    pub fn sync(remote: &Remote, store: &cas::Store) -> Result<Catalog, RemoteError> {
        Catalog::sync_with(remote, store, Listing::Incremental)
    }

    /// [`Catalog::sync`] with a full listing of `index/`: what a fetch does again when
    /// an object is not where an incremental listing said, or nowhere.
    pub fn sync_full(remote: &Remote, store: &cas::Store) -> Result<Catalog, RemoteError> {
        Catalog::sync_with(remote, store, Listing::Full)
    }

    /// True if `index/` was listed whole for this catalog.
    pub fn is_full(&self) -> bool {
        self.full
    }

    /// [`Catalog::sync`], listing as `listing` says.
    pub fn sync_with(
        remote: &Remote,
        store: &cas::Store,
        listing: Listing,
    ) -> Result<Catalog, RemoteError> {
        let name = remote.name().to_owned();
        let mut mark: Option<Mark> = None;
        let mut cached: HashMap<String, Vec<u8>> = HashMap::new();
        for (k, v) in store.reader()?.side_scope(INDEX_CACHE, &name)? {
            if k == MARK_KEY {
                // An unreadable mark is no mark: the listing is a full one.
                mark = serde_json::from_slice(&v).ok();
            } else {
                cached.insert(String::from_utf8_lossy(&k).into_owned(), v);
            }
        }
        let mut warnings = Vec::new();
        let skipped = |key: &str, reason: &dyn std::fmt::Display| {
            format!("remote {name}: skipped index/{key}: {reason}")
        };
        let (listed, fetched, condemned, after, listed_at) = remote.block_on(async {
            // gc/ first: whether it changed decides how index/ is listed.
            let mut condemned = Vec::new();
            for (key, _) in remote.list("gc").await? {
                if let Some(bytes) = remote.get(&format!("gc/{key}"), MAX_RECORD).await? {
                    let record: Condemned = serde_json::from_slice(&bytes)
                        .map_err(|e| RemoteError::undecodable(&name, format!("gc/{key}"), e))?;
                    condemned.push((key, record));
                }
            }
            let mut gc_keys: Vec<String> = condemned.iter().map(|(k, _)| k.clone()).collect();
            gc_keys.sort();
            let listed_at = now_millis();
            let after = match (&mark, listing) {
                (Some(mark), Listing::Incremental) if mark.gc == gc_keys => Some(time_prefix(
                    mark.seen_millis.saturating_sub(LIST_MARGIN_MILLIS),
                )),
                _ => None,
            };
            let (entries, unreadable) = remote.list_names_after("index", after.as_deref()).await?;
            warnings.extend(
                unreadable
                    .iter()
                    .map(|e| format!("remote {name}: skipped a file under index/: {e}")),
            );
            let mut listed: Vec<String> = Vec::with_capacity(entries.len());
            for key in entries {
                if parse_index_name(&key).is_some() {
                    listed.push(key);
                } else {
                    warnings.push(skipped(&key, &"not a pack index (its name is no pack id)"));
                }
            }
            let wanted: Vec<String> = listed
                .iter()
                .filter(|k| !cached.contains_key(*k))
                .cloned()
                .collect();
            // An index larger than any push writes is read no further, and skipped.
            let fetched: Vec<(String, Result<Option<bytes::Bytes>, RemoteError>)> =
                futures_util::stream::iter(wanted.into_iter().map(|index| async move {
                    match remote.get(&index_key(&index), MAX_INDEX).await {
                        Ok(bytes) => Ok((index, Ok(bytes))),
                        Err(e @ RemoteError::Corrupt { .. }) => Ok((index, Err(e))),
                        Err(e) => Err(e),
                    }
                }))
                .buffer_unordered(CONCURRENCY)
                .try_collect()
                .await?;
            Ok::<_, RemoteError>((listed, fetched, condemned, after, listed_at))
        })?;
        let full = after.is_none();

        let mut batch = WriteBatch::new();
        let mut indexes: Vec<(String, Vec<u8>)> = Vec::with_capacity(listed.len());
        let mut unreadable = std::collections::HashSet::new();
        for (index, bytes) in fetched {
            // Deleted between the listing and the read: a remote gc ran.
            let bytes = match bytes {
                Ok(Some(bytes)) => bytes,
                Ok(None) => continue,
                Err(e) => {
                    // The warning names the remote and the index already.
                    let reason: &dyn std::fmt::Display = match &e {
                        RemoteError::Corrupt { reason, .. } => reason,
                        other => other,
                    };
                    warnings.push(skipped(&index, reason));
                    unreadable.insert(pack_of(&index).to_owned());
                    continue;
                }
            };
            // Not cached: a repaired index is read again next time.
            if let Err(reason) = decode_index(&bytes, pack_of(&index)) {
                warnings.push(skipped(&index, &reason));
                unreadable.insert(pack_of(&index).to_owned());
                continue;
            }
            batch.put_side(INDEX_CACHE, &name, index.as_bytes(), bytes.to_vec());
            indexes.push((index, bytes.to_vec()));
        }
        let listed_set: std::collections::HashSet<&String> = listed.iter().collect();
        for (index, bytes) in cached {
            if !full || listed_set.contains(&index) {
                indexes.push((index, bytes));
            } else {
                batch.remove_side(INDEX_CACHE, &name, index.as_bytes());
            }
        }
        // The next listing starts where this one did, by this machine's clock (not the
        // names': a writer whose clock runs ahead must not hide the others' names, and a
        // store that only pushes must not list from its first look forever).
        let mut gc_keys: Vec<String> = condemned.iter().map(|(k, _)| k.clone()).collect();
        gc_keys.sort();
        let new_mark = Mark {
            seen_millis: listed_at,
            gc: gc_keys,
        };
        if mark.as_ref() != Some(&new_mark) {
            let json = serde_json::to_vec(&new_mark).unwrap_or_default();
            batch.put_side(INDEX_CACHE, &name, MARK_KEY, json);
        }
        if !batch.is_empty() {
            store.write(&batch)?;
        }

        let mut catalog = Catalog {
            objects: HashMap::new(),
            packs: HashMap::new(),
            names: HashMap::new(),
            condemned: HashMap::new(),
            condemned_keys: Vec::new(),
            unreadable,
            warnings,
            full,
        };
        for (key, record) in condemned {
            for pack in record.packs {
                let at = catalog.condemned.entry(pack).or_insert(record.at);
                *at = (*at).min(record.at);
            }
            catalog.condemned_keys.push(key);
        }
        for (index, bytes) in indexes {
            let pack = pack_of(&index);
            // A cached index decoded when it was cached; one damaged here since is
            // skipped, and dropped from the cache so the remote's is read next time.
            let entries = match decode_index(&bytes, pack) {
                Ok(entries) => entries,
                Err(reason) => {
                    catalog.warnings.push(skipped(&index, &reason));
                    catalog.unreadable.insert(pack.to_owned());
                    let mut drop_it = WriteBatch::new();
                    drop_it.remove_side(INDEX_CACHE, &name, index.as_bytes());
                    store.write(&drop_it)?;
                    continue;
                }
            };
            let pack: Arc<str> = Arc::from(pack);
            catalog
                .names
                .entry(pack.clone())
                .or_default()
                .push(index.clone());
            if catalog.packs.contains_key(&pack) {
                continue;
            }
            let condemned = catalog.condemned.contains_key(&*pack);
            for entry in &entries {
                let slot = catalog.objects.entry(entry.id);
                match slot {
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert(Located {
                            pack: pack.clone(),
                            entry: *entry,
                        });
                    }
                    // A copy outside condemned packs is the one to use.
                    std::collections::hash_map::Entry::Occupied(mut o) => {
                        if !condemned && catalog.condemned.contains_key(&*o.get().pack) {
                            o.insert(Located {
                                pack: pack.clone(),
                                entry: *entry,
                            });
                        }
                    }
                }
            }
            catalog.packs.insert(pack, entries);
        }
        for warning in &catalog.warnings {
            tracing::warn!("{warning}");
        }
        Ok(catalog)
    }

    /// The names under `index/` of the index of `pack`.
    pub(crate) fn index_names(&self, pack: &str) -> &[String] {
        self.names.get(pack).map_or(&[], Vec::as_slice)
    }

    /// What was skipped under `index/` (a file that is no readable index), each naming
    /// the file and the remote; also logged as warnings.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Where object `id` is, if the remote holds it.
    pub fn locate(&self, id: ObjectId) -> Option<&Located> {
        self.objects.get(&id)
    }

    /// True if the remote holds `id`.
    pub fn has(&self, id: ObjectId) -> bool {
        self.objects.contains_key(&id)
    }

    /// True if the remote holds `id` in a pack no gc has condemned: a push may count on it.
    pub(crate) fn has_for_push(&self, id: ObjectId) -> bool {
        self.objects
            .get(&id)
            .is_some_and(|l| !self.condemned.contains_key(&*l.pack))
    }

    /// The entries of `pack`'s index, if the remote has it.
    pub fn pack_entries(&self, pack: &str) -> Result<Option<Vec<PackEntry>>, RemoteError> {
        Ok(self.packs.get(pack).cloned())
    }

    /// Every indexed pack and its entries.
    pub(crate) fn packs(&self) -> impl Iterator<Item = (&Arc<str>, &Vec<PackEntry>)> {
        self.packs.iter()
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// True if the remote holds nothing.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }
}

pub(crate) fn is_hex_id(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The pack a listed (so parsed) name under `index/` indexes.
fn pack_of(index: &str) -> &str {
    parse_index_name(index).map_or(index, |(pack, _)| pack)
}
