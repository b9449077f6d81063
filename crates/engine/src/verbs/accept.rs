//! `accept [DIR] [-- PATH…]`: a task's changes kept.

use camino::Utf8PathBuf;
use cas::SnapshotId;
use path_policy::RepoPathBuf;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, registered};
use crate::error::Error;
use crate::path::{PathArg, tree_paths};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// `accept [DIR] [-- PATH…]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AcceptOptions {
    /// The worktree (default: the caller's directory).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub dir: Option<Utf8PathBuf>,
    /// Only these paths.
    #[serde(default)]
    pub paths: Vec<PathArg>,
}

/// What `accept` kept.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AcceptOutcome {
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// The paths accepted.
    pub accepted: Vec<RepoPathBuf>,
    /// The task's baseline now (none: the task ended).
    pub baseline: Option<SnapshotId>,
    /// Whether the task ended.
    pub task_ended: bool,
}

impl Engine {
    /// `cairn accept [DIR] [-- PATH…]`.
    pub fn accept(&self, call: &Call, options: AcceptOptions) -> Result<AcceptOutcome, Error> {
        let dir = call.dir(options.dir.as_deref());
        let store = self.store(Access::Write)?;
        let record = registered(&store.reader()?, &dir)?;
        let paths = tree_paths(Some(&record.root), &options.paths)?;
        let out = self.worktrees.accept(
            &store,
            &record.root,
            &paths,
            &fs_manager::CaptureOptions::default(),
        )?;
        Ok(AcceptOutcome {
            worktree: out.root,
            accepted: out.accepted.clone(),
            baseline: out.baseline,
            task_ended: out.baseline.is_none(),
        })
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Accept the task's changes (or only the given paths): the baseline moves forward to them.
    Accept(AcceptOptions) -> AcceptOutcome = "accept" via accept [Route];
}

impl VerbSpec for verbs::Accept {
    const EXAMPLE: Option<&'static str> =
        Some(r#"{"dir": "wt", "paths": ["src/lib.rs"], "cwd": "/home/agent/project"}"#);
}
