//! `worktree list|remove|rebind`: the subcommands.

use camino::Utf8PathBuf;
use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum WorktreeAction {
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
