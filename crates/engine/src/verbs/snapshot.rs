//! `snapshot WORKTREE`: a new snapshot of a worktree, its parent the worktree's head.

use camino::Utf8PathBuf;
use cas::{SnapshotId, TreeId};
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, labels};
use crate::error::Error;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;
use crate::worktrees::{SkippedPath, skipped};

/// `snapshot`: a new snapshot of a worktree, parent = its head.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotOptions {
    /// The worktree directory.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// Snapshot message.
    #[serde(default)]
    pub message: Option<String>,
    /// `key=value` labels.
    #[serde(default)]
    #[schemars(extend("x-cli-only" = true))]
    pub labels: Vec<String>,
}

impl SnapshotOptions {
    /// Snapshot `worktree`.
    pub fn new(worktree: impl Into<Utf8PathBuf>) -> SnapshotOptions {
        SnapshotOptions {
            worktree: worktree.into(),
            ..SnapshotOptions::default()
        }
    }

    /// With this message.
    pub fn message(mut self, message: impl Into<String>) -> SnapshotOptions {
        self.message = Some(message.into());
        self
    }
}

/// What `snapshot` made.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SnapshotOutcome {
    /// The snapshot (the head, if nothing changed).
    pub snapshot: SnapshotId,
    /// Its tree.
    pub tree: TreeId,
    /// Its parent.
    pub parent: Option<SnapshotId>,
    /// Whether anything changed.
    pub changed: bool,
    /// Files added.
    pub added: u64,
    /// Files modified.
    pub modified: u64,
    /// Files removed.
    pub removed: u64,
    /// Paths left out.
    pub skipped: Vec<SkippedPath>,
}

impl SnapshotOutcome {
    /// The outcome of the capture `out`.
    pub(crate) fn of(out: &fs_manager::CaptureOutcome) -> SnapshotOutcome {
        SnapshotOutcome {
            snapshot: out.snapshot,
            tree: out.tree,
            parent: out.parent,
            changed: out.changed,
            added: out.added,
            modified: out.modified,
            removed: out.removed,
            skipped: skipped(&out.skipped),
        }
    }
}

impl Engine {
    /// `cairn snapshot WORKTREE`.
    pub fn snapshot(
        &self,
        call: &Call,
        options: SnapshotOptions,
    ) -> Result<SnapshotOutcome, Error> {
        let labels = labels(&options.labels)?;
        let store = self.store(Access::Create)?;
        let capture = fs_manager::CaptureOptions {
            message: options.message.as_deref().unwrap_or(""),
            labels: &labels,
            progress: call.progress,
            ..fs_manager::CaptureOptions::default()
        };
        let out = self
            .worktrees
            .snapshot(&store, &call.path(&options.worktree), &capture)?;
        Ok(SnapshotOutcome::of(&out))
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Snapshot a worktree: a new immutable snapshot whose parent is its head (changed: false if nothing changed). Returns the snapshot id to pass to other agents.
    Snapshot(SnapshotOptions) -> SnapshotOutcome = "snapshot" via snapshot [Route, Tool];
}

impl VerbSpec for verbs::Snapshot {
    const EXAMPLE: Option<&'static str> = Some(
        r#"{"worktree": "wt", "message": "before the refactor", "cwd": "/home/agent/project"}"#,
    );
}
