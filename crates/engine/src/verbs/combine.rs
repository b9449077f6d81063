//! `combine`: several snapshots' changes merged into one new snapshot, inside the store.

use cas::{SnapshotId, TreeId};
use fs_manager::RegistryWrite as _;
use serde::{Deserialize, Serialize};

use crate::ancestry::{Named, base_of};
use crate::engine::{Call, Engine, resolve_snapshot};
use crate::error::{Code, Error};
use crate::git::GitCombine;
use crate::path::RawPath;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// `combine SNAP SNAP… [--base SNAP] [-m MSG]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CombineOptions {
    /// The snapshots whose changes to combine (at least two, each once); the new snapshot's
    /// parents, in this order.
    #[schemars(extend("x-snapshot" = true))]
    pub snapshots: Vec<String>,
    /// The common ancestor the changes are taken against (default: the snapshots' nearest
    /// common ancestor).
    #[serde(default)]
    #[schemars(extend("x-snapshot" = true))]
    pub base: Option<String>,
    /// The new snapshot's message (default: one naming the snapshots combined).
    #[serde(default)]
    pub message: Option<String>,
}

impl CombineOptions {
    /// Combine the changes of `snapshots`.
    pub fn new<S: Into<String>>(snapshots: impl IntoIterator<Item = S>) -> CombineOptions {
        CombineOptions {
            snapshots: snapshots.into_iter().map(Into::into).collect(),
            ..CombineOptions::default()
        }
    }

    /// The common ancestor.
    pub fn base(mut self, base: impl Into<String>) -> CombineOptions {
        self.base = Some(base.into());
        self
    }

    /// The new snapshot's message.
    pub fn message(mut self, message: impl Into<String>) -> CombineOptions {
        self.message = Some(message.into());
        self
    }
}

/// A path the snapshots' changes conflict on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CombineConflict {
    /// The path.
    pub path: RawPath,
    /// `content`, `add/add`, `modify/delete`, `type`, `rename`, `binary` (as `merge` says).
    pub kind: String,
    /// The snapshots that changed the path against the base, among those combined when it
    /// conflicted (in the order given).
    pub inputs: Vec<SnapshotId>,
}

/// What `combine` did: a new snapshot, or conflicts and nothing recorded (a refusal).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CombineOutcome {
    /// Whether a snapshot was recorded.
    pub combined: bool,
    /// The new snapshot.
    pub snapshot: Option<SnapshotId>,
    /// Its tree.
    pub tree: Option<TreeId>,
    /// Its parents: the snapshots combined, in the order given.
    pub parents: Vec<SnapshotId>,
    /// The common ancestor used.
    pub base: SnapshotId,
    /// Conflicting paths (none when combined).
    pub conflicts: Vec<CombineConflict>,
    /// The refusal, when nothing was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Why snapshots cannot be combined at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CombineError {
    /// Fewer than two snapshots.
    #[error("combine needs at least two snapshots, {given} given")]
    TooFew {
        /// How many were given.
        given: usize,
    },
    /// An engine opened without a git backend, whose merge combine uses.
    #[error("combine: this engine has no git support (it was opened without a git backend)")]
    NoGit,
}

crate::error::coded!(CombineError);

impl CombineError {
    /// Its code.
    pub fn code(&self) -> Code {
        match self {
            CombineError::TooFew { .. } => Code::Usage,
            CombineError::NoGit => Code::NoGit,
        }
    }
}

impl Engine {
    /// `cairn combine SNAP SNAP…`: the inputs' changes against the base merged with git's
    /// rules into one snapshot whose parents are the inputs, one input after the other onto
    /// the running result, each against the base. Touches no worktree and no git
    /// repository. With conflicts nothing is recorded; a clean result is kept for gc as an
    /// entry `combine` of the op log of the store's own folder (as `onboard --git` keeps its
    /// import), until `gc --keep-within` drops it: set a ref to keep it for good.
    pub fn combine(&self, call: &Call, options: CombineOptions) -> Result<CombineOutcome, Error> {
        if options.snapshots.len() < 2 {
            return Err(CombineError::TooFew {
                given: options.snapshots.len(),
            }
            .into());
        }
        let git = self.git().ok_or(CombineError::NoGit)?;
        let store = self.store(Access::Write)?;
        let (parents, base, base_tree, trees) = {
            let reader = store.reader()?;
            let named = options
                .snapshots
                .iter()
                .map(|spec| Ok((spec.as_str(), resolve_snapshot(&reader, &call.cwd, spec)?)))
                .collect::<Result<Vec<_>, Error>>()?;
            let base = match &options.base {
                Some(spec) => Some(resolve_snapshot(&reader, &call.cwd, spec)?),
                None => None,
            };
            let named = Named {
                verb: "combine",
                snapshots: &named,
                advice: "; name one with --base",
            };
            let base = base_of(&reader, &named, base)?;
            let parents: Vec<SnapshotId> = named.snapshots.iter().map(|&(_, id)| id).collect();
            let base_tree = reader.snapshot(base)?.tree;
            let trees = parents
                .iter()
                .map(|&id| Ok(reader.snapshot(id)?.tree))
                .collect::<Result<Vec<_>, Error>>()?;
            (parents, base, base_tree, trees)
        };
        let combined = git.combine(
            &store,
            &GitCombine {
                base: base_tree,
                inputs: &trees,
            },
        )?;
        let Some(tree) = combined.tree else {
            let conflicts: Vec<CombineConflict> = combined
                .conflicts
                .into_iter()
                .map(|(path, kind, inputs)| CombineConflict {
                    path: RawPath::from(path),
                    kind,
                    inputs: inputs
                        .into_iter()
                        .filter_map(|i| parents.get(i).copied())
                        .collect(),
                })
                .collect();
            let message = format!(
                "combining {} snapshots conflicts in {} path(s); nothing was recorded",
                parents.len(),
                conflicts.len()
            );
            return Ok(CombineOutcome {
                combined: false,
                snapshot: None,
                tree: None,
                parents,
                base,
                conflicts,
                message: Some(message),
            });
        };
        let message = options.message.unwrap_or_else(|| {
            let names: Vec<String> = parents.iter().map(|p| p.short(12)).collect();
            format!("combine of {}", names.join(", "))
        });
        let mut batch = combined.objects;
        let snapshot = batch.add_snapshot(cas::Snapshot {
            tree,
            parents: parents.clone(),
            created: jiff::Timestamp::now(),
            message,
            labels: Default::default(),
            source: None,
        });
        let op = fs_manager::OpRecord::new("combine", None, Some(snapshot));
        batch.append_op(store.root(), &op)?;
        store.write(&batch)?;
        Ok(CombineOutcome {
            combined: true,
            snapshot: Some(snapshot),
            tree: Some(tree),
            parents,
            base,
            conflicts: Vec::new(),
            message: None,
        })
    }
}

// What the verb of this module says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Merge several snapshots' changes against their base (default: their nearest common ancestor) into one new snapshot whose parents are they, in the order given, inside the store: no worktree or git repository changes. Three-way, with git's rules: with more than two, each is merged onto the running result against the base, one after the other. Any conflict (kinds as `merge` reports them) is a refusal listing each path with the snapshots that changed it, and nothing is recorded. Keep the result with a ref, or check it out.
    Combine(CombineOptions) -> CombineOutcome = "combine" via combine [Route, Tool];
}

impl VerbSpec for verbs::Combine {
    fn named_snapshots(options: &Self::Options) -> Vec<&str> {
        options
            .snapshots
            .iter()
            .map(String::as_str)
            .chain(options.base.as_deref())
            .collect()
    }

    fn refusal(outcome: &Self::Outcome) -> Option<&str> {
        outcome.message.as_deref()
    }

    const REFUSED: Option<&'static str> = Some(
        "A negative answer, nothing recorded: the snapshots' changes conflict (`conflicts`, each with the snapshots that changed the path); `message` says so.",
    );

    const EXAMPLE: Option<&'static str> = Some(
        r#"{"snapshots": ["attempt-1", "attempt-2"], "message": "both fixes", "cwd": "/home/agent/project"}"#,
    );
}
