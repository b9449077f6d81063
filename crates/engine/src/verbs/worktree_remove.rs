//! `worktree remove PATH`: a worktree forgotten (its files stay).

use crate::engine::{Call, Engine};
use crate::error::Error;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;
use crate::worktrees::{WorktreePathOptions, WorktreesChanged};

impl Engine {
    /// `cairn worktree remove PATH`: forget a worktree (its files stay).
    pub fn worktree_remove(
        &self,
        call: &Call,
        options: WorktreePathOptions,
    ) -> Result<WorktreesChanged, Error> {
        let path = call.path(&options.path);
        // No `mount` of it meanwhile attaches the layer this removes.
        let mut claim = self.mounts.claim(&path);
        if self.is_mounted(&path) {
            self.unmount_claimed(&path, false, &mut claim)?;
        }
        let store = self.store(Access::Write)?;
        let record = self.worktrees.remove(&store, &path)?;
        if record.kind == fs_manager::WorktreeKind::Mounted {
            self.drop_layer(&record.root);
        }
        Ok(WorktreesChanged::one(record))
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Forget a worktree (its files stay).
    WorktreeRemove(WorktreePathOptions) -> WorktreesChanged = "worktree_remove" via worktree_remove [];
}

impl VerbSpec for verbs::WorktreeRemove {}
