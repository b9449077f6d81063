//! Remotes: what `remote add|rm|list`, `push` and `pull` share, refs on remotes
//! (`NAME@REMOTE`), remote gc, and fetching on demand what a call names but the store lacks.

use cas::{Reader, SnapshotId, WriteBatch};
use remote::{Need, RefUpdate, Remote, RemoteConfig, RemoteError};
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, remote_ref, resolve_snapshot};
use crate::error::{ArgumentError, Code, Error};
use crate::objects::RefEntry;
use crate::store::Access;

/// A remote as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RemoteEntry {
    /// Its name.
    pub name: String,
    /// Where it is.
    pub url: String,
    /// The S3 endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The S3 region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// True if refs can be updated there (the engine enforces conditional writes).
    pub conditional_writes: bool,
}

/// Remotes added, removed or listed.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RemotesOutcome {
    /// Them.
    pub remotes: Vec<RemoteEntry>,
}

pub(crate) fn entry(c: &RemoteConfig) -> RemoteEntry {
    RemoteEntry {
        name: c.name.clone(),
        url: c.url.clone(),
        endpoint: c.endpoint.clone(),
        region: c.region.clone(),
        conditional_writes: c.conditional.refs_safe(),
    }
}

pub(crate) fn is_full_id(spec: &str) -> bool {
    spec.len() == cas::HEX_LEN && spec.parse::<cas::ObjectId>().is_ok()
}

impl Engine {
    pub(crate) fn open_remote(&self, reader: &Reader, name: Option<&str>) -> Result<Remote, Error> {
        let name = name.unwrap_or(remote::DEFAULT_REMOTE);
        let config = remote::remote_config(reader, name)?;
        Ok(Remote::connect(&config)?)
    }

    pub(crate) fn track(
        &self,
        store: &cas::Store,
        remote: &str,
        name: &str,
        id: Option<SnapshotId>,
    ) -> Result<(), Error> {
        let mut batch = WriteBatch::new();
        remote::set_tracking(&mut batch, remote, name, id);
        store.write(&batch)?;
        Ok(())
    }

    /// `ref set NAME@REMOTE SNAP [--expect OLD]`: pushes SNAP, then moves the ref if it
    /// holds OLD (or is absent without `--expect`).
    pub(crate) fn remote_ref_set(
        &self,
        call: &Call,
        name: &str,
        at: &str,
        snapshot: &str,
        expect: Option<&str>,
    ) -> Result<(Vec<RefEntry>, Option<String>), Error> {
        cas::validate_ref_name(name)?;
        let store = self.store(Access::Write)?;
        let reader = store.reader()?;
        let remote = self.open_remote(&reader, Some(at))?;
        let id = resolve_snapshot(&reader, &call.cwd, snapshot)?;
        let expected = expect
            .map(|e| expected_id(&reader, &call.cwd, e))
            .transpose()?;
        drop(reader);
        remote::push(&remote, &store, &[id], call.progress)?;
        match remote::refs::update(&remote, name, RefUpdate::Set(id), expected) {
            Ok(()) => {
                self.track(&store, at, name, Some(id))?;
                Ok((
                    vec![RefEntry {
                        name: format!("{name}@{at}"),
                        snapshot: id,
                    }],
                    None,
                ))
            }
            Err(RemoteError::RefMoved { current, .. }) => {
                let refs = current
                    .map(|c| RefEntry {
                        name: format!("{name}@{at}"),
                        snapshot: c,
                    })
                    .into_iter()
                    .collect();
                let err = RemoteError::RefMoved {
                    remote: at.to_owned(),
                    name: name.to_owned(),
                    current,
                    expected,
                };
                Ok((refs, Some(err.to_string())))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// `ref rm NAME@REMOTE [--expect OLD]`; `ref rm ID@REMOTE` unpins a snapshot pushed by
    /// id.
    pub(crate) fn remote_ref_rm(
        &self,
        call: &Call,
        name: &str,
        at: &str,
        expect: Option<&str>,
    ) -> Result<(Vec<RefEntry>, Option<String>), Error> {
        let store = self.store(Access::Write)?;
        let reader = store.reader()?;
        let remote = self.open_remote(&reader, Some(at))?;
        if is_full_id(name) {
            let id: SnapshotId = name.parse().map_err(ArgumentError::Id)?;
            remote::refs::unpin(&remote, id)?;
            return Ok((
                vec![RefEntry {
                    name: format!("{name}@{at}"),
                    snapshot: id,
                }],
                None,
            ));
        }
        let expected = match expect {
            Some(e) => Some(expected_id(&reader, &call.cwd, e)?),
            // Without --expect: whatever it holds now, still atomically.
            None => remote::refs::get(&remote, name)?,
        };
        drop(reader);
        let Some(old) = expected else {
            return Err(RemoteError::NoSuchRef {
                remote: at.to_owned(),
                name: name.to_owned(),
            }
            .into());
        };
        match remote::refs::update(&remote, name, RefUpdate::Remove, Some(old)) {
            Ok(()) => {
                self.track(&store, at, name, None)?;
                Ok((
                    vec![RefEntry {
                        name: format!("{name}@{at}"),
                        snapshot: old,
                    }],
                    None,
                ))
            }
            Err(e @ RemoteError::RefMoved { .. }) => Ok((Vec::new(), Some(e.to_string()))),
            Err(e) => Err(e.into()),
        }
    }

    /// `ref list --remote NAME`: the remote's refs (what this store last saw, offline).
    pub(crate) fn remote_ref_list(&self, call: &Call, at: &str) -> Result<Vec<RefEntry>, Error> {
        let store = self.store(if call.offline {
            Access::Read
        } else {
            Access::Write
        })?;
        let reader = store.reader()?;
        let remote_config = remote::remote_config(&reader, at)?;
        if call.offline {
            return Ok(remote::tracking_refs(&reader, at)?
                .into_iter()
                .map(|(name, snapshot)| RefEntry {
                    name: format!("{name}@{at}"),
                    snapshot,
                })
                .collect());
        }
        drop(reader);
        let remote = Remote::connect(&remote_config)?;
        let listed = remote::refs::list(&remote)?;
        let mut batch = WriteBatch::new();
        batch.clear_side_scope(remote::TRACKING, at);
        for r in &listed {
            remote::set_tracking(&mut batch, at, &r.name, Some(r.snapshot));
        }
        store.write(&batch)?;
        Ok(listed
            .into_iter()
            .map(|r| RefEntry {
                name: format!("{}@{at}", r.name),
                snapshot: r.snapshot,
            })
            .collect())
    }

    /// `gc --remote NAME [--grace HOURS] [--dry-run]`.
    pub(crate) fn remote_gc(
        &self,
        name: &str,
        grace_hours: u32,
        dry_run: bool,
    ) -> Result<remote::RemoteGcOutcome, Error> {
        let store = self.store(Access::Write)?;
        let remote = self.open_remote(&store.reader()?, Some(name))?;
        Ok(remote::gc(
            &remote,
            &store,
            &remote::RemoteGcOptions {
                grace_seconds: u64::from(grace_hours) * 3600,
                dry_run,
            },
        )?)
    }

    /// Fetches what a failed call named but the store lacks: a full snapshot id (from the
    /// first remote that has it, `origin` first) or `NAME@REMOTE` (the value last seen
    /// there, else its value now), with everything its tree reaches. Prefixes are never
    /// fetched; `--offline` fetches nothing. True if anything new is here to try again with.
    pub(crate) fn fetch_named(&self, call: &Call, specs: Vec<String>) -> Result<bool, Error> {
        if call.offline || specs.is_empty() {
            return Ok(false);
        }
        let Ok(store) = self.store(Access::Read) else {
            return Ok(false);
        };
        let reader = store.reader()?;
        let configs = remote::remotes(&reader)?;
        if configs.is_empty() {
            return Ok(false);
        }
        let mut wanted: Vec<(SnapshotId, Vec<RemoteConfig>)> = Vec::new();
        let mut tracking: Vec<(String, String, SnapshotId)> = Vec::new();
        for spec in specs {
            if let Some((name, at)) = remote_ref(&spec) {
                // A path that happens to hold '@' names no remote here.
                let Ok(config) = remote::remote_config(&reader, at) else {
                    continue;
                };
                let id = match remote::tracking_ref(&reader, at, name)? {
                    Some(id) => id,
                    None => {
                        let remote = Remote::connect(&config)?;
                        let id = remote::refs::get(&remote, name)?.ok_or_else(|| {
                            RemoteError::NoSuchRef {
                                remote: at.to_owned(),
                                name: name.to_owned(),
                            }
                        })?;
                        tracking.push((at.to_owned(), name.to_owned(), id));
                        id
                    }
                };
                if !reader.has_snapshot(id)? {
                    wanted.push((id, vec![config]));
                }
            } else if is_full_id(&spec) {
                let id: SnapshotId = spec.parse().map_err(ArgumentError::Id)?;
                let id_any: cas::ObjectId = id.into();
                let known = reader.has_snapshot(id)?
                    || reader.has_tree(id_any.as_tree())?
                    || reader.has_blob(id_any.as_blob())?;
                if !known {
                    let mut order = configs.clone();
                    order.sort_by_key(|c| c.name != remote::DEFAULT_REMOTE);
                    wanted.push((id, order));
                }
            }
        }
        drop(reader);
        drop(store);
        if wanted.is_empty() && tracking.is_empty() {
            return Ok(false);
        }
        let store = self.store(Access::Write)?;
        let _guard = self
            .fetching
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut fetched = !tracking.is_empty();
        for (id, candidates) in wanted {
            fetched |= self.fetch_from(call, &store, id, &candidates)?;
        }
        if !tracking.is_empty() {
            let mut batch = WriteBatch::new();
            for (at, name, id) in tracking {
                remote::set_tracking(&mut batch, &at, &name, Some(id));
            }
            store.write(&batch)?;
        }
        Ok(fetched)
    }

    /// Fetches snapshot `id` with its tree from the first of `candidates` that has it; true
    /// if it is here now and was not before.
    fn fetch_from(
        &self,
        call: &Call,
        store: &cas::Store,
        id: SnapshotId,
        candidates: &[RemoteConfig],
    ) -> Result<bool, Error> {
        // Another call may have fetched it meanwhile.
        if store.reader()?.has_snapshot(id)? {
            return Ok(true);
        }
        for config in candidates {
            let remote = Remote::connect(config)?;
            match remote::fetch(&remote, store, &[id], Need::Closure, call.progress) {
                Ok(_) => return Ok(true),
                Err(RemoteError::NotOnRemote { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        // On no remote: the call reports the id unknown, as without remotes.
        Ok(false)
    }

    /// For a mount of `spec` (a full id or `NAME@REMOTE`; prefixes are never fetched) that
    /// the store lacks: brings the snapshot and its trees from the remote holding it (the
    /// first that has a full id, `origin` first), its blobs promised there, to be read when
    /// first used. The snapshot and the remote, or `None` if `spec` is no such name or no
    /// remote has it. Offline, a refusal naming it.
    pub(crate) fn fetch_trees_named(
        &self,
        call: &Call,
        store: &cas::Store,
        shared: &remote::SharedStore,
        spec: &str,
    ) -> Result<Option<(SnapshotId, String)>, Error> {
        let reader = store.reader()?;
        let mut candidates: Vec<(SnapshotId, RemoteConfig)> = Vec::new();
        let mut tracking = None;
        if let Some((name, at)) = remote_ref(spec).filter(|(n, _)| !n.is_empty()) {
            let Ok(config) = remote::remote_config(&reader, at) else {
                return Ok(None);
            };
            if call.offline {
                return Err(RemotesError::MountOffline {
                    spec: spec.to_owned(),
                }
                .into());
            }
            let id = match remote::tracking_ref(&reader, at, name)? {
                Some(id) => id,
                None => {
                    let remote = Remote::connect(&config)?;
                    let id = remote::refs::get(&remote, name)?.ok_or_else(|| {
                        RemoteError::NoSuchRef {
                            remote: at.to_owned(),
                            name: name.to_owned(),
                        }
                    })?;
                    tracking = Some((at.to_owned(), name.to_owned(), id));
                    id
                }
            };
            candidates.push((id, config));
        } else if is_full_id(spec) {
            if call.offline {
                return Err(RemotesError::MountOffline {
                    spec: spec.to_owned(),
                }
                .into());
            }
            let id: SnapshotId = spec.parse().map_err(ArgumentError::Id)?;
            let mut order = remote::remotes(&reader)?;
            order.sort_by_key(|c| c.name != remote::DEFAULT_REMOTE);
            candidates.extend(order.into_iter().map(|c| (id, c)));
        }
        drop(reader);
        let _guard = self
            .fetching
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (id, config) in candidates {
            let source = self.lazy.source(shared, store, &config.name)?;
            match source.fetch_trees(store, id, call.progress) {
                Ok(_) => {
                    if let Some((at, name, id)) = &tracking {
                        self.track(store, at, name, Some(*id))?;
                    }
                    return Ok(Some((id, config.name)));
                }
                Err(RemoteError::NotOnRemote { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(None)
    }

    /// If `err` is about a snapshot this store knows only as promised by a remote, fetches
    /// it (online) and says so; offline, turns it into an error saying where it is.
    ///
    /// A blob only promised (a lazily mounted snapshot's, wanted by a checkout, a diff, a
    /// show) is fetched with every other blob the snapshots the call `named` lack, or
    /// alone if they do not reach it.
    pub(crate) fn fetch_promised(
        &self,
        call: &Call,
        err: &Error,
        named: &[&str],
    ) -> Result<bool, Error> {
        // A checkout's hydration finds a blob it was told of missing: "corrupt".
        if let Some(
            cas::ReadError::NotFound {
                kind: cas::ObjectKind::Blob,
                id,
            }
            | cas::ReadError::Corrupt {
                kind: cas::ObjectKind::Blob,
                id,
                ..
            },
        ) = read_error_in(err)
        {
            return self.fetch_promised_blob(call, id.as_blob(), named);
        }
        let id = match err.typed::<cas::ReadError>() {
            Some(cas::ReadError::NotFound {
                kind: cas::ObjectKind::Snapshot,
                id,
            })
            | Some(cas::ReadError::Corrupt {
                kind: cas::ObjectKind::Snapshot,
                id,
                ..
            }) => *id,
            _ => return Ok(false),
        };
        let store = self.store(Access::Read)?;
        let reader = store.reader()?;
        let Some(at) = reader.promised(id)? else {
            return Ok(false);
        };
        if call.offline {
            return Err(RemotesError::PromisedOffline { id, at }.into());
        }
        let config = remote::remote_config(&reader, &at)?;
        drop(reader);
        drop(store);
        let store = self.store(Access::Write)?;
        let _guard = self
            .fetching
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.fetch_from(
            call,
            &store,
            id.as_snapshot(),
            std::slice::from_ref(&config),
        )?;
        Ok(store.reader()?.has_snapshot(id.as_snapshot())?)
    }
}

impl Engine {
    fn fetch_promised_blob(
        &self,
        call: &Call,
        blob: cas::BlobId,
        named: &[&str],
    ) -> Result<bool, Error> {
        let store = self.store(Access::Read)?;
        let reader = store.reader()?;
        let Some(at) = reader.promised(blob.into())? else {
            return Ok(false);
        };
        if call.offline {
            return Err(RemotesError::PromisedBlobOffline { id: blob, at }.into());
        }
        let snapshots: Vec<SnapshotId> = named
            .iter()
            .filter_map(|spec| resolve_snapshot(&reader, &call.cwd, spec).ok())
            .collect();
        let config = remote::remote_config(&reader, &at)?;
        drop(reader);
        drop(store);
        let store = self.store(Access::Write)?;
        let _guard = self
            .fetching
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let remote = Remote::connect(&config)?;
        if !snapshots.is_empty() {
            remote::fetch(&remote, &store, &snapshots, Need::Closure, call.progress)?;
        }
        if !store.reader()?.has_blob(blob)? {
            remote::fetch_blobs_by_id(&remote, &store, &[blob], call.progress)?;
        }
        Ok(store.reader()?.has_blob(blob)?)
    }
}

/// The read error `err` comes of, however deep (a checkout's store error holds it).
fn read_error_in(err: &Error) -> Option<&cas::ReadError> {
    let mut at: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(err);
    while let Some(e) = at {
        if let Some(r) = e.downcast_ref::<cas::ReadError>() {
            return Some(r);
        }
        if let Some(cas::StoreError::Read(r)) = e.downcast_ref::<cas::StoreError>() {
            return Some(r);
        }
        if let Some(fs_manager::CheckoutError::Store(cas::StoreError::Read(r))) =
            e.downcast_ref::<fs_manager::CheckoutError>()
        {
            return Some(r);
        }
        at = e.source();
    }
    None
}

/// `--expect OLD`: a full id is taken as it is (another machine's snapshot need not be in
/// this store); anything shorter is resolved here.
fn expected_id(reader: &Reader, cwd: &camino::Utf8Path, spec: &str) -> Result<SnapshotId, Error> {
    if is_full_id(spec) {
        return spec.parse().map_err(|e| ArgumentError::Id(e).into());
    }
    resolve_snapshot(reader, cwd, spec)
}

/// Why a call on remotes is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemotesError {
    /// `pull` with `--offline`.
    #[error("pull needs the network; --offline forbids it")]
    PullOffline,
    /// A blob only a remote has, with `--offline`.
    #[error("blob {id} is on remote {at}; --offline forbids fetching it")]
    PromisedBlobOffline {
        /// The blob.
        id: cas::BlobId,
        /// The remote.
        at: String,
    },
    /// A mount of a snapshot the store lacks, with `--offline`.
    #[error("{spec}: not in the store; --offline forbids fetching it from a remote")]
    MountOffline {
        /// The snapshot as named.
        spec: String,
    },
    /// A snapshot only a remote has, with `--offline`.
    #[error("snapshot {id} is on remote {at}; --offline forbids fetching it")]
    PromisedOffline {
        /// The snapshot.
        id: cas::ObjectId,
        /// The remote.
        at: String,
    },
    /// A pull naming another remote's ref.
    #[error("{spec}: names remote {at}, but this pull is from {name}")]
    OtherRemote {
        /// The ref named.
        spec: String,
        /// Its remote.
        at: String,
        /// The remote pulled from.
        name: String,
    },
}

crate::error::coded!(RemotesError);

impl RemotesError {
    /// Its code.
    pub fn code(&self) -> Code {
        match self {
            RemotesError::PullOffline
            | RemotesError::PromisedOffline { .. }
            | RemotesError::PromisedBlobOffline { .. }
            | RemotesError::MountOffline { .. } => Code::Offline,
            RemotesError::OtherRemote { .. } => Code::Usage,
        }
    }
}
