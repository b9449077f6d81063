//! `policy [WORKTREE]`, `policy allow`, `policy revoke`: the subcommands.

use camino::Utf8PathBuf;
use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum PolicyAction {
    /// Remember a grant for every later `cairn run` of the worktree (or, with --once, the
    /// next one only). Recorded in the op log.
    Allow {
        /// The worktree.
        worktree: Utf8PathBuf,
        /// Allow writing beneath PATH: absolute, existing, canonical, never the store's
        /// folder (repeatable).
        #[arg(long, value_name = "PATH", required_unless_present = "network")]
        write: Vec<Utf8PathBuf>,
        /// Allow TCP bind and connect.
        #[arg(long)]
        network: bool,
        /// For the next run only.
        #[arg(long)]
        once: bool,
        /// Confirm a grant that opens `/` or $HOME whole.
        #[arg(long)]
        yes: bool,
    },
    /// Take a remembered grant back (with --once: a next-run-only grant). Recorded in the
    /// op log.
    Revoke {
        /// The worktree.
        worktree: Utf8PathBuf,
        /// The writable path, as granted (repeatable).
        #[arg(long, value_name = "PATH", required_unless_present = "network")]
        write: Vec<Utf8PathBuf>,
        /// The network.
        #[arg(long)]
        network: bool,
        /// A next-run-only grant.
        #[arg(long)]
        once: bool,
    },
}
