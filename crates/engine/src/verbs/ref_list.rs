//! `ref list`: the refs of the store, or of a remote.

use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine};
use crate::error::Error;
use crate::objects::{RefEntry, RefsOutcome};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// `ref list`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RefListOptions {
    /// List this remote's refs.
    #[serde(default)]
    pub remote: Option<String>,
}

impl Engine {
    /// `cairn ref list`.
    pub fn ref_list(&self, call: &Call, options: RefListOptions) -> Result<RefsOutcome, Error> {
        if let Some(at) = &options.remote {
            let refs = self.remote_ref_list(call, at)?;
            return Ok(RefsOutcome {
                refs,
                message: None,
            });
        }
        let store = self.store(Access::Read)?;
        let refs = store
            .reader()?
            .refs()?
            .into_iter()
            .map(|(name, snapshot)| RefEntry { name, snapshot })
            .collect();
        Ok(RefsOutcome {
            refs,
            message: None,
        })
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// The refs of the store, or of a remote.
    RefList(RefListOptions) -> RefsOutcome = "ref_list" via ref_list [Route, Tool];
}

impl VerbSpec for verbs::RefList {
    const EXAMPLE: Option<&'static str> = Some(r#"{"remote": "origin"}"#);
}
