//! What the worktree verbs share: the paths a capture skips, a directory's git state, and
//! what `worktree remove` and `worktree rebind` take and answer.

use camino::Utf8PathBuf;
use cas::SnapshotId;
use serde::{Deserialize, Serialize};

use crate::path::RawPath;

/// A path left out of a capture, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SkippedPath {
    /// From the worktree root.
    pub path: RawPath,
    /// Why.
    pub reason: String,
    /// For a path a deny pattern matched (a secret such as `.env`): the pattern.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied_by: Option<String>,
}

pub(crate) fn skipped(list: &[fs_manager::Skipped]) -> Vec<SkippedPath> {
    list.iter()
        .map(|s| SkippedPath {
            path: RawPath::from(s.path.clone()),
            reason: s.reason.to_string(),
            denied_by: match &s.reason {
                fs_manager::SkipReason::Denied { pattern } => Some(pattern.clone()),
                _ => None,
            },
        })
        .collect()
}

/// The git state of a captured directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GitState {
    /// The commit checked out.
    pub git_commit: String,
    /// Whether the files differed from it.
    pub dirty: bool,
}

/// `worktree remove` / `worktree rebind`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorktreePathOptions {
    /// The worktree's root.
    #[schemars(with = "String")]
    pub path: Utf8PathBuf,
}

/// A worktree and its head.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorktreeHead {
    /// Its root.
    #[schemars(with = "String")]
    pub path: Utf8PathBuf,
    /// Its head.
    pub head: Option<SnapshotId>,
}

/// The worktree removed or rebound.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorktreesChanged {
    /// It.
    pub worktrees: Vec<WorktreeHead>,
}

impl WorktreesChanged {
    pub(crate) fn one(record: fs_manager::WorktreeRecord) -> WorktreesChanged {
        WorktreesChanged {
            worktrees: vec![WorktreeHead {
                path: record.root,
                head: record.head,
            }],
        }
    }
}

pub(crate) use crate::path::canonical_dir;
