//! `status [WORKTREE]`: a worktree's changes since its head snapshot.

use camino::Utf8PathBuf;
use cas::{SnapshotId, Tree};
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine};
use crate::error::Error;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;
use crate::view::{Detail, DiffOutcome, Side, compare};
use crate::worktrees::{SkippedPath, skipped};

/// `status [WORKTREE]`: changes since the head snapshot.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusOptions {
    /// The worktree directory.
    #[serde(default)]
    #[schemars(with = "Option<String>", extend("x-default-cwd" = true))]
    pub worktree: Option<Utf8PathBuf>,
}

/// What `status` found.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StatusOutcome {
    /// The changes.
    #[serde(flatten)]
    pub changes: DiffOutcome,
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// Its head.
    pub head: Option<SnapshotId>,
    /// Paths left out.
    pub skipped: Vec<SkippedPath>,
}

impl Engine {
    /// `cairn status [WORKTREE]`.
    pub fn status(&self, call: &Call, options: StatusOptions) -> Result<StatusOutcome, Error> {
        let store = self.store(Access::Read)?;
        let path = call.dir(options.worktree.as_deref());
        let live =
            self.worktrees
                .live_state(&store, &path, &fs_manager::CaptureOptions::default())?;
        let reader = store.reader()?;
        let empty = Tree::default();
        let base = match live.head {
            Some(h) => Side::stored(reader.snapshot(h)?.tree),
            None => Side {
                tree: empty.id(),
                memory: [(empty.id(), empty.clone())].into(),
                root: None,
            },
        };
        let now = Side {
            tree: live.tree,
            memory: live.trees,
            root: Some(live.root.clone()),
        };
        let changes = compare(&reader, &base, &now, &[], Detail::Counts, false)?;
        Ok(StatusOutcome {
            changes,
            worktree: live.root,
            head: live.head,
            skipped: skipped(&live.skipped),
        })
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Changes in a worktree since its head snapshot.
    Status(StatusOptions) -> StatusOutcome = "status" via status [Route, Tool];
}

impl VerbSpec for verbs::Status {
    const READS_ONLY: bool = true;

    const EXAMPLE: Option<&'static str> =
        Some(r#"{"worktree": "wt", "cwd": "/home/agent/project"}"#);
}
