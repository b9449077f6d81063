//! `deps rm KEY`: a dependency layer removed.

use serde::{Deserialize, Serialize};

use crate::deps::{self, DepsOutcome, LayerItem};
use crate::engine::{Call, Engine};
use crate::error::Error;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// `deps rm KEY`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DepsRmOptions {
    /// The layer's key, or a prefix naming one layer.
    pub key: String,
}

impl Engine {
    /// `cairn deps rm KEY`.
    pub fn deps_rm(&self, _call: &Call, options: DepsRmOptions) -> Result<DepsOutcome, Error> {
        let store = self.store(Access::Write)?;
        let removed = deps::remove(&store, &options.key)?;
        Ok(DepsOutcome {
            layers: vec![LayerItem::of(&removed)],
        })
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Remove a dependency layer (its files go with the next gc); worktrees it is attached to keep their copy.
    DepsRm(DepsRmOptions) -> DepsOutcome = "deps_rm" via deps_rm [Route, Tool];
}

impl VerbSpec for verbs::DepsRm {
    const EXAMPLE: Option<&'static str> = Some(r#"{"key": "3f2a9c"}"#);
}
