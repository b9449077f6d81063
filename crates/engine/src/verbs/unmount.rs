//! `unmount`: a mounted worktree unmounted, its layer kept, or its files left as an ordinary
//! directory.

use camino::{Utf8Path, Utf8PathBuf};
use cas::SnapshotId;
use fs_manager::{RegistryRead, WorktreeKind};
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine};
use crate::error::Error;
use crate::mounts::{MountsError, claim_also, mount_error};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::{Access, Claim};

/// `cairn unmount DIR [--materialize]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UnmountOptions {
    /// The mounted worktree.
    #[schemars(with = "String")]
    pub dir: Utf8PathBuf,
    /// Leave an ordinary directory with the current files.
    #[serde(default)]
    pub materialize: bool,
}

/// An unmounted worktree.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UnmountOutcome {
    /// Its root.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// Its head.
    pub snapshot: Option<SnapshotId>,
    /// Whether its files are now an ordinary directory there.
    pub materialized: bool,
}

impl Engine {
    /// `cairn unmount DIR [--materialize]`. Calls for one directory run one after the
    /// other, and after any `mount` of it.
    pub fn unmount(&self, call: &Call, options: UnmountOptions) -> Result<UnmountOutcome, Error> {
        let dir = call.path(&options.dir);
        let mut claim = self.mounts.claim(&dir);
        self.unmount_claimed(&dir, options.materialize, &mut claim)
    }

    /// [`Engine::unmount`] of `dir`, claimed by the caller.
    pub(crate) fn unmount_claimed(
        &self,
        dir: &Utf8Path,
        materialize: bool,
        claim: &mut Claim<'_>,
    ) -> Result<UnmountOutcome, Error> {
        let dir = dir.to_owned();
        let root = if self.mounts.get(&dir).is_some() {
            dir.clone()
        } else {
            mount::clear_stale(&dir);
            crate::path::canonical_dir(&dir)?
        };
        claim_also(claim, &root)?;
        let store = self.store(Access::Write)?;
        let record = store
            .reader()?
            .worktree(&root)?
            .filter(|r| r.kind == WorktreeKind::Mounted)
            .ok_or_else(|| MountsError::NotAMount { root: root.clone() })?;
        let mounted = match self.mounts.get(&root) {
            Some(m) if m.is_live() => m,
            stale => {
                if stale.is_some() {
                    self.forget_mount(&root);
                }
                // What a server killed during a materialize left is finished or undone.
                if self.recover_materialize(&store, &record)? {
                    return Ok(UnmountOutcome {
                        worktree: root,
                        snapshot: record.head,
                        materialized: true,
                    });
                }
                if materialize {
                    return Err(MountsError::NotMounted { root }.into());
                }
                return Ok(UnmountOutcome {
                    worktree: root,
                    snapshot: record.head,
                    materialized: false,
                });
            }
        };
        if !materialize {
            mounted.unmount(false).map_err(mount_error)?;
            self.forget_mount(&root);
            return Ok(UnmountOutcome {
                worktree: root,
                snapshot: record.head,
                materialized: false,
            });
        }
        // The mount's files are copied into the directory it covers; unmounting shows them.
        mounted.materialize().map_err(mount_error)?;
        self.forget_mount(&root);
        self.finish_materialize(&store, &record)?;
        Ok(UnmountOutcome {
            worktree: root,
            snapshot: record.head,
            materialized: true,
        })
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Unmount a mounted worktree; its layer stays, so a later mount brings every change back. With materialize: leave an ordinary directory with the worktree's current files instead.
    Unmount(UnmountOptions) -> UnmountOutcome = "unmount" via unmount [Route, Tool];
}

impl VerbSpec for verbs::Unmount {
    const EXAMPLE: Option<&'static str> = Some(r#"{"dir": "/tmp/agent-1", "materialize": false}"#);
}
