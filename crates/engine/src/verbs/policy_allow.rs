//! `policy allow`: grants a person confirmed, checked and remembered, or an open request
//! granted.

use camino::{Utf8Path, Utf8PathBuf};
use fs_manager::GrantSet;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, registered};
use crate::error::{Error, IoError};
use crate::policy::{
    MAX_REASON, PolicyError, PolicyOutcome, asked, bounded, check_writable, entry, open_request,
    user, words,
};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;
use crate::verbs::policy_request::PolicyRequestOptions;

/// `policy allow WORKTREE (--write PATH… | --network | --request ID) [--once] [--yes]
/// [--confirm PATH]…`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyAllowOptions {
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// Absolute, existing, canonical paths to make writable.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub write: Vec<Utf8PathBuf>,
    /// Allow TCP bind and connect.
    #[serde(default)]
    pub network: bool,
    /// For the next run only.
    #[serde(default)]
    pub once: bool,
    /// A person confirmed the grant (asked on a terminal, `--yes`, or MCP elicitation).
    #[serde(default)]
    #[schemars(extend("x-cli-only" = true))]
    pub yes: bool,
    /// Paths the person named again: every system directory or credentials path granted
    /// must be among them.
    #[serde(default)]
    #[schemars(with = "Vec<String>", extend("x-cli-only" = true))]
    pub confirm: Vec<Utf8PathBuf>,
    /// Grant what the open request of this number asks for (instead of `write`,
    /// `network` and `once`), and close it.
    #[serde(default)]
    #[schemars(extend("x-cli-only" = true))]
    pub request: Option<u64>,
    /// Why the grant is needed, shown to the person who decides (at most 1000 bytes).
    #[serde(default)]
    pub reason: Option<String>,
}

impl PolicyAllowOptions {
    /// What a `policy_allow` from an agent (MCP, HTTP) becomes: a request asked by `by`.
    /// Granting a listed request is a person's decision, so naming one is refused.
    pub fn into_request(self, by: String) -> Result<PolicyRequestOptions, Error> {
        if let Some(id) = self.request {
            return Err(PolicyError::RequestIsAPersons {
                worktree: self.worktree,
                id,
            }
            .into());
        }
        Ok(PolicyRequestOptions {
            worktree: self.worktree,
            write: self.write,
            network: self.network,
            once: self.once,
            reason: self.reason,
            by,
        })
    }
}

impl Engine {
    /// `cairn policy allow`: validates grants a person confirmed and remembers them, logged
    /// as `policy_allow`; with `request`, grants an open request and closes it.
    pub fn policy_allow(
        &self,
        call: &Call,
        options: PolicyAllowOptions,
    ) -> Result<PolicyOutcome, Error> {
        bounded("reason", options.reason.as_deref(), MAX_REASON)?;
        let store = self.store(Access::Write)?;
        let root = registered(&store.reader()?, &call.path(&options.worktree))?.root;
        let (what, once, request) = match options.request {
            Some(id) => {
                if !options.write.is_empty() || options.network {
                    return Err(PolicyError::RequestAndGrant { verb: "allow", id }.into());
                }
                let record = registered(&store.reader()?, &root)?;
                let request = open_request(&root, &record.requests, id)?.clone();
                (request.grant.clone(), request.once, Some(request))
            }
            None => (
                asked("allow", options.write.clone(), options.network)?,
                options.once,
                None,
            ),
        };
        let store_dir = std::fs::canonicalize(store.root().as_std_path())
            .map_err(|e| IoError::new(store.root(), e))?;
        let mut sensitive = Vec::new();
        for path in &what.writable {
            if let Some(why) = check_writable(path, &store_dir)? {
                sensitive.push((path.clone(), why));
            }
        }
        confirmed(&root, &what, once, &sensitive, &options)?;
        let mut detail = words(&what, once);
        if let Some(r) = &request {
            detail.push_str(&format!(" (request {} by {})", r.id, r.by));
        }
        if let Some(reason) = &options.reason {
            detail.push_str(&format!(": {reason}"));
        }
        let record = self
            .worktrees
            .change_grants(&store, &root, |grants, requests| {
                if let Some(r) = &request {
                    // Still open: not denied since it was read (its number is never reused).
                    open_request(&root, requests, r.id)?;
                    requests.open.retain(|o| o.id != r.id);
                }
                let set = if once {
                    &mut grants.once
                } else {
                    &mut grants.always
                };
                let mut added = GrantSet::default();
                for path in &what.writable {
                    if !set.writable.contains(path) {
                        set.writable.push(path.clone());
                        added.writable.push(path.clone());
                    }
                }
                added.network = what.network && !set.network;
                set.network |= what.network;
                Ok::<_, Error>(
                    (!added.is_empty() || request.is_some())
                        .then(|| entry("policy_allow", detail, user())),
                )
            })?;
        Ok(PolicyOutcome::of(record))
    }
}

/// Refuses a grant the person did not confirm, or a system directory or credentials path
/// they did not name.
fn confirmed(
    root: &Utf8Path,
    what: &GrantSet,
    once: bool,
    sensitive: &[(Utf8PathBuf, path_policy::Sensitive)],
    options: &PolicyAllowOptions,
) -> Result<(), Error> {
    for named in &options.confirm {
        if !what.writable.contains(named) {
            return Err(PolicyError::ConfirmsNothing {
                path: named.clone(),
            }
            .into());
        }
    }
    if !options.yes {
        return Err(PolicyError::NotConfirmed {
            root: root.to_owned(),
            grant: words(what, once),
        }
        .into());
    }
    if let Some((path, why)) = sensitive
        .iter()
        .find(|(path, _)| !options.confirm.contains(path))
    {
        return Err(PolicyError::NotNamed {
            path: path.clone(),
            why: why.clone(),
        }
        .into());
    }
    Ok(())
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Ask for a grant: writing beneath paths, or the network, for every later `cairn run` of a worktree (or, with once, the next one only). Granting is the user's decision: this records a request (who asked, what, why) that `cairn policy` lists and a person grants or denies on a terminal; an MCP client that supports elicitation asks its user at once. Ask for exactly what a run's `denied` listed, and say why. A path must be absolute, existing and canonical, never the store's folder; /proc, /sys and /dev are never granted; system directories and the user's credentials are granted only when the person names them.
    PolicyAllow(PolicyAllowOptions) -> PolicyOutcome = "policy_allow" via policy_allow [Route, Tool];
}

impl VerbSpec for verbs::PolicyAllow {
    const EXAMPLE: Option<&'static str> =
        Some(r#"{"worktree": "wt", "write": ["/home/agent/cache"], "cwd": "/home/agent/project"}"#);
}
