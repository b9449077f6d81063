//! `worktree list`: the worktrees the store knows.

use camino::Utf8PathBuf;
use cas::SnapshotId;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine};
use crate::error::Error;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// `worktree list`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorktreeListOptions {}

/// A registered worktree.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorktreeItem {
    /// Its root.
    #[schemars(with = "String")]
    pub path: Utf8PathBuf,
    /// `in-place`, `isolated` or `mounted`.
    pub kind: String,
    /// Its head.
    pub head: Option<SnapshotId>,
    /// For a mounted worktree, whether its mount is live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<bool>,
    /// For a mounted worktree, whether it is mounted read-only (`mount --read-only`, kept
    /// for every attach).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
}

/// The registry.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorktreeListOutcome {
    /// Every worktree.
    pub worktrees: Vec<WorktreeItem>,
}

impl Engine {
    /// `cairn worktree list`.
    pub fn worktree_list(
        &self,
        _call: &Call,
        _options: WorktreeListOptions,
    ) -> Result<WorktreeListOutcome, Error> {
        let store = self.store(Access::Read)?;
        let records = fs_manager::list_worktrees(&store)?;
        let worktrees = records
            .into_iter()
            .map(|r| WorktreeItem {
                kind: match r.kind {
                    fs_manager::WorktreeKind::InPlace => "in-place",
                    fs_manager::WorktreeKind::Isolated => "isolated",
                    fs_manager::WorktreeKind::Mounted => "mounted",
                }
                .to_owned(),
                live: (r.kind == fs_manager::WorktreeKind::Mounted)
                    .then(|| self.is_mounted(&r.root)),
                read_only: (r.kind == fs_manager::WorktreeKind::Mounted)
                    .then_some(r.mount_read_only),
                path: r.root,
                head: r.head,
            })
            .collect();
        Ok(WorktreeListOutcome { worktrees })
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// The worktrees the store knows.
    WorktreeList(WorktreeListOptions) -> WorktreeListOutcome = "worktree_list" via worktree_list [];
}

impl VerbSpec for verbs::WorktreeList {}
