//! `push`: snapshots (with their history) copied to a remote, refs on it set if nobody
//! moved them meanwhile.

use cas::SnapshotId;
use remote::{RefUpdate, RemoteError};
use serde::{Deserialize, Serialize};

use crate::deps;
use crate::engine::{Call, Engine, resolve_snapshot};
use crate::error::Error;
use crate::objects::RefEntry;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// `push [SNAP|REF]… [--remote NAME]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PushOptions {
    /// Snapshot ids or local refs (none: every local ref).
    #[serde(default)]
    #[schemars(extend("x-snapshot" = true))]
    pub snapshots: Vec<String>,
    /// The remote (default origin).
    #[serde(default)]
    pub remote: Option<String>,
    /// Also push each snapshot's dependency layers stored here (those its lockfiles give
    /// on this machine; a layer bound to its root stays): by id, with a record of each.
    #[serde(default)]
    pub deps: bool,
}

/// What `push` did.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PushOutcome {
    /// The remote.
    pub remote: String,
    /// The snapshots now on the remote.
    pub pushed: Vec<SnapshotId>,
    /// Objects sent.
    pub objects_sent: u64,
    /// Bytes sent.
    pub bytes_sent: u64,
    /// Objects the remote had already.
    pub objects_present: u64,
    /// Attestations (records and signatures) sent: those of the snapshots' trees, and of
    /// their history's, that the remote lacked.
    #[serde(default)]
    pub attestations_sent: u64,
    /// Remote refs set (`NAME@REMOTE` as `name`).
    pub refs: Vec<RefEntry>,
    /// With `deps`: the keys of the dependency layers now on the remote.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<String>,
    /// The refusal: a remote ref that moved since this store last saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// What of the remote was skipped (a file under its `index/` that is no readable
    /// index), each naming the file and the remote.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Engine {
    /// `cairn push`: snapshots by id are pinned there; refs set `REF@REMOTE` if it still
    /// holds what this store last saw (else a refusal naming its value).
    pub fn push(&self, call: &Call, options: PushOptions) -> Result<PushOutcome, Error> {
        let store = self.store(Access::Write)?;
        let reader = store.reader()?;
        let remote = self.open_remote(&reader, options.remote.as_deref())?;
        let name = remote.name().to_owned();
        // (local ref name if pushed by ref, snapshot)
        let mut targets: Vec<(Option<String>, SnapshotId)> = Vec::new();
        if options.snapshots.is_empty() {
            for (r, id) in reader.refs()? {
                targets.push((Some(r), id));
            }
        }
        for spec in &options.snapshots {
            match reader.ref_target(spec)? {
                Some(id) => targets.push((Some(spec.clone()), id)),
                None => targets.push((None, resolve_snapshot(&reader, &call.cwd, spec)?)),
            }
        }
        let ids: Vec<SnapshotId> = targets.iter().map(|(_, id)| *id).collect();
        let layers = if options.deps {
            deps::travel::travelling(&reader, &ids)?
        } else {
            Vec::new()
        };
        drop(reader);
        // The layers' snapshots go with the others, in one push: what they share is sent once.
        let all: Vec<SnapshotId> = (ids.iter().copied())
            .chain(layers.iter().map(|l| l.snapshot))
            .collect();
        let mut pushed = remote::push(&remote, &store, &all, call.progress)?;
        pushed
            .pushed
            .retain(|id| !layers.iter().any(|l| l.snapshot == *id) || ids.contains(id));
        // Pinned, so the remote's gc keeps them; the record last, once its layer is there.
        for layer in &layers {
            remote::refs::pin(&remote, layer.snapshot)?;
            remote::put_layer_record(&remote, &layer.key, &deps::travel::encode(layer))?;
        }
        let mut refs = Vec::new();
        let mut refused = Vec::new();
        for (r, id) in &targets {
            match r {
                None => remote::refs::pin(&remote, *id)?,
                Some(r) => {
                    let seen = remote::tracking_ref(&store.reader()?, &name, r)?;
                    match remote::refs::update(&remote, r, RefUpdate::Set(*id), seen) {
                        Ok(()) => {
                            self.track(&store, &name, r, Some(*id))?;
                            refs.push(RefEntry {
                                name: format!("{r}@{name}"),
                                snapshot: *id,
                            });
                        }
                        Err(e @ RemoteError::RefMoved { .. }) => refused.push(e.to_string()),
                        Err(e) => return Err(e.into()),
                    }
                }
            }
        }
        Ok(PushOutcome {
            remote: name,
            pushed: pushed.pushed,
            objects_sent: pushed.objects_sent,
            bytes_sent: pushed.bytes_sent,
            objects_present: pushed.objects_present,
            attestations_sent: pushed.attestations_sent,
            warnings: pushed.warnings,
            refs,
            layers: layers.into_iter().map(|l| l.key).collect(),
            message: (!refused.is_empty()).then(|| refused.join("; ")),
        })
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Copy snapshots (with their history and the checks recorded of them) to a remote so other machines can check them out by id, sending only what it lacks; a ref also sets REF@REMOTE if nobody moved it meanwhile. With deps, also the snapshots' dependency layers stored here (never without).
    Push(PushOptions) -> PushOutcome = "push" via push [Route, Tool];
}

impl VerbSpec for verbs::Push {
    fn refusal(outcome: &Self::Outcome) -> Option<&str> {
        outcome.message.as_deref()
    }

    const REFUSED: Option<&'static str> = Some(
        "A refusal: a remote ref moved since this store last saw it (the snapshots were pushed); `message` names its value.",
    );

    const EXAMPLE: Option<&'static str> = Some(r#"{"snapshots": ["main"], "remote": "origin"}"#);
}
