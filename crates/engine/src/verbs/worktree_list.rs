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
    /// For a mounted worktree of a snapshot read from a remote, that remote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// For a live mount started with `--prefetch`, how far its prefetch is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefetch: Option<PrefetchItem>,
}

/// How far a mount's prefetch is: blobs and their bytes (decoded) fetched of those its
/// snapshot reaches that the store lacked.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PrefetchItem {
    /// Blobs fetched.
    pub objects_done: u64,
    /// Blobs to fetch.
    pub objects_total: u64,
    /// Bytes fetched.
    pub bytes_done: u64,
    /// Bytes to fetch.
    pub bytes_total: u64,
    /// Whether it ended (done, stopped or failed: the server's log says which).
    pub ended: bool,
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
                remote: r.mount_remote.clone(),
                prefetch: self.lazy.prefetch(&r.root).map(|p| {
                    use std::sync::atomic::Ordering::Acquire;
                    let p = &p.progress;
                    PrefetchItem {
                        objects_done: p.objects_done.load(Acquire),
                        objects_total: p.objects_total.load(Acquire),
                        bytes_done: p.bytes_done.load(Acquire),
                        bytes_total: p.bytes_total.load(Acquire),
                        ended: p.ended.load(Acquire),
                    }
                }),
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
    WorktreeList(WorktreeListOptions) -> WorktreeListOutcome = "worktree_list" via worktree_list [Route];
}

impl VerbSpec for verbs::WorktreeList {
    const READS_ONLY: bool = true;

    const EXAMPLE: Option<&'static str> = Some(r#"{}"#);
}
