//! `discard [DIR] [-- PATH…]`: a task's changes put back.

use camino::Utf8PathBuf;
use cas::SnapshotId;
use path_policy::RepoPathBuf;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, registered};
use crate::error::Error;
use crate::path::{PathArg, tree_paths};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;
use crate::worktrees::{SkippedPath, skipped};

/// `discard [DIR] [--yes] [-- PATH…]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiscardOptions {
    /// The worktree (default: the caller's directory).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub dir: Option<Utf8PathBuf>,
    /// Only these paths.
    #[serde(default)]
    pub paths: Vec<PathArg>,
    /// Discarding every change is confirmed.
    #[serde(default)]
    pub yes: bool,
}

/// What `discard` put back.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DiscardOutcome {
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// The paths put back to the baseline.
    pub discarded: Vec<RepoPathBuf>,
    /// The baseline.
    pub snapshot: SnapshotId,
    /// The live state captured first.
    pub captured: SnapshotId,
    /// Paths left out.
    pub skipped: Vec<SkippedPath>,
    /// Whether the task ended.
    pub task_ended: bool,
}

impl Engine {
    /// `cairn discard [DIR] [-- PATH…]`: discarding everything needs `yes`, else the call
    /// fails with [`DiscardError::ConfirmationNeeded`](crate::DiscardError) before changing anything.
    pub fn discard(&self, call: &Call, options: DiscardOptions) -> Result<DiscardOutcome, Error> {
        let dir = call.dir(options.dir.as_deref());
        let store = self.store(Access::Write)?;
        let record = registered(&store.reader()?, &dir)?;
        let paths = tree_paths(Some(&record.root), &options.paths)?;
        if paths.is_empty() && !options.yes {
            return Err(
                crate::error::DiscardError::ConfirmationNeeded { root: record.root }.into(),
            );
        }
        let rollback = fs_manager::WorktreeRollbackOptions {
            paths: &paths,
            progress: call.progress,
            ..fs_manager::WorktreeRollbackOptions::default()
        };
        let out = self.worktrees.discard(&store, &record.root, &rollback)?;
        Ok(DiscardOutcome {
            worktree: out.restored.root,
            discarded: out.discarded.clone(),
            snapshot: out.restored.snapshot,
            captured: out.restored.captured,
            skipped: skipped(&out.restored.skipped),
            task_ended: paths.is_empty(),
        })
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Discard the task's changes (or only the given paths): the worktree goes back to the baseline.
    Discard(DiscardOptions) -> DiscardOutcome = "discard" via discard [Route];
}

impl VerbSpec for verbs::Discard {
    const EXAMPLE: Option<&'static str> =
        Some(r#"{"dir": "wt", "paths": ["src/lib.rs"], "cwd": "/home/agent/project"}"#);
}
