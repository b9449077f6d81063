//! `pull`: snapshots (with their history) copied from a remote, verified; `NAME@REMOTE`
//! updated here.

use cas::{SnapshotId, WriteBatch};
use remote::{Need, RemoteError};
use serde::{Deserialize, Serialize};

use crate::deps;
use crate::engine::{Call, Engine, remote_ref};
use crate::error::{ArgumentError, Error};
use crate::objects::RefEntry;
use crate::remotes::{RemotesError, is_full_id};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// `pull [SNAP|REF]… [--remote NAME]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PullOptions {
    /// Snapshot ids or refs of the remote (none: every remote ref).
    #[serde(default)]
    #[schemars(extend("x-snapshot" = true))]
    pub snapshots: Vec<String>,
    /// The remote (default origin).
    #[serde(default)]
    pub remote: Option<String>,
    /// Also bring the dependency layers the remote holds for the pulled snapshots (those
    /// their lockfiles give on this machine), each verified.
    #[serde(default)]
    pub deps: bool,
}

/// What `pull` did.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PullOutcome {
    /// The remote.
    pub remote: String,
    /// The snapshots now here, with their history.
    pub pulled: Vec<SnapshotId>,
    /// Objects received.
    pub objects_received: u64,
    /// Bytes received.
    pub bytes_received: u64,
    /// Attestations (records and signatures) received: those of the snapshots' trees that
    /// this store lacked, each verified.
    #[serde(default)]
    pub attestations_received: u64,
    /// Remote refs updated here (`NAME@REMOTE`).
    pub refs: Vec<RefEntry>,
    /// With `deps`: the keys of the dependency layers now here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<String>,
    /// What of the remote was skipped (a file under its `index/` that is no readable
    /// index), each naming the file and the remote.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Engine {
    /// `cairn pull`: snapshots with their history, verified; updates `NAME@REMOTE` here,
    /// never a local ref.
    pub fn pull(&self, call: &Call, options: PullOptions) -> Result<PullOutcome, Error> {
        if call.offline {
            return Err(RemotesError::PullOffline.into());
        }
        let store = self.store(Access::Create)?;
        let remote = self.open_remote(&store.reader()?, options.remote.as_deref())?;
        let name = remote.name().to_owned();
        let mut ids = Vec::new();
        let mut refs = Vec::new();
        if options.snapshots.is_empty() {
            for r in remote::refs::list(&remote)? {
                ids.push(r.snapshot);
                refs.push((r.name, r.snapshot));
            }
        }
        for spec in &options.snapshots {
            if is_full_id(spec) {
                ids.push(spec.parse().map_err(ArgumentError::Id)?);
                continue;
            }
            let r = match remote_ref(spec) {
                Some((r, at)) if at == name => r,
                Some((_, at)) => {
                    return Err(RemotesError::OtherRemote {
                        spec: spec.clone(),
                        at: at.to_owned(),
                        name,
                    }
                    .into());
                }
                None => spec.as_str(),
            };
            let id = remote::refs::get(&remote, r)?.ok_or_else(|| RemoteError::NoSuchRef {
                remote: name.clone(),
                name: r.to_owned(),
            })?;
            ids.push(id);
            refs.push((r.to_owned(), id));
        }
        let _guard = self
            .fetching
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut got = remote::fetch(&remote, &store, &ids, Need::History, call.progress)?;
        let layers = if options.deps {
            self.pull_layers(&remote, &store, &ids, &mut got, call)?
        } else {
            Vec::new()
        };
        let mut batch = WriteBatch::new();
        if options.snapshots.is_empty() {
            // Every ref of the remote was read: one this store saw there and that is gone
            // now is gone here too.
            for (gone, _) in remote::tracking_refs(&store.reader()?, &name)? {
                if !refs.iter().any(|(r, _)| *r == gone) {
                    remote::set_tracking(&mut batch, &name, &gone, None);
                }
            }
        }
        for (r, id) in &refs {
            remote::set_tracking(&mut batch, &name, r, Some(*id));
        }
        store.write(&batch)?;
        Ok(PullOutcome {
            remote: name.clone(),
            pulled: got.pulled,
            objects_received: got.objects_received,
            bytes_received: got.bytes_received,
            attestations_received: got.attestations_received,
            warnings: got.warnings,
            layers,
            refs: refs
                .into_iter()
                .map(|(r, snapshot)| RefEntry {
                    name: format!("{r}@{name}"),
                    snapshot,
                })
                .collect(),
        })
    }
}

impl Engine {
    /// Brings the layers the remote holds for `snapshots` (pulled already): each record,
    /// checked to be the one its key names, then its snapshot, verified; the record is
    /// written here last. Their transfer counts go into `got`; their keys, in order.
    fn pull_layers(
        &self,
        remote: &remote::Remote,
        store: &cas::Store,
        snapshots: &[SnapshotId],
        got: &mut remote::FetchOutcome,
        call: &Call,
    ) -> Result<Vec<String>, Error> {
        let mut out = Vec::new();
        let keys = deps::travel::travelling_keys(&store.reader()?, snapshots)?;
        for key in keys {
            let Some(bytes) = remote::layer_record(remote, &key)? else {
                continue;
            };
            let record = deps::travel::received(remote.name(), &key, &bytes)?;
            let layer = remote::fetch(
                remote,
                store,
                &[record.snapshot],
                Need::History,
                call.progress,
            )?;
            got.objects_received += layer.objects_received;
            got.bytes_received += layer.bytes_received;
            got.warnings.extend(layer.warnings);
            deps::travel::store_received(store, record)?;
            out.push(key);
        }
        Ok(out)
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Copy snapshots (with their history and the checks recorded of them) from a remote, verifying every object and attestation; updates NAME@REMOTE, never a local ref. With deps, also the dependency layers the remote holds for them (never without).
    Pull(PullOptions) -> PullOutcome = "pull" via pull [Route, Tool];
}

impl VerbSpec for verbs::Pull {
    const EXAMPLE: Option<&'static str> = Some(r#"{"snapshots": ["main"], "remote": "origin"}"#);
}
