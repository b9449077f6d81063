//! `ref rm NAME`: a ref removed (`NAME@REMOTE`: on the remote).

use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine};
use crate::error::Error;
use crate::objects::{RefEntry, RefsError, RefsOutcome};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// `ref rm NAME`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RefRmOptions {
    /// The ref, NAME@REMOTE or ID@REMOTE.
    pub name: String,
    /// For NAME@REMOTE: the snapshot it must still hold.
    #[serde(default)]
    #[schemars(extend("x-snapshot" = true))]
    pub expect: Option<String>,
}

impl Engine {
    /// `cairn ref rm NAME`.
    pub fn ref_rm(&self, call: &Call, options: RefRmOptions) -> Result<RefsOutcome, Error> {
        if let Some((name, at)) = crate::engine::remote_ref(&options.name) {
            let (refs, message) = self.remote_ref_rm(call, name, at, options.expect.as_deref())?;
            return Ok(RefsOutcome { refs, message });
        }
        if options.expect.is_some() {
            return Err(RefsError::ExpectOnLocal { name: options.name }.into());
        }
        let store = self.store(Access::Write)?;
        let id = store.remove_ref(&options.name)?;
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
    /// Remove a ref (NAME@REMOTE: on the remote; ID@REMOTE: unpin a snapshot pushed by id).
    RefRm(RefRmOptions) -> RefsOutcome = "ref_rm" via ref_rm [Route];
}

impl VerbSpec for verbs::RefRm {
    fn refusal(outcome: &Self::Outcome) -> Option<&str> {
        outcome.message.as_deref()
    }

    const REFUSED: Option<&'static str> =
        Some("A refusal: the remote ref holds another snapshot than expected; `message` names it.");

    const EXAMPLE: Option<&'static str> = Some(r#"{"name": "main@origin"}"#);
}
