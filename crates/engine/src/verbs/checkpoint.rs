//! `checkpoint [DIR] [--name NAME]`: a directory snapshotted onto its checkpoints.

use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine};
use crate::error::Error;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;
use crate::verbs::snapshot::SnapshotOutcome;

/// `checkpoint [DIR] [--name NAME]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointOptions {
    /// The directory.
    #[serde(default)]
    #[schemars(with = "Option<String>", extend("x-default-cwd" = true))]
    pub dir: Option<Utf8PathBuf>,
    /// A name for the checkpoint.
    #[serde(default)]
    pub name: Option<String>,
    /// Snapshot message.
    #[serde(default)]
    #[schemars(extend("x-cli-only" = true))]
    pub message: Option<String>,
    /// Leave out files larger than this (when it onboards the directory).
    #[serde(default, deserialize_with = "crate::engine::whole_number::deserialize")]
    #[schemars(extend("x-cli-only" = true))]
    pub max_file_size: Option<u64>,
}

/// What `checkpoint` made.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckpointOutcome {
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// The snapshot it took, with `snapshot`'s fields.
    #[serde(flatten)]
    pub capture: SnapshotOutcome,
    /// Its name.
    pub name: Option<String>,
    /// Whether the directory was onboarded by it.
    pub onboarded: bool,
    /// Whether it started a task.
    pub task_started: bool,
}

impl Engine {
    /// `cairn checkpoint [DIR] [--name NAME]`.
    pub fn checkpoint(
        &self,
        call: &Call,
        options: CheckpointOptions,
    ) -> Result<CheckpointOutcome, Error> {
        let dir = call.dir(options.dir.as_deref());
        let store = self.store(Access::Create)?;
        let name = options.name.as_deref();
        let source = |dir: &Utf8Path| self.git().and_then(|g| g.source(dir));
        let message = options.message.clone().unwrap_or_else(|| {
            format!(
                "checkpoint{}",
                name.map(|n| format!(" {n}")).unwrap_or_default()
            )
        });
        let checkpoint = fs_manager::WorktreeCheckpointOptions {
            name,
            capture: fs_manager::CaptureOptions {
                message: &message,
                progress: call.progress,
                ..fs_manager::CaptureOptions::default()
            },
            max_file_size: options.max_file_size,
            git: self
                .git()
                .is_some()
                .then_some(&source as fs_manager::GitProbe),
        };
        let out = self.worktrees.checkpoint(&store, &dir, &checkpoint)?;
        Ok(CheckpointOutcome {
            capture: SnapshotOutcome::of(&out.snapshot),
            worktree: out.snapshot.root,
            name: out.name,
            onboarded: out.onboarded,
            task_started: out.task_started,
        })
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Snapshot a directory onto its checkpoint stack, optionally named (onboards it in place if new; nothing git owns is touched). The first checkpoint starts a task.
    Checkpoint(CheckpointOptions) -> CheckpointOutcome = "checkpoint" via checkpoint [Route, Tool];
}

impl VerbSpec for verbs::Checkpoint {
    const EXAMPLE: Option<&'static str> =
        Some(r#"{"dir": "wt", "name": "green", "cwd": "/home/agent/project"}"#);
}
