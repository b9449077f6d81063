//! `policy [WORKTREE]`: a worktree's remembered sandbox grants and the requests waiting
//! for a person (see `crate::policy` for how granting works).

use camino::Utf8PathBuf;
use fs_manager::GrantSet;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, registered};
use crate::error::Error;
use crate::policy::{PolicyOutcome, entry, user, words};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// `policy [WORKTREE]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyOptions {
    /// The worktree (default: the caller's directory).
    #[serde(default)]
    #[schemars(with = "Option<String>", extend("x-default-cwd" = true))]
    pub worktree: Option<Utf8PathBuf>,
    /// Set by `cairn run` as a sandboxed run starts: the next-run grants are taken in the
    /// same transaction that reads them (logged `policy_spent`) and returned in `taken`,
    /// so two runs never both get them.
    #[serde(default)]
    #[schemars(extend("x-cli-only" = true))]
    pub take_once: bool,
}

impl Engine {
    /// `cairn policy [WORKTREE]`; with `take_once`, also takes the next-run grants.
    pub fn policy(&self, call: &Call, options: PolicyOptions) -> Result<PolicyOutcome, Error> {
        let dir = call.dir(options.worktree.as_deref());
        if options.take_once {
            let store = self.store(Access::Write)?;
            let root = registered(&store.reader()?, &dir)?.root;
            let mut taken = GrantSet::default();
            let record = self.worktrees.change_grants(&store, &root, |grants, _| {
                taken = std::mem::take(&mut grants.once);
                Ok::<_, Error>(
                    (!taken.is_empty()).then(|| entry("policy_spent", words(&taken, true), user())),
                )
            })?;
            return Ok(PolicyOutcome {
                taken: Some(taken),
                ..PolicyOutcome::of(record)
            });
        }
        let store = self.store(Access::Read)?;
        let record = registered(&store.reader()?, &dir)?;
        Ok(PolicyOutcome::of(record))
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// A worktree's remembered sandbox grants: the paths `cairn run` of it may write beyond the worktree, and whether it may use the network; `once` holds those for the next run only; `requests` lists the grants asked for that wait for a person. Reading is allowed everywhere.
    Policy(PolicyOptions) -> PolicyOutcome = "policy" via policy [Route, Tool];
}

impl VerbSpec for verbs::Policy {
    const EXAMPLE: Option<&'static str> =
        Some(r#"{"worktree": "wt", "cwd": "/home/agent/project"}"#);
}
