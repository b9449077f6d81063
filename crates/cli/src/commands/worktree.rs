//! `cairn worktree list|remove|rebind`: the worktree registry.

use cairn_engine::{Request, WorktreeListOptions, WorktreePathOptions};
use camino::Utf8PathBuf;
use clap::Subcommand;

/// The worktree registry.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    action: WorktreeAction,
}

#[derive(Subcommand, Debug)]
enum WorktreeAction {
    /// List registered worktrees.
    List,
    /// Forget a worktree (its files are left as they are).
    Remove {
        /// The worktree's root.
        path: Utf8PathBuf,
    },
    /// Accept that a worktree's root is now another directory (moved, restored, replaced);
    /// every file is read afresh at the next capture.
    Rebind {
        /// The worktree's root.
        path: Utf8PathBuf,
    },
}

impl Args {
    pub fn request(self) -> Request {
        match self.action {
            WorktreeAction::List => Request::WorktreeList(WorktreeListOptions {}),
            WorktreeAction::Remove { path } => {
                Request::WorktreeRemove(WorktreePathOptions { path })
            }
            WorktreeAction::Rebind { path } => {
                Request::WorktreeRebind(WorktreePathOptions { path })
            }
        }
    }
}
