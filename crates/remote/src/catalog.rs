//! What a remote holds and where: every pack index it has, read once and cached in the
//! local store, and the packs remote gc has condemned.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use futures_util::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use cas::{ObjectId, WriteBatch};

use crate::config::{CONDEMNED, INDEX_CACHE, LOCATIONS};
use crate::error::RemoteError;
use crate::layout::{
    MAX_INDEX, MAX_RECORD, PackEntry, decode_entry, decode_index, encode_entry, index_key,
    now_millis, parse_index_name, time_prefix,
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
    /// Whether the store's table of locations ([`LOCATIONS`]) was made from its cached
    /// indexes; a store that cached them before it kept locations has none.
    #[serde(default)]
    located: bool,
    /// Whether the store keeps the packs the records under `gc` condemn ([`CONDEMNED`]);
    /// a store that kept no such table reads the records again.
    #[serde(default)]
    condemned: bool,
}

/// How [`Catalog`] lists `index/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// Only what is new since the store's mark, when it has one and no gc ran since.
    Incremental,
    /// Everything, dropping cached indexes the remote no longer has.
    Full,
}

/// Keys of [`LOCATIONS`] in a remote's scope: `o` + object id (32 bytes) + pack (hex)
/// → the object's entry in that pack's index ([`encode_entry`]); `n` + pack (hex) + a
/// name under `index/` of its index → nothing. A location counts only while its pack has
/// a name there: a name goes with its cached index, in one write, so the table never says
/// more than the cache; a location left behind (a sync cut off between the two is not
/// possible, but a pack dropped while another name of it was kept, and then that one) is
/// dead weight, never an answer.
const OBJECT_TAG: u8 = b'o';
const NAME_TAG: u8 = b'n';

fn object_key(id: ObjectId, pack: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(1 + 32 + pack.len());
    key.push(OBJECT_TAG);
    key.extend_from_slice(id.as_bytes());
    key.extend_from_slice(pack.as_bytes());
    key
}

fn name_key(pack: &str, index: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(1 + pack.len() + index.len());
    key.push(NAME_TAG);
    key.extend_from_slice(pack.as_bytes());
    key.extend_from_slice(index.as_bytes());
    key
}

/// Records in `batch` that the remote holds index `index` (`bytes`, decoded as
/// `entries`): the cached index and where each of its objects is, together.
pub(crate) fn record_index(
    batch: &mut WriteBatch,
    remote: &str,
    index: &str,
    bytes: Vec<u8>,
    entries: &[PackEntry],
) {
    let pack = pack_of(index);
    for entry in entries {
        batch.put_side(
            LOCATIONS,
            remote,
            &object_key(entry.id, pack),
            encode_entry(entry),
        );
    }
    batch.put_side(LOCATIONS, remote, &name_key(pack, index), Vec::new());
    batch.put_side(INDEX_CACHE, remote, index.as_bytes(), bytes);
}

/// The remote's objects, as its indexes say. Where an object is, it reads from the
/// store's table of locations ([`LOCATIONS`]) through a reader of the store taken after
/// the sync: a lookup costs per location of the object asked, not per object of the
/// remote. The reader holds a read transaction of the store's database while the catalog
/// lives: whoever keeps a catalog for long (a lazy mount) keeps it [`Catalog::detach`]ed,
/// and attaches it to the store for each use.
pub struct Catalog {
    name: String,
    reader: cas::Reader,
    /// The condemnation records the store's condemned packs come of (their keys under
    /// `gc/`).
    pub(crate) condemned_keys: Arc<Vec<String>>,
    /// Packs whose index is there but could not be read: no object of theirs is counted
    /// on, and remote gc leaves them alone.
    pub(crate) unreadable: Arc<std::collections::HashSet<String>>,
    /// What under `index/` was skipped, and why (see [`Catalog::warnings`]).
    warnings: Arc<Vec<String>>,
    /// Whether `index/` was listed whole.
    full: bool,
    /// Every pack's entries, read from the cache when first asked for (remote gc).
    packs: OnceLock<HashMap<Arc<str>, Vec<PackEntry>>>,
}

/// A [`Catalog`] without its reader of the store.
#[derive(Clone)]
pub struct Detached {
    name: String,
    condemned_keys: Arc<Vec<String>>,
    unreadable: Arc<std::collections::HashSet<String>>,
    warnings: Arc<Vec<String>>,
    full: bool,
}

impl Detached {
    /// True if `index/` was listed whole for this catalog.
    pub fn is_full(&self) -> bool {
        self.full
    }

    /// The catalog again, reading from `store` as it is now (which holds at least what
    /// the sync wrote, unless the remote was removed since).
    pub fn attach(&self, store: &cas::Store) -> Result<Catalog, RemoteError> {
        Ok(Catalog {
            name: self.name.clone(),
            reader: store.reader()?,
            condemned_keys: self.condemned_keys.clone(),
            unreadable: self.unreadable.clone(),
            warnings: self.warnings.clone(),
            full: self.full,
            packs: OnceLock::new(),
        })
    }
}

impl Catalog {
    /// Reads the remote's indexes, fetching only those `store` has not cached, and
    /// updates the cache and the table of where objects are, in one write. The listing
    /// starts [`LIST_MARGIN_MILLIS`] before the latest index name the store saw last time
    /// (names sort by the writer's clock), unless the store never listed this remote or
    /// `gc/` changed since (a gc may have deleted indexes): then it is a full one, which
    /// drops cached indexes of packs the remote no longer has. Anything under `index/`
    /// that is not a readable index (a file another program left, a damaged index) is
    /// skipped, each named in [`Catalog::warnings`]: the rest of the remote still serves.
    /// An incremental sync reads only the new indexes: what it costs does not grow with
    /// the packs the remote holds.
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

    /// The catalog without its reader of the store (see [`Catalog`]).
    pub fn detach(self) -> Detached {
        Detached {
            name: self.name,
            condemned_keys: self.condemned_keys,
            unreadable: self.unreadable,
            warnings: self.warnings,
            full: self.full,
        }
    }

    /// [`Catalog::sync`], listing as `listing` says.
    pub fn sync_with(
        remote: &Remote,
        store: &cas::Store,
        listing: Listing,
    ) -> Result<Catalog, RemoteError> {
        let name = remote.name().to_owned();
        // An unreadable mark is no mark: the listing is a full one, and the table of
        // locations is built again.
        let mark: Option<Mark> = (store.reader()?)
            .side_get(INDEX_CACHE, &name, MARK_KEY)?
            .and_then(|v| serde_json::from_slice(&v).ok());
        let rebuild = !mark.as_ref().is_some_and(|m| m.located);
        let mut warnings = Vec::new();
        let skipped = |key: &str, reason: &dyn std::fmt::Display| {
            format!("remote {name}: skipped index/{key}: {reason}")
        };
        let (listed, condemned, gc_keys, after, listed_at) = remote.block_on(async {
            // gc/ first: whether it changed decides how index/ is listed, and whether the
            // records are read again (`None`: the store keeps what they say).
            let mut gc_keys: Vec<String> = remote
                .list("gc")
                .await?
                .into_iter()
                .map(|(key, _)| key)
                .collect();
            gc_keys.sort();
            // A full listing (remote gc, a fetch that missed) reads them all again.
            let kept = listing == Listing::Incremental
                && mark
                    .as_ref()
                    .is_some_and(|m| m.condemned && m.gc == gc_keys);
            let mut condemned = None;
            if !kept {
                let mut records = Vec::new();
                let mut read = Vec::new();
                for key in gc_keys {
                    if let Some(bytes) = remote.get(&format!("gc/{key}"), MAX_RECORD).await? {
                        let record: Condemned = serde_json::from_slice(&bytes)
                            .map_err(|e| RemoteError::undecodable(&name, format!("gc/{key}"), e))?;
                        records.push(record);
                        read.push(key);
                    }
                }
                // Gone between the listing and the read: not counted as seen.
                gc_keys = read;
                condemned = Some(records);
            }
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
            Ok::<_, RemoteError>((listed, condemned, gc_keys, after, listed_at))
        })?;
        let full = after.is_none();
        // Taken after the listing, and dropped before the reads: held across no request.
        let before = store.reader()?;

        // What the store caches: all of it when it is to be compared with a full listing
        // or the table built again from it; otherwise only whether each name listed is.
        let cached: HashMap<String, Vec<u8>> = if full || rebuild {
            let mut all = HashMap::new();
            before.side_scope_each(INDEX_CACHE, &name, |k, v| {
                if k != MARK_KEY {
                    all.insert(String::from_utf8_lossy(k).into_owned(), v.to_vec());
                }
                true
            })?;
            all
        } else {
            HashMap::new()
        };
        let mut wanted: Vec<String> = Vec::new();
        for index in &listed {
            let known = if full || rebuild {
                cached.contains_key(index)
            } else {
                before
                    .side_get(INDEX_CACHE, &name, index.as_bytes())?
                    .is_some()
            };
            if !known {
                wanted.push(index.clone());
            }
        }
        // A store that cached indexes before it kept locations, or lost its mark: the
        // table is made again from the cache (below), and names of indexes it no longer
        // caches go; seen by the reader `cached` was read with, so that a push's name
        // written since is not taken for one.
        let mut stale_names: Vec<Vec<u8>> = Vec::new();
        if rebuild {
            before.side_prefix_each(LOCATIONS, &name, &[NAME_TAG], |k, _| {
                let index = String::from_utf8_lossy(k.get(1 + PACK_HEX..).unwrap_or_default());
                if !cached.contains_key(&*index) {
                    stale_names.push(k.to_vec());
                }
                true
            })?;
        }
        drop(before);
        // An index larger than any push writes is read no further, and skipped.
        let fetched: Vec<(String, Result<Option<bytes::Bytes>, RemoteError>)> = remote.block_on(
            futures_util::stream::iter(wanted.into_iter().map(|index| async move {
                match remote.get(&index_key(&index), MAX_INDEX).await {
                    Ok(bytes) => Ok((index, Ok(bytes))),
                    Err(e @ RemoteError::Corrupt { .. }) => Ok((index, Err(e))),
                    Err(e) => Err(e),
                }
            }))
            .buffer_unordered(CONCURRENCY)
            .try_collect(),
        )?;

        let mut batch = WriteBatch::new();
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
            match decode_index(&bytes, pack_of(&index)) {
                Ok(entries) => record_index(&mut batch, &name, &index, bytes.to_vec(), &entries),
                Err(reason) => {
                    warnings.push(skipped(&index, &reason));
                    unreadable.insert(pack_of(&index).to_owned());
                }
            }
        }
        let listed_set: std::collections::HashSet<&str> =
            listed.iter().map(String::as_str).collect();
        // Packs that keep a name under index/ (a full listing's; two writers may have made
        // one pack): their locations stay when another of their names goes.
        let kept_packs: std::collections::HashSet<&str> =
            listed.iter().map(|i| pack_of(i)).collect();
        for key in &stale_names {
            batch.remove_side(LOCATIONS, &name, key);
        }
        for (index, bytes) in &cached {
            let pack = pack_of(index);
            if full && !listed_set.contains(index.as_str()) {
                batch.remove_side(INDEX_CACHE, &name, index.as_bytes());
                batch.remove_side(LOCATIONS, &name, &name_key(pack, index));
                if !kept_packs.contains(pack) {
                    // Undecodable, its locations stay behind, dead without a name.
                    for entry in decode_index(bytes, pack).unwrap_or_default() {
                        batch.remove_side(LOCATIONS, &name, &object_key(entry.id, pack));
                    }
                }
            } else if rebuild {
                // A cached index decoded when it was cached; one damaged here since is
                // skipped, and dropped from the cache so the remote's is read next time.
                match decode_index(bytes, pack) {
                    Ok(entries) => record_index(&mut batch, &name, index, bytes.clone(), &entries),
                    Err(reason) => {
                        warnings.push(skipped(index, &reason));
                        unreadable.insert(pack.to_owned());
                        batch.remove_side(INDEX_CACHE, &name, index.as_bytes());
                        batch.remove_side(LOCATIONS, &name, &name_key(pack, index));
                    }
                }
            }
        }
        // The next listing starts where this one did, by this machine's clock (not the
        // names': a writer whose clock runs ahead must not hide the others' names, and a
        // store that only pushes must not list from its first look forever).
        if let Some(records) = condemned {
            let mut condemned_at: HashMap<String, i64> = HashMap::new();
            for record in records {
                for pack in record.packs {
                    let at = condemned_at.entry(pack).or_insert(record.at);
                    *at = (*at).min(record.at);
                }
            }
            batch.clear_side_scope(CONDEMNED, &name);
            for (pack, at) in condemned_at {
                batch.put_side(CONDEMNED, &name, pack.as_bytes(), at.to_le_bytes().to_vec());
            }
        }
        let new_mark = Mark {
            seen_millis: listed_at,
            gc: gc_keys.clone(),
            located: true,
            condemned: true,
        };
        if mark.as_ref() != Some(&new_mark) {
            let json = serde_json::to_vec(&new_mark).unwrap_or_default();
            batch.put_side(INDEX_CACHE, &name, MARK_KEY, json);
        }
        // One write: the cache, the locations and the mark agree after it, or are as
        // they were.
        if !batch.is_empty() {
            store.write(&batch)?;
        }

        let catalog = Catalog {
            name,
            reader: store.reader()?,
            condemned_keys: Arc::new(gc_keys),
            unreadable: Arc::new(unreadable),
            warnings: Arc::new(warnings),
            full,
            packs: OnceLock::new(),
        };
        for warning in catalog.warnings.iter() {
            tracing::warn!("{warning}");
        }
        Ok(catalog)
    }

    /// The names under `index/` of the index of `pack`.
    pub(crate) fn index_names(&self, pack: &str) -> Result<Vec<String>, RemoteError> {
        let mut names = Vec::new();
        self.reader
            .side_prefix_each(LOCATIONS, &self.name, &name_key(pack, ""), |k, _| {
                names.push(String::from_utf8_lossy(&k[1 + pack.len()..]).into_owned());
                true
            })?;
        Ok(names)
    }

    /// True if `pack` has an index the store caches.
    fn indexed(&self, pack: &str) -> Result<bool, RemoteError> {
        let mut any = false;
        self.reader
            .side_prefix_each(LOCATIONS, &self.name, &name_key(pack, ""), |_, _| {
                any = true;
                false
            })?;
        Ok(any)
    }

    /// What was skipped under `index/` (a file that is no readable index), each naming
    /// the file and the remote; also logged as warnings.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Where object `id` is, if the remote holds it: a copy outside condemned packs is
    /// the one to use.
    pub fn locate(&self, id: ObjectId) -> Result<Option<Located>, RemoteError> {
        let mut found: Vec<(String, Vec<u8>)> = Vec::new();
        let mut prefix = Vec::with_capacity(33);
        prefix.push(OBJECT_TAG);
        prefix.extend_from_slice(id.as_bytes());
        self.reader
            .side_prefix_each(LOCATIONS, &self.name, &prefix, |k, v| {
                LOCATIONS_READ.with(|n| n.set(n.get() + 1));
                found.push((String::from_utf8_lossy(&k[33..]).into_owned(), v.to_vec()));
                true
            })?;
        let mut usable: Option<Located> = None;
        for (pack, record) in found {
            if !self.indexed(&pack)? {
                continue;
            }
            let entry = decode_entry(id, &record).map_err(|e| {
                RemoteError::undecodable(&self.name, format!("the location of {id} in {pack}"), e)
            })?;
            let condemned = self.condemned_at(&pack)?.is_some();
            let located = Located {
                pack: Arc::from(pack),
                entry,
            };
            if !condemned {
                return Ok(Some(located));
            }
            usable.get_or_insert(located);
        }
        Ok(usable)
    }

    /// True if the remote holds `id`.
    pub fn has(&self, id: ObjectId) -> Result<bool, RemoteError> {
        Ok(self.locate(id)?.is_some())
    }

    /// True if the remote holds `id` in a pack no gc has condemned: a push may count on it.
    pub(crate) fn has_for_push(&self, id: ObjectId) -> Result<bool, RemoteError> {
        Ok(match self.locate(id)? {
            Some(l) => self.condemned_at(&l.pack)?.is_none(),
            None => false,
        })
    }

    /// When a remote gc first condemned `pack`, if one did.
    pub(crate) fn condemned_at(&self, pack: &str) -> Result<Option<i64>, RemoteError> {
        Ok(self
            .reader
            .side_get(CONDEMNED, &self.name, pack.as_bytes())?
            .map(|v| decode_condemned(&v)))
    }

    /// Every condemned pack and when it was first condemned (remote gc).
    pub(crate) fn condemned(&self) -> Result<HashMap<String, i64>, RemoteError> {
        let mut all = HashMap::new();
        self.reader.side_scope_each(CONDEMNED, &self.name, |k, v| {
            all.insert(String::from_utf8_lossy(k).into_owned(), decode_condemned(v));
            true
        })?;
        Ok(all)
    }

    /// The entries of `pack`, from its cached index; `None` if the store caches none.
    pub fn pack_entries(&self, pack: &str) -> Result<Option<Vec<PackEntry>>, RemoteError> {
        for index in self.index_names(pack)? {
            let bytes = (self.reader).side_get(INDEX_CACHE, &self.name, index.as_bytes())?;
            if let Some(bytes) = bytes
                && let Ok(entries) = decode_index(&bytes, pack)
            {
                return Ok(Some(entries));
            }
        }
        Ok(None)
    }

    /// Every indexed pack and its entries: read from every cached index when first asked
    /// for (remote gc, which looks at every pack anyway).
    pub(crate) fn packs(
        &self,
    ) -> Result<impl Iterator<Item = (&Arc<str>, &Vec<PackEntry>)>, RemoteError> {
        if let Some(packs) = self.packs.get() {
            return Ok(packs.iter());
        }
        let mut packs: HashMap<Arc<str>, Vec<PackEntry>> = HashMap::new();
        let mut failed = None;
        self.reader
            .side_scope_each(INDEX_CACHE, &self.name, |k, v| {
                if k == MARK_KEY {
                    return true;
                }
                let index = String::from_utf8_lossy(k);
                let pack = pack_of(&index);
                if packs.contains_key(pack) {
                    return true;
                }
                match self.indexed(pack) {
                    Ok(true) => {}
                    Ok(false) => return true,
                    Err(e) => {
                        failed = Some(e);
                        return false;
                    }
                }
                // Decoded when cached; one damaged since counts for nothing here.
                if let Ok(entries) = decode_index(v, pack) {
                    packs.insert(Arc::from(pack), entries);
                }
                true
            })?;
        if let Some(e) = failed {
            return Err(e);
        }
        Ok(self.packs.get_or_init(|| packs).iter())
    }

    /// True if the remote holds nothing the store knows of.
    pub fn is_empty(&self) -> Result<bool, RemoteError> {
        let mut any = false;
        self.reader
            .side_prefix_each(LOCATIONS, &self.name, &[NAME_TAG], |_, _| {
                any = true;
                false
            })?;
        Ok(!any)
    }
}

thread_local! {
    static LOCATIONS_READ: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many locations [`Catalog::locate`] read on this thread: what tests count to show a
/// push asks about its own objects only.
pub fn locations_read_here() -> u64 {
    LOCATIONS_READ.with(std::cell::Cell::get)
}

/// A time in [`CONDEMNED`]; one damaged in the store reads as the epoch, so long
/// condemned: the pack is read only if no other copy is, and gc deletes it only if
/// nothing reaches it.
fn decode_condemned(v: &[u8]) -> i64 {
    <[u8; 8]>::try_from(v).map_or(0, i64::from_le_bytes)
}

/// Characters of a pack's hex id.
const PACK_HEX: usize = 64;

pub(crate) fn is_hex_id(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The pack a listed (so parsed) name under `index/` indexes.
fn pack_of(index: &str) -> &str {
    parse_index_name(index).map_or(index, |(pack, _)| pack)
}

/// A catalog is shared by the threads of a lazy mount.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<Catalog>();
    shared::<Detached>();
};
