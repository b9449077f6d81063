//! `policy [WORKTREE]`, `policy allow`, `policy revoke`: the subcommands.

use camino::Utf8PathBuf;
use clap::{Args, Subcommand};

#[derive(Subcommand, Debug)]
pub enum PolicyAction {
    /// Remember a grant for every later `cairn run` of the worktree (or, with --once, the
    /// next one only). A path must be absolute, existing and canonical, never the store's
    /// folder. Recorded in the op log.
    Allow {
        #[command(flatten)]
        grant: Grant,
        /// Confirm a grant that opens `/` or $HOME whole.
        #[arg(long)]
        yes: bool,
    },
    /// Take a remembered grant back (with --once: a next-run-only grant), as it was
    /// granted. Recorded in the op log.
    Revoke {
        #[command(flatten)]
        grant: Grant,
    },
}

/// The grants `allow` and `revoke` name.
#[derive(Args, Debug)]
pub struct Grant {
    /// The worktree.
    pub worktree: Utf8PathBuf,
    /// Writing beneath PATH (repeatable).
    #[arg(long, value_name = "PATH", required_unless_present = "network")]
    pub write: Vec<Utf8PathBuf>,
    /// TCP bind and connect.
    #[arg(long)]
    pub network: bool,
    /// For the next run only.
    #[arg(long)]
    pub once: bool,
}
