//! `rewind [DIR] [--to SNAP]`: a worktree rolled back to a checkpoint.

use camino::Utf8PathBuf;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, registered, resolve_in};
use crate::error::Error;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;
use crate::verbs::rollback::RollbackOutcome;

/// `rewind [DIR] [--to SNAP] [--dry-run]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RewindOptions {
    /// The worktree directory.
    #[serde(default)]
    #[schemars(with = "Option<String>", extend("x-default-cwd" = true))]
    pub dir: Option<Utf8PathBuf>,
    /// Checkpoint name, ref or snapshot id prefix.
    #[serde(default)]
    #[schemars(extend("x-snapshot" = true))]
    pub to: Option<String>,
    /// Only list what would change.
    #[serde(default)]
    pub dry_run: bool,
}

impl Engine {
    /// `cairn rewind [DIR] [--to SNAP] [--dry-run]`.
    pub fn rewind(&self, call: &Call, options: RewindOptions) -> Result<RollbackOutcome, Error> {
        let dir = call.dir(options.dir.as_deref());
        let store = self.store(Access::Write)?;
        let target = {
            let reader = store.reader()?;
            let record = registered(&reader, &dir)?;
            options
                .to
                .as_deref()
                .map(|spec| resolve_in(&reader, &record, spec))
                .transpose()?
        };
        let rollback = fs_manager::WorktreeRollbackOptions {
            dry_run: options.dry_run,
            progress: call.progress,
            ..fs_manager::WorktreeRollbackOptions::default()
        };
        let out = self.worktrees.rewind(&store, &dir, target, &rollback)?;
        Ok(RollbackOutcome::of(&out, options.dry_run))
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Roll the worktree back to a checkpoint (default: the latest); later checkpoints stay reachable.
    Rewind(RewindOptions) -> RollbackOutcome = "rewind" via rewind [Route, Tool];
}

impl VerbSpec for verbs::Rewind {
    fn named_snapshots(options: &Self::Options) -> Vec<&str> {
        options.to.as_deref().into_iter().collect()
    }

    const EXAMPLE: Option<&'static str> =
        Some(r#"{"dir": "wt", "to": "base", "dry_run": true, "cwd": "/home/agent/project"}"#);
}
