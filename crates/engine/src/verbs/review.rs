//! `review [DIR]`: a task's changes against its baseline.

use std::collections::HashMap;

use camino::Utf8PathBuf;
use cas::SnapshotId;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, registered};
use crate::error::Error;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;
use crate::view::{Detail, DiffOutcome, Side, compare};

/// `review [DIR]`: the task's changes against its baseline.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewOptions {
    /// The worktree directory.
    #[serde(default)]
    #[schemars(with = "Option<String>", extend("x-default-cwd" = true))]
    pub dir: Option<Utf8PathBuf>,
    /// How much to read.
    #[serde(default)]
    #[schemars(extend("x-cli-only" = true))]
    pub detail: Detail,
}

/// What `review` found.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReviewOutcome {
    /// The changes.
    #[serde(flatten)]
    pub changes: DiffOutcome,
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// The task's baseline.
    pub baseline: SnapshotId,
}

impl Engine {
    /// `cairn review [DIR]`.
    pub fn review(&self, call: &Call, options: ReviewOptions) -> Result<ReviewOutcome, Error> {
        let dir = call.dir(options.dir.as_deref());
        let store = self.store(Access::Read)?;
        let record = registered(&store.reader()?, &dir)?;
        let task = record.task.clone().ok_or_else(|| {
            Error::from(fs_manager::TaskError::NoTask {
                root: record.root.clone(),
            })
        })?;
        let live = self.worktrees.live_state(
            &store,
            &record.root,
            &fs_manager::CaptureOptions::default(),
        )?;
        let reader = store.reader()?;
        let base = Side {
            tree: reader.snapshot(task.baseline)?.tree,
            memory: HashMap::new(),
            root: None,
        };
        let now = Side {
            tree: live.tree,
            memory: live.trees,
            root: Some(live.root.clone()),
        };
        let changes = compare(&reader, &base, &now, &[], options.detail, false)?;
        Ok(ReviewOutcome {
            changes,
            worktree: record.root,
            baseline: task.baseline,
        })
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// The task's changes against its baseline (the first checkpoint).
    Review(ReviewOptions) -> ReviewOutcome = "review" via review [Route, Tool];
}

impl VerbSpec for verbs::Review {
    const READS_ONLY: bool = true;

    const EXAMPLE: Option<&'static str> = Some(r#"{"dir": "wt", "cwd": "/home/agent/project"}"#);
}
