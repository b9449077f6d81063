//! What a remote holds and where: every pack index it has, read once and cached in the
//! local store, and the packs remote gc has condemned.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use cas::{ObjectId, WriteBatch};

use crate::config::INDEX_CACHE;
use crate::error::RemoteError;
use crate::layout::{MAX_INDEX, MAX_RECORD, PackEntry, decode_index, index_key};
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

/// The remote's objects, as its indexes say.
pub struct Catalog {
    objects: HashMap<ObjectId, Located>,
    packs: HashMap<Arc<str>, Vec<PackEntry>>,
    /// Pack → when a remote gc first condemned it.
    pub(crate) condemned: HashMap<String, i64>,
    /// The condemnation records read (their keys under `gc/`).
    pub(crate) condemned_keys: Vec<String>,
    /// Packs whose index is there but could not be read: no object of theirs is counted
    /// on, and remote gc leaves them alone.
    pub(crate) unreadable: std::collections::HashSet<String>,
    /// What under `index/` was skipped, and why (see [`Catalog::warnings`]).
    warnings: Vec<String>,
}

impl Catalog {
    /// Reads the remote's indexes, fetching only those `store` has not cached, and
    /// updates the cache (dropping indexes of packs the remote no longer has). Anything
    /// under `index/` that is not a readable index (a file another program left, a
    /// damaged index) is skipped, each named in [`Catalog::warnings`]: the rest of the
    /// remote still serves.
    pub fn sync(remote: &Remote, store: &cas::Store) -> Result<Catalog, RemoteError> {
        let name = remote.name().to_owned();
        let cached: HashMap<String, Vec<u8>> = store
            .reader()?
            .side_scope(INDEX_CACHE, &name)?
            .into_iter()
            .map(|(k, v)| (String::from_utf8_lossy(&k).into_owned(), v))
            .collect();
        let mut warnings = Vec::new();
        let skipped = |key: &str, reason: &dyn std::fmt::Display| {
            format!("remote {name}: skipped index/{key}: {reason}")
        };
        let (listed, fetched, condemned) = remote.block_on(async {
            let (entries, unreadable) = remote.list_names("index").await?;
            warnings.extend(
                unreadable
                    .iter()
                    .map(|e| format!("remote {name}: skipped a file under index/: {e}")),
            );
            let mut listed: Vec<String> = Vec::with_capacity(entries.len());
            for key in entries {
                if is_hex_id(&key) {
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
                futures_util::stream::iter(wanted.into_iter().map(|pack| async move {
                    match remote.get(&index_key(&pack), MAX_INDEX).await {
                        Ok(bytes) => Ok((pack, Ok(bytes))),
                        Err(e @ RemoteError::Corrupt { .. }) => Ok((pack, Err(e))),
                        Err(e) => Err(e),
                    }
                }))
                .buffer_unordered(CONCURRENCY)
                .try_collect()
                .await?;
            let mut condemned = Vec::new();
            for (key, _) in remote.list("gc").await? {
                if let Some(bytes) = remote.get(&format!("gc/{key}"), MAX_RECORD).await? {
                    let record: Condemned = serde_json::from_slice(&bytes)
                        .map_err(|e| RemoteError::undecodable(&name, format!("gc/{key}"), e))?;
                    condemned.push((key, record));
                }
            }
            Ok::<_, RemoteError>((listed, fetched, condemned))
        })?;

        let mut batch = WriteBatch::new();
        let mut indexes: Vec<(String, Vec<u8>)> = Vec::with_capacity(listed.len());
        let mut unreadable = std::collections::HashSet::new();
        for (pack, bytes) in fetched {
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
                    warnings.push(skipped(&pack, reason));
                    unreadable.insert(pack);
                    continue;
                }
            };
            // Not cached: a repaired index is read again next time.
            if let Err(reason) = decode_index(&bytes, &pack) {
                warnings.push(skipped(&pack, &reason));
                unreadable.insert(pack);
                continue;
            }
            batch.put_side(INDEX_CACHE, &name, pack.as_bytes(), bytes.to_vec());
            indexes.push((pack, bytes.to_vec()));
        }
        let listed_set: std::collections::HashSet<&String> = listed.iter().collect();
        for (pack, bytes) in cached {
            if listed_set.contains(&pack) {
                indexes.push((pack, bytes));
            } else {
                batch.remove_side(INDEX_CACHE, &name, pack.as_bytes());
            }
        }
        if !batch.is_empty() {
            store.write(&batch)?;
        }

        let mut catalog = Catalog {
            objects: HashMap::new(),
            packs: HashMap::new(),
            condemned: HashMap::new(),
            condemned_keys: Vec::new(),
            unreadable,
            warnings,
        };
        for (key, record) in condemned {
            for pack in record.packs {
                let at = catalog.condemned.entry(pack).or_insert(record.at);
                *at = (*at).min(record.at);
            }
            catalog.condemned_keys.push(key);
        }
        for (pack, bytes) in indexes {
            // A cached index decoded when it was cached; one damaged here since is
            // skipped, and dropped from the cache so the remote's is read next time.
            let entries = match decode_index(&bytes, &pack) {
                Ok(entries) => entries,
                Err(reason) => {
                    catalog.warnings.push(skipped(&pack, &reason));
                    catalog.unreadable.insert(pack.clone());
                    let mut drop_it = WriteBatch::new();
                    drop_it.remove_side(INDEX_CACHE, &name, pack.as_bytes());
                    store.write(&drop_it)?;
                    continue;
                }
            };
            let pack: Arc<str> = Arc::from(pack.as_str());
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
