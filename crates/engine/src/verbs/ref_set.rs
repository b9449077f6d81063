//! `ref set NAME SNAP`: a ref pointed at a snapshot (`NAME@REMOTE`: on the remote).

use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, resolve_snapshot};
use crate::error::Error;
use crate::objects::{RefEntry, RefsError, RefsOutcome};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// `ref set NAME SNAP`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RefSetOptions {
    /// The ref, or NAME@REMOTE.
    pub name: String,
    /// The snapshot.
    #[schemars(extend("x-snapshot" = true))]
    pub snapshot: String,
    /// For NAME@REMOTE: the snapshot it must still hold.
    #[serde(default)]
    #[schemars(extend("x-snapshot" = true))]
    pub expect: Option<String>,
}

impl Engine {
    /// `cairn ref set NAME SNAP`.
    pub fn ref_set(&self, call: &Call, options: RefSetOptions) -> Result<RefsOutcome, Error> {
        if let Some((name, at)) = crate::engine::remote_ref(&options.name) {
            let (refs, message) =
                self.remote_ref_set(call, name, at, &options.snapshot, options.expect.as_deref())?;
            return Ok(RefsOutcome { refs, message });
        }
        if options.expect.is_some() {
            return Err(RefsError::ExpectOnLocal { name: options.name }.into());
        }
        cas::validate_ref_name(&options.name)?;
        let store = self.store(Access::Create)?;
        let id = resolve_snapshot(&store.reader()?, &call.cwd, &options.snapshot)?;
        store.set_ref(&options.name, id)?;
        Ok(RefsOutcome {
            refs: vec![RefEntry {
                name: options.name,
                snapshot: id,
            }],
            message: None,
        })
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Point a ref at a snapshot; NAME@REMOTE sets a ref on a remote, only if it still holds `expect` (or does not exist), so two machines never overwrite each other.
    RefSet(RefSetOptions) -> RefsOutcome = "ref_set" via ref_set [Route, Tool];
}

impl VerbSpec for verbs::RefSet {
    fn named_snapshots(options: &Self::Options) -> Vec<&str> {
        vec![&options.snapshot]
    }

    fn refusal(outcome: &Self::Outcome) -> Option<&str> {
        outcome.message.as_deref()
    }

    const REFUSED: Option<&'static str> = Some(
        "A refusal: the remote ref holds another snapshot than expected (`refs` gives it); `message` names it.",
    );

    const EXAMPLE: Option<&'static str> =
        Some(r#"{"name": "main@origin", "snapshot": "main", "expect": null}"#);
}
