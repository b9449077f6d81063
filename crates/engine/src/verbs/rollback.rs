//! `rollback WORKTREE SNAP`: a worktree's scope made equal to a snapshot.

use camino::Utf8PathBuf;
use cas::SnapshotId;
use path_policy::RepoPathBuf;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, registered, resolve_in};
use crate::error::Error;
use crate::path::{PathArg, tree_paths};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;
use crate::worktrees::{SkippedPath, skipped};

/// `rollback`: make a worktree's scope equal a snapshot.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RollbackOptions {
    /// The worktree directory.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// Snapshot id prefix, ref or checkpoint name.
    #[schemars(extend("x-snapshot" = true))]
    pub snapshot: String,
    /// Only list what would change.
    #[serde(default)]
    pub dry_run: bool,
    /// Paths relative to the worktree root.
    #[serde(default)]
    pub paths: Vec<PathArg>,
}

/// What `rollback` (or `rewind`) changed.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RollbackOutcome {
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// The snapshot rolled back to.
    pub snapshot: SnapshotId,
    /// The live state captured first.
    pub captured: SnapshotId,
    /// Files written.
    pub written: Vec<RepoPathBuf>,
    /// Files deleted.
    pub deleted: Vec<RepoPathBuf>,
    /// Paths left out.
    pub skipped: Vec<SkippedPath>,
    /// Whether nothing was changed.
    pub dry_run: bool,
}

impl RollbackOutcome {
    pub(crate) fn of(out: &fs_manager::WorktreeRollbackOutcome, dry_run: bool) -> RollbackOutcome {
        RollbackOutcome {
            worktree: out.root.clone(),
            snapshot: out.snapshot,
            captured: out.captured,
            written: out.written.clone(),
            deleted: out.deleted.clone(),
            skipped: skipped(&out.skipped),
            dry_run,
        }
    }
}

impl Engine {
    /// `cairn rollback WORKTREE SNAP [--dry-run] [-- PATH…]`.
    pub fn rollback(
        &self,
        call: &Call,
        options: RollbackOptions,
    ) -> Result<RollbackOutcome, Error> {
        let store = self.store(Access::Write)?;
        let worktree = call.path(&options.worktree);
        let reader = store.reader()?;
        let record = registered(&reader, &worktree)?;
        let target = resolve_in(&reader, &record, &options.snapshot)?;
        drop(reader);
        let paths = tree_paths(Some(&record.root), &options.paths)?;
        let rollback = fs_manager::WorktreeRollbackOptions {
            paths: &paths,
            dry_run: options.dry_run,
            progress: call.progress,
            ..fs_manager::WorktreeRollbackOptions::default()
        };
        let out = self
            .worktrees
            .rollback(&store, &record.root, target, &rollback)?;
        Ok(RollbackOutcome::of(&out, options.dry_run))
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Make a worktree equal a snapshot (only the given paths, if any). The live state is captured first, so `undo` brings it back.
    Rollback(RollbackOptions) -> RollbackOutcome = "rollback" via rollback [Route, Tool];
}

impl VerbSpec for verbs::Rollback {
    fn named_snapshots(options: &Self::Options) -> Vec<&str> {
        vec![&options.snapshot]
    }

    const EXAMPLE: Option<&'static str> = Some(
        r#"{"worktree": "wt", "snapshot": "base", "dry_run": true, "cwd": "/home/agent/project"}"#,
    );
}
