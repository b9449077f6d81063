//! `policy revoke`: grants taken back, or an open request denied.

use camino::Utf8PathBuf;
use fs_manager::GrantSet;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, registered};
use crate::error::Error;
use crate::policy::{PolicyError, PolicyOutcome, asked, entry, open_request, user, words};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// `policy revoke WORKTREE (--write PATH… | --network | --request ID) [--once]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyRevokeOptions {
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// Writable paths, as granted.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub write: Vec<Utf8PathBuf>,
    /// The network.
    #[serde(default)]
    pub network: bool,
    /// Next-run-only grants.
    #[serde(default)]
    pub once: bool,
    /// Deny the open request of this number (instead of taking grants back).
    #[serde(default)]
    #[schemars(extend("x-cli-only" = true))]
    pub request: Option<u64>,
}

impl Engine {
    /// `cairn policy revoke`: takes grants back, logged as `policy_revoke` (one that was
    /// not granted is an error); with `request`, denies an open request (`policy_deny`).
    pub fn policy_revoke(
        &self,
        call: &Call,
        options: PolicyRevokeOptions,
    ) -> Result<PolicyOutcome, Error> {
        let store = self.store(Access::Write)?;
        let root = registered(&store.reader()?, &call.path(&options.worktree))?.root;
        if let Some(id) = options.request {
            if !options.write.is_empty() || options.network {
                return Err(PolicyError::RequestAndGrant { verb: "revoke", id }.into());
            }
            let record = self.worktrees.change_grants(&store, &root, |_, requests| {
                let r = open_request(&root, requests, id)?.clone();
                requests.open.retain(|o| o.id != id);
                let detail = format!("request {id} by {}: {}", r.by, words(&r.grant, r.once));
                Ok::<_, Error>(Some(entry("policy_deny", detail, user())))
            })?;
            return Ok(PolicyOutcome::of(record));
        }
        let asked = asked("revoke", options.write, options.network)?;
        let once = options.once;
        let kind = if once { "next-run " } else { "" };
        let record = self.worktrees.change_grants(&store, &root, |grants, _| {
            let set = if once {
                &mut grants.once
            } else {
                &mut grants.always
            };
            let missing = |what: String| PolicyError::NoSuchGrant {
                root: root.clone(),
                kind,
                what,
            };
            let mut taken = GrantSet::default();
            for path in &asked.writable {
                match set.writable.iter().position(|p| p == path) {
                    Some(i) => taken.writable.push(set.writable.remove(i)),
                    None => return Err(Error::from(missing(format!("to write {path}")))),
                }
            }
            if asked.network && !set.network {
                return Err(Error::from(missing("of the network".into())));
            }
            taken.network = asked.network;
            set.network &= !asked.network;
            Ok((!taken.is_empty()).then(|| entry("policy_revoke", words(&taken, once), user())))
        })?;
        Ok(PolicyOutcome::of(record))
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Take back grants of a worktree (with once: next-run-only grants), recorded in its op log; one that was not granted is an error.
    PolicyRevoke(PolicyRevokeOptions) -> PolicyOutcome = "policy_revoke" via policy_revoke [Route, Tool];
}

impl VerbSpec for verbs::PolicyRevoke {
    const EXAMPLE: Option<&'static str> =
        Some(r#"{"worktree": "wt", "network": true, "cwd": "/home/agent/project"}"#);
}
