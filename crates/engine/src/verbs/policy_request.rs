//! `policy_request`: a grant an agent asks for, recorded for a person to decide on.

use camino::Utf8PathBuf;
use fs_manager::GrantRequest;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, registered};
use crate::error::{Error, IoError};
use crate::policy::{
    MAX_ASKER, MAX_OPEN_REQUESTS, MAX_REASON, PolicyError, PolicyOutcome, asked, bounded,
    check_writable, entry, words,
};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// An agent's request for a grant, which a person decides on.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyRequestOptions {
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// Absolute, existing, canonical paths to make writable.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub write: Vec<Utf8PathBuf>,
    /// TCP bind and connect.
    #[serde(default)]
    pub network: bool,
    /// For the next run only.
    #[serde(default)]
    pub once: bool,
    /// Why, in the asker's words.
    #[serde(default)]
    pub reason: Option<String>,
    /// Who asks: the MCP client, or the HTTP peer (set by the face, not by the asker).
    pub by: String,
}

impl Engine {
    /// An agent's `policy_allow` (through MCP or HTTP): checks what it asks for as a grant
    /// would be checked, and records it as a request for a person to decide on, logged as
    /// `policy_request`. Asking again for what an open request asks answers with that one.
    pub fn policy_request(
        &self,
        call: &Call,
        options: PolicyRequestOptions,
    ) -> Result<PolicyOutcome, Error> {
        bounded("reason", options.reason.as_deref(), MAX_REASON)?;
        bounded("by", Some(&options.by), MAX_ASKER)?;
        let what = asked("allow", options.write, options.network)?;
        let store = self.store(Access::Write)?;
        let root = registered(&store.reader()?, &call.path(&options.worktree))?.root;
        let store_dir = std::fs::canonicalize(store.root().as_std_path())
            .map_err(|e| IoError::new(store.root(), e))?;
        for path in &what.writable {
            check_writable(path, &store_dir)?;
        }
        let once = options.once;
        let mut id = 0;
        let record = self.worktrees.change_grants(&store, &root, |_, requests| {
            if let Some(same) = requests
                .open
                .iter()
                .find(|r| r.grant == what && r.once == once)
            {
                id = same.id;
                return Ok(None);
            }
            if requests.open.len() >= MAX_OPEN_REQUESTS {
                return Err(PolicyError::TooManyRequests { root: root.clone() }.into());
            }
            requests.last += 1;
            id = requests.last;
            let mut detail = format!("request {id}: {}", words(&what, once));
            if let Some(reason) = &options.reason {
                detail.push_str(&format!(": {reason}"));
            }
            requests.open.push(GrantRequest {
                id,
                grant: what.clone(),
                once,
                by: options.by.clone(),
                reason: options.reason.clone(),
                asked: jiff::Timestamp::now(),
            });
            Ok::<_, Error>(Some(entry(
                "policy_request",
                detail,
                Some(options.by.clone()),
            )))
        })?;
        let message = format!(
            "request {id} recorded, nothing granted yet: a person grants it with `cairn policy allow {root} --request {id}` or denies it with `cairn policy revoke {root} --request {id}`"
        );
        Ok(PolicyOutcome {
            requested: Some(id),
            message: Some(message),
            ..PolicyOutcome::of(record)
        })
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Record a grant an agent asks for, for a person to decide on.
    PolicyRequest(PolicyRequestOptions) -> PolicyOutcome = "policy_request" via policy_request [];
}

impl VerbSpec for verbs::PolicyRequest {}
