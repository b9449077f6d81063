//! `worktree rebind PATH`: a moved worktree registered at its new root.

use crate::engine::{Call, Engine};
use crate::error::Error;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;
use crate::worktrees::{WorktreePathOptions, WorktreesChanged};

impl Engine {
    /// `cairn worktree rebind PATH`: the worktree's root is the directory there now.
    pub fn worktree_rebind(
        &self,
        call: &Call,
        options: WorktreePathOptions,
    ) -> Result<WorktreesChanged, Error> {
        let store = self.store(Access::Write)?;
        let record = self.worktrees.rebind(&store, &call.path(&options.path))?;
        Ok(WorktreesChanged::one(record))
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Register a moved worktree at its new path.
    WorktreeRebind(WorktreePathOptions) -> WorktreesChanged = "worktree_rebind" via worktree_rebind [];
}

impl VerbSpec for verbs::WorktreeRebind {}
