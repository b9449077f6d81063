//! Lazy reads: the blobs of a snapshot only a remote holds, fetched when a mount first
//! reads them. A small blob comes with its whole payload (a group frame brings its
//! neighbours along), a large one a chunk at a time from its list of chunks (read once),
//! with the next few chunks read ahead on sequential reads; each is checked as a fetch
//! checks it and kept in the store, which drops its promise. Concurrent reads of one
//! payload make one request. One [`LazyBlobs`] serves every mount of an engine reading
//! from one remote.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, RwLock};

use cas::{
    BlobChunks, BlobId, Chunk, ObjectId, ObjectKind, Silent, SnapshotId, TreeId, WriteBatch,
};

use crate::catalog::{Catalog, Detached, Located};
use crate::error::RemoteError;
use crate::fetch::{
    FetchOutcome, Need, fetch_blob_set, fetch_with, read_chunk_lists, read_objects,
};
use crate::layout::Encoding;
use crate::transport::Remote;

/// The store, shared by every call and mount of an engine holding it open.
pub type SharedStore = Arc<RwLock<cas::Store>>;

/// The tracing target of a prefetch's progress (at `info`: a server's log shows it
/// unless `RUST_LOG` says otherwise).
pub const PREFETCH: &str = "cairn::prefetch";

/// Chunks read ahead of a sequential read of a large blob.
const READ_AHEAD: usize = 4;
/// Payload bytes a prefetch fetches and stores at a time (the store is taken per group).
const PREFETCH_GROUP_BYTES: u64 = 8 << 20;

/// A payload on the remote: its pack and offset.
type PayloadKey = (Arc<str>, u64);

/// Packs whose group frames' members a view keeps, the last read.
const FRAME_PACKS: usize = 16;

/// Group frames' members of one pack, by the frame's offset.
type FrameMembers = HashMap<u64, Vec<ObjectId>>;

/// The remote's catalog (detached: attached to the store for each use, so the view holds
/// no read of it), and the members of the group frames of the packs read last.
struct View {
    catalog: Detached,
    frames: Mutex<VecDeque<(Arc<str>, Arc<FrameMembers>)>>,
}

impl View {
    fn new(catalog: Catalog) -> View {
        View {
            catalog: catalog.detach(),
            frames: Mutex::new(VecDeque::new()),
        }
    }

    /// The catalog, reading from `store`.
    fn catalog(&self, store: &cas::Store) -> Result<Catalog, RemoteError> {
        self.catalog.attach(store)
    }

    /// The members of the group frame at `key`: from its pack's cached index, decoded
    /// when first asked for (not every pack's, which would cost per pack of the remote).
    fn members(&self, catalog: &Catalog, key: &PayloadKey) -> Result<Vec<ObjectId>, RemoteError> {
        let (pack, offset) = key;
        let known = (self.frames.lock().unwrap_or_else(PoisonError::into_inner))
            .iter()
            .find(|(p, _)| p == pack)
            .map(|(_, m)| m.clone());
        let members = match known {
            Some(members) => members,
            None => {
                let mut members = FrameMembers::new();
                let entries = catalog.pack_entries(pack)?.unwrap_or_default();
                for e in entries.iter().filter(|e| e.encoding == Encoding::Frame) {
                    members.entry(e.offset).or_default().push(e.id);
                }
                let members = Arc::new(members);
                let mut frames = self.frames.lock().unwrap_or_else(PoisonError::into_inner);
                if frames.len() >= FRAME_PACKS {
                    frames.pop_front();
                }
                frames.push_back((pack.clone(), members.clone()));
                members
            }
        };
        Ok(members.get(offset).cloned().unwrap_or_default())
    }
}

/// A payload being read; those wanting it wait for its end.
#[derive(Default)]
struct Flight {
    done: Mutex<Option<Result<(), Arc<RemoteError>>>>,
    ended: Condvar,
}

/// What a prefetch has done, read by whoever shows it.
#[derive(Debug, Default)]
pub struct PrefetchProgress {
    /// Blobs to fetch, and fetched.
    pub objects_total: AtomicU64,
    /// See [`PrefetchProgress::objects_total`].
    pub objects_done: AtomicU64,
    /// Their bytes (decoded), and those fetched.
    pub bytes_total: AtomicU64,
    /// See [`PrefetchProgress::bytes_total`].
    pub bytes_done: AtomicU64,
    /// Set when it ended (done, stopped or failed).
    pub ended: AtomicBool,
}

/// Blobs of one remote, fetched when first read (see the module's text).
pub struct LazyBlobs {
    remote: Remote,
    store: SharedStore,
    view: RwLock<Arc<View>>,
    /// Payloads being read, by pack and offset.
    flights: Mutex<HashMap<PayloadKey, Arc<Flight>>>,
    /// Large blobs' cuts, as their chunk lists say.
    cuts: Mutex<HashMap<BlobId, Arc<BlobChunks>>>,
    /// The chunk each large blob was last read at, to tell a sequential read.
    last_read: Mutex<HashMap<BlobId, usize>>,
    /// Large blobs whose record is being written.
    recording: Mutex<HashSet<BlobId>>,
    /// Its catalog was just read (by [`LazyBlobs::new`]) and not used since.
    fresh: AtomicBool,
}

impl LazyBlobs {
    /// Lazy reads from `remote` into `store` (held by the caller now as `held`), its
    /// catalog read.
    pub fn new(
        remote: Remote,
        store: SharedStore,
        held: &cas::Store,
    ) -> Result<Arc<LazyBlobs>, RemoteError> {
        let catalog = Catalog::sync(&remote, held)?;
        Ok(Arc::new(LazyBlobs {
            remote,
            store,
            view: RwLock::new(Arc::new(View::new(catalog))),
            flights: Mutex::new(HashMap::new()),
            cuts: Mutex::new(HashMap::new()),
            last_read: Mutex::new(HashMap::new()),
            recording: Mutex::new(HashSet::new()),
            fresh: AtomicBool::new(true),
        }))
    }

    /// The remote's name.
    pub fn remote_name(&self) -> &str {
        self.remote.name()
    }

    fn view(&self) -> Arc<View> {
        self.view
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Reads the remote's catalog again (what was pushed since; not if it was just read),
    /// then brings `snapshot` with its trees as [`Need::Trees`] says, unless the store has
    /// it: its blobs are promised by the remote, read when first used. As a fetch does, a
    /// catalog listed from where it last looked that misses something is listed whole once.
    pub fn fetch_trees(
        &self,
        held: &cas::Store,
        snapshot: SnapshotId,
        progress: &dyn cas::Progress,
    ) -> Result<FetchOutcome, RemoteError> {
        let mut view = if self.fresh.swap(false, Ordering::AcqRel) {
            self.view()
        } else {
            self.keep(Catalog::sync(&self.remote, held)?)
        };
        let there = |view: &View| -> Result<bool, RemoteError> {
            Ok((view.catalog(held)?.locate(snapshot.into())?)
                .is_some_and(|l| l.entry.kind == ObjectKind::Snapshot))
        };
        if !there(&view)? && !held.reader()?.has_snapshot(snapshot)? {
            if !view.catalog.is_full() {
                view = self.keep(Catalog::sync_full(&self.remote, held)?);
            }
            if !there(&view)? {
                return Err(RemoteError::NotOnRemote {
                    remote: self.remote.name().to_owned(),
                    id: snapshot,
                });
            }
        }
        let mut out = FetchOutcome::default();
        let mut fetch = |view: &View| {
            fetch_with(
                &self.remote,
                held,
                &view.catalog(held)?,
                &[snapshot],
                Need::Trees,
                progress,
                &mut out,
            )
        };
        match fetch(&view) {
            Err(e) if !view.catalog.is_full() && e.may_be_stale_catalog() => {
                let full = self.keep(Catalog::sync_full(&self.remote, held)?);
                fetch(&full)?;
            }
            done => done?,
        }
        Ok(out)
    }

    /// Keeps `catalog` for every later read; it, as a view.
    fn keep(&self, catalog: Catalog) -> Arc<View> {
        let view = Arc::new(View::new(catalog));
        *self.view.write().unwrap_or_else(PoisonError::into_inner) = view.clone();
        view
    }

    /// How blob `id`, which the store lacks, is cut: itself alone up to a chunk, else as
    /// its list of chunks says (read once, then kept). A large blob an older layout holds
    /// whole is fetched whole here.
    pub fn cut(&self, id: BlobId) -> Result<BlobChunks, Arc<RemoteError>> {
        if let Some(cut) = self.cuts().get(&id) {
            return Ok((**cut).clone());
        }
        let mut view = self.view();
        let mut catalog = view.catalog(&self.store()).map_err(Arc::new)?;
        if catalog.locate(id.into()).map_err(Arc::new)?.is_none() {
            view = self.resync().map_err(Arc::new)?;
            catalog = view.catalog(&self.store()).map_err(Arc::new)?;
        }
        let located = self.locate(&catalog, id).map_err(Arc::new)?;
        let e = located.entry;
        match e.encoding {
            Encoding::Chunks => {
                let got = self.flight(&located, || {
                    let mut out = FetchOutcome::default();
                    let lists =
                        read_chunk_lists(&self.remote, &catalog, vec![located.clone()], &mut out)?;
                    for (blob, size, chunks) in lists {
                        let cut = BlobChunks::of_list(blob, size, chunks)?;
                        self.cuts().insert(blob, Arc::new(cut));
                    }
                    Ok(())
                });
                got?;
                match self.cuts().get(&id) {
                    Some(cut) => Ok((**cut).clone()),
                    None => Err(Arc::new(RemoteError::object(
                        self.remote.name(),
                        id.into(),
                        "its chunk list did not arrive",
                    ))),
                }
            }
            _ if e.size > cas::CHUNK_BYTES as u64 => {
                let whole = || -> Result<BlobChunks, RemoteError> {
                    self.fetch_whole(id)?;
                    Ok(self.store().reader()?.blob_chunks(id)?)
                };
                whole().map_err(Arc::new)
            }
            _ => BlobChunks::of_list(id, e.size, vec![id]).map_err(|e| Arc::new(e.into())),
        }
    }

    /// Brings `chunk` into the store (with what shares its payload), unless it is there.
    /// A read of its blob is under way: on a sequential read of a large blob (this chunk
    /// follows the one read last), the next chunks the store lacks are read ahead in the
    /// background. The large blob's record is written once all its chunks are stored.
    pub fn fetch(self: &Arc<Self>, chunk: Chunk) -> Result<(), Arc<RemoteError>> {
        if chunk.id != chunk.blob {
            let previous = self.last_read().insert(chunk.blob, chunk.index);
            if previous.is_some_and(|p| p + 1 == chunk.index) {
                self.read_ahead(chunk);
            }
        }
        self.ensure(chunk.id)?;
        if chunk.id != chunk.blob {
            self.record_if_whole(chunk.blob).map_err(Arc::new)?;
        }
        Ok(())
    }

    /// Brings blob `id` into the store whole, as a fetch does.
    pub fn fetch_whole(&self, id: BlobId) -> Result<(), RemoteError> {
        let view = self.view();
        let store = self.store();
        if store.reader()?.has_blob(id)? {
            return Ok(());
        }
        let mut out = FetchOutcome::default();
        fetch_blob_set(
            &self.remote,
            &store,
            &view.catalog(&store)?,
            vec![id],
            &Silent,
            &mut out,
        )
    }

    /// Fetches every blob tree `root` reaches that the store lacks, a group at a time
    /// (the store taken per group), until done or `stop` is set; `progress` says how far
    /// it is.
    pub fn prefetch(
        &self,
        root: TreeId,
        progress: &PrefetchProgress,
        stop: &AtomicBool,
    ) -> Result<(), RemoteError> {
        let result = self.prefetch_groups(root, progress, stop);
        progress.ended.store(true, Ordering::Release);
        result
    }

    fn prefetch_groups(
        &self,
        root: TreeId,
        progress: &PrefetchProgress,
        stop: &AtomicBool,
    ) -> Result<(), RemoteError> {
        let view = self.view();
        let (missing, sizes) = {
            let store = self.store();
            let missing = missing_blobs(&store.reader()?, root)?;
            let catalog = view.catalog(&store)?;
            let mut sizes: HashMap<BlobId, u64> = HashMap::with_capacity(missing.len());
            for b in &missing {
                sizes.insert(*b, catalog.locate((*b).into())?.map_or(0, |l| l.entry.size));
            }
            (missing, sizes)
        };
        let size = |b: &BlobId| sizes.get(b).copied().unwrap_or(0);
        progress
            .objects_total
            .store(missing.len() as u64, Ordering::Release);
        progress
            .bytes_total
            .store(missing.iter().map(size).sum(), Ordering::Release);
        let mut group: Vec<BlobId> = Vec::new();
        let mut left = missing.into_iter().peekable();
        while left.peek().is_some() {
            if stop.load(Ordering::Acquire) {
                return Ok(());
            }
            group.clear();
            let mut group_bytes = 0;
            while let Some(b) = left.next_if(|_| group_bytes < PREFETCH_GROUP_BYTES) {
                group_bytes += size(&b).max(1);
                group.push(b);
            }
            let store = self.store();
            let reader = store.reader()?;
            let wanted: Vec<BlobId> = (group.iter().copied())
                .filter(|b| !reader.has_blob(*b).unwrap_or(false))
                .collect();
            drop(reader);
            let mut out = FetchOutcome::default();
            fetch_blob_set(
                &self.remote,
                &store,
                &view.catalog(&store)?,
                wanted,
                &Silent,
                &mut out,
            )?;
            drop(store);
            progress
                .objects_done
                .fetch_add(group.len() as u64, Ordering::AcqRel);
            progress
                .bytes_done
                .fetch_add(group.iter().map(size).sum(), Ordering::AcqRel);
            tracing::info!(
                target: PREFETCH,
                "prefetch of tree {root} from remote {}: {} of {} blobs, {} of {} bytes",
                self.remote.name(),
                progress.objects_done.load(Ordering::Acquire),
                progress.objects_total.load(Ordering::Acquire),
                progress.bytes_done.load(Ordering::Acquire),
                progress.bytes_total.load(Ordering::Acquire),
            );
        }
        Ok(())
    }

    fn store(&self) -> std::sync::RwLockReadGuard<'_, cas::Store> {
        self.store.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn cuts(&self) -> std::sync::MutexGuard<'_, HashMap<BlobId, Arc<BlobChunks>>> {
        self.cuts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn last_read(&self) -> std::sync::MutexGuard<'_, HashMap<BlobId, usize>> {
        self.last_read
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn locate(&self, catalog: &Catalog, id: BlobId) -> Result<Located, RemoteError> {
        match catalog.locate(id.into())? {
            Some(l) if l.entry.kind == ObjectKind::Blob => Ok(l),
            Some(l) => Err(RemoteError::object(
                self.remote.name(),
                id.into(),
                format!("its index says {:?}, expected a blob", l.entry.kind),
            )),
            None => Err(RemoteError::object(
                self.remote.name(),
                id.into(),
                "is not on the remote",
            )),
        }
    }

    /// Fetches the next chunks of `chunk`'s blob that the store lacks, in the background.
    fn read_ahead(self: &Arc<Self>, chunk: Chunk) {
        let Some(cut) = self.cuts().get(&chunk.blob).cloned() else {
            return;
        };
        let next = (chunk.index + 1..=chunk.index + READ_AHEAD).filter_map(|i| cut.chunk(i));
        let lacking = |c: &Chunk| {
            (self.store().reader())
                .and_then(|r| r.has_blob(c.id))
                .is_ok_and(|here| !here)
        };
        if !next.clone().any(|c| lacking(&c)) {
            return;
        }
        let this = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("lazy-read-ahead".to_owned())
            .spawn(move || {
                for next in
                    (chunk.index + 1..=chunk.index + READ_AHEAD).filter_map(|i| cut.chunk(i))
                {
                    if let Err(e) = this.ensure(next.id) {
                        tracing::debug!("read-ahead of blob {}: {e}", chunk.blob);
                        return;
                    }
                }
                if let Err(e) = this.record_if_whole(chunk.blob) {
                    tracing::warn!("blob {}: {e}", chunk.blob);
                }
            });
        if let Err(e) = spawned {
            tracing::debug!("read-ahead of blob {}: {e}", chunk.blob);
        }
    }

    /// Brings blob `id` (at most a chunk) into the store with the members of its group
    /// frame the store lacks, unless it is there: one request per payload, however many
    /// want it at once.
    fn ensure(&self, id: BlobId) -> Result<(), Arc<RemoteError>> {
        let view = self.view();
        let catalog = view.catalog(&self.store()).map_err(Arc::new)?;
        if catalog.locate(id.into()).map_err(Arc::new)?.is_some() {
            drop(catalog);
            match self.ensure_in(&view, id) {
                Err(e) if pack_gone(&e) => {}
                other => return other,
            }
        } else if self.present(id).map_err(Arc::new)? {
            return Ok(());
        }
        // Not in the catalog as last read (read while the remote was away), or its pack
        // gone (a remote gc repacked it): read the catalog again and look once more.
        let view = self.resync().map_err(Arc::new)?;
        self.ensure_in(&view, id)
    }

    fn present(&self, id: BlobId) -> Result<bool, RemoteError> {
        Ok(self.store().reader()?.has_blob(id)?)
    }

    /// Reads the remote's catalog again, for every later read.
    fn resync(&self) -> Result<Arc<View>, RemoteError> {
        let view = {
            let store = self.store();
            // Listed whole: what is missing may be older than where the store last looked.
            Arc::new(View::new(Catalog::sync_full(&self.remote, &store)?))
        };
        *self.view.write().unwrap_or_else(PoisonError::into_inner) = view.clone();
        Ok(view)
    }

    fn ensure_in(&self, view: &View, id: BlobId) -> Result<(), Arc<RemoteError>> {
        let present =
            |id| -> Result<bool, RemoteError> { Ok(self.store().reader()?.has_blob(id)?) };
        if present(id).map_err(Arc::new)? {
            return Ok(());
        }
        let catalog = view.catalog(&self.store()).map_err(Arc::new)?;
        let located = self.locate(&catalog, id).map_err(Arc::new)?;
        self.flight(&located, || {
            // Another flight may have brought it meanwhile.
            if present(id)? {
                return Ok(());
            }
            let key = (located.pack.clone(), located.entry.offset);
            let mut wanted: Vec<ObjectId> = vec![id.into()];
            let members = if located.entry.encoding == Encoding::Frame {
                view.members(&catalog, &key)?
            } else {
                Vec::new()
            };
            if !members.is_empty() {
                let reader = self.store().reader()?;
                for m in members {
                    let same = (catalog.locate(m)?).is_some_and(|l| {
                        l.pack == located.pack && l.entry.offset == located.entry.offset
                    });
                    if m != ObjectId::from(id) && same && !reader.has_blob(m.as_blob())? {
                        wanted.push(m);
                    }
                }
            }
            let mut out = FetchOutcome::default();
            let got = read_objects(&self.remote, &catalog, &wanted, ObjectKind::Blob, &mut out)?;
            let mut batch = WriteBatch::new();
            for object in got.objects {
                batch.add_verified(object);
            }
            for frame in got.frames {
                batch.add_frame(frame);
            }
            self.store().write(&batch)?;
            Ok(())
        })
    }

    /// Runs `read` for the payload of `located` unless another thread runs it now, then
    /// waits for that one's end and shares its result; the next call after it tries again.
    fn flight(
        &self,
        located: &Located,
        read: impl FnOnce() -> Result<(), RemoteError>,
    ) -> Result<(), Arc<RemoteError>> {
        let key = (located.pack.clone(), located.entry.offset);
        let (flight, lead) = {
            let mut flights = self.flights.lock().unwrap_or_else(PoisonError::into_inner);
            match flights.get(&key) {
                Some(f) => (f.clone(), false),
                None => {
                    let f = Arc::new(Flight::default());
                    flights.insert(key.clone(), f.clone());
                    (f, true)
                }
            }
        };
        if lead {
            let result = read().map_err(Arc::new);
            *flight.done.lock().unwrap_or_else(PoisonError::into_inner) = Some(result.clone());
            flight.ended.notify_all();
            self.flights
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&key);
            return result;
        }
        let mut done = flight.done.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(result) = done.as_ref() {
                return result.clone();
            }
            done = flight
                .ended
                .wait(done)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Writes large blob `blob`'s record once all its chunks are stored (each checked,
    /// and the whole against its id), which drops its promise.
    fn record_if_whole(&self, blob: BlobId) -> Result<(), RemoteError> {
        let Some(cut) = self.cuts().get(&blob).cloned() else {
            return Ok(());
        };
        let store = self.store();
        let reader = store.reader()?;
        if reader.has_blob(blob)? {
            return Ok(());
        }
        for c in cut.ids() {
            if !reader.has_blob(*c)? {
                return Ok(());
            }
        }
        if !self
            .recording
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(blob)
        {
            return Ok(());
        }
        let result = (|| {
            let prepared = reader
                .chunked_blob(blob, cut.size(), cut.ids().to_vec())
                .map_err(|e| {
                    let reason = format!("as its chunks: {e}");
                    RemoteError::damaged(self.remote.name(), format!("object {blob}"), reason, e)
                })?;
            let mut batch = WriteBatch::new();
            batch.add_blob(prepared);
            store.write(&batch)?;
            Ok(())
        })();
        self.recording
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&blob);
        result
    }
}

/// The blobs tree `root` reaches that the store lacks, each once.
pub fn missing_blobs(reader: &cas::Reader, root: TreeId) -> Result<Vec<BlobId>, RemoteError> {
    let mut seen_trees = HashSet::new();
    let mut seen_blobs = HashSet::new();
    let mut missing = Vec::new();
    let mut stack = vec![root];
    while let Some(t) = stack.pop() {
        if !seen_trees.insert(t) {
            continue;
        }
        for entry in reader.tree(t)?.entries() {
            match (entry.blob(), entry.tree()) {
                (Some(b), _) if seen_blobs.insert(b) && !reader.has_blob(b)? => missing.push(b),
                (_, Some(t)) => stack.push(t),
                _ => {}
            }
        }
    }
    Ok(missing)
}

/// Whether `e` says the pack read from is not on the remote.
fn pack_gone(e: &RemoteError) -> bool {
    matches!(
        e,
        RemoteError::Read { source, .. } if matches!(**source, object_store::Error::NotFound { .. })
    )
}
