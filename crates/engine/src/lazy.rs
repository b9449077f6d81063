//! Lazy mounts' sources: what a mount of a snapshot only a remote held reads its files
//! from when first used (one source per remote, shared by every mount of the engine), and
//! their prefetches.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};

use camino::{Utf8Path, Utf8PathBuf};
use remote::{Remote, RemoteError};

/// The sources lazy mounts read from, one per remote (shared by every mount of this
/// engine, so one object is fetched once), and the prefetches running, by mount root.
#[derive(Default)]
pub(crate) struct LazyRemotes {
    sources: std::sync::Mutex<std::collections::HashMap<String, Arc<remote::LazyBlobs>>>,
    prefetches: std::sync::Mutex<std::collections::HashMap<Utf8PathBuf, Prefetch>>,
}

/// A mount's prefetch: how far it is, and the flag that stops it.
#[derive(Clone)]
pub(crate) struct Prefetch {
    pub(crate) progress: Arc<remote::PrefetchProgress>,
    pub(crate) stop: Arc<AtomicBool>,
}

impl LazyRemotes {
    /// The source of remote `name`, made on first use (its catalog read through `held`,
    /// the store as the caller holds it now).
    pub(crate) fn source(
        &self,
        shared: &remote::SharedStore,
        held: &cas::Store,
        name: &str,
    ) -> Result<Arc<remote::LazyBlobs>, RemoteError> {
        if let Some(s) = self.lock_sources().get(name) {
            return Ok(s.clone());
        }
        let config = remote::remote_config(&held.reader()?, name)?;
        let made = remote::LazyBlobs::new(Remote::connect(&config)?, shared.clone(), held)?;
        // Two first uses at once: the first one kept is everyone's.
        Ok(self
            .lock_sources()
            .entry(name.to_owned())
            .or_insert(made)
            .clone())
    }

    fn lock_sources(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Arc<remote::LazyBlobs>>> {
        self.sources.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_prefetches(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<Utf8PathBuf, Prefetch>> {
        self.prefetches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The prefetch of the mount at `root`, if one ran since it was mounted.
    pub(crate) fn prefetch(&self, root: &Utf8Path) -> Option<Prefetch> {
        self.lock_prefetches().get(root).cloned()
    }

    /// Starts fetching every blob `tree` reaches that the store lacks from `source`, for
    /// the mount at `root`, in the background; it stops at its end or when
    /// [`LazyRemotes::stop_prefetch`] of `root` is called.
    pub(crate) fn start_prefetch(
        &self,
        root: &Utf8Path,
        source: Arc<remote::LazyBlobs>,
        tree: cas::TreeId,
    ) {
        let prefetch = Prefetch {
            progress: Arc::default(),
            stop: Arc::default(),
        };
        if let Some(old) = self
            .lock_prefetches()
            .insert(root.to_owned(), prefetch.clone())
        {
            old.stop.store(true, Ordering::Release);
        }
        let name = root.to_owned();
        let spawned = std::thread::Builder::new()
            .name("prefetch".to_owned())
            .spawn(move || {
                let root = name;
                tracing::info!(
                    target: remote::PREFETCH,
                    "prefetch of {root} from remote {}: started",
                    source.remote_name()
                );
                match source.prefetch(tree, &prefetch.progress, &prefetch.stop) {
                    Ok(()) if prefetch.stop.load(Ordering::Acquire) => {
                        tracing::info!(target: remote::PREFETCH, "prefetch of {root}: stopped");
                    }
                    Ok(()) => tracing::info!(target: remote::PREFETCH, "prefetch of {root}: done"),
                    Err(e) => tracing::warn!(target: remote::PREFETCH, "prefetch of {root}: {e}"),
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(target: remote::PREFETCH, "prefetch of {root}: {e}");
        }
    }

    /// Stops the prefetch of the mount at `root`, if any (it is unmounted).
    pub(crate) fn stop_prefetch(&self, root: &Utf8Path) {
        if let Some(p) = self.lock_prefetches().remove(root) {
            p.stop.store(true, Ordering::Release);
        }
    }

    /// Stops every prefetch (the server stops).
    pub(crate) fn stop_all(&self) {
        for (_, p) in self.lock_prefetches().drain() {
            p.stop.store(true, Ordering::Release);
        }
    }
}

/// What a mount reads the blobs its store lacks from: each blob's promise names its
/// remote, whose source fetches it; offline, nothing is fetched and the read fails saying
/// so.
pub(crate) struct MountSource {
    pub(crate) shared: remote::SharedStore,
    pub(crate) remotes: Arc<LazyRemotes>,
    pub(crate) offline: bool,
}

/// Why a blob of a mount could not be fetched before any remote was asked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MountSourceError {
    /// Offline.
    #[error(
        "blob {blob} is on remote {remote}; the mount is offline (--offline), so it is not fetched"
    )]
    Offline {
        /// The blob.
        blob: cas::BlobId,
        /// Its remote.
        remote: String,
    },
    /// Neither here nor promised by a remote.
    #[error("blob {blob} is missing, and no remote is known to hold it")]
    Unknown {
        /// The blob.
        blob: cas::BlobId,
    },
}

impl MountSource {
    fn source_of(&self, blob: cas::BlobId) -> Result<Arc<remote::LazyBlobs>, mount::LazyError> {
        let store = self.shared.read().unwrap_or_else(PoisonError::into_inner);
        let Some(at) = store.reader()?.promised(blob.into())? else {
            return Err(MountSourceError::Unknown { blob }.into());
        };
        if self.offline {
            return Err(MountSourceError::Offline { blob, remote: at }.into());
        }
        Ok(self.remotes.source(&self.shared, &store, &at)?)
    }

    fn has(&self, id: cas::BlobId) -> bool {
        let store = self.shared.read().unwrap_or_else(PoisonError::into_inner);
        store.reader().and_then(|r| r.has_blob(id)).unwrap_or(false)
    }
}

impl mount::Lazy for MountSource {
    fn cut(&self, id: cas::BlobId) -> Result<cas::BlobChunks, mount::LazyError> {
        Ok(self.source_of(id)?.cut(id)?)
    }

    fn fetch(&self, chunk: cas::Chunk) -> Result<(), mount::LazyError> {
        match self.source_of(chunk.blob) {
            Ok(source) => Ok(source.fetch(chunk)?),
            // A large blob stored whole since its read began: no longer promised.
            Err(_) if self.has(chunk.id) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn fetch_whole(&self, id: cas::BlobId) -> Result<(), mount::LazyError> {
        Ok(self.source_of(id)?.fetch_whole(id)?)
    }
}
