//! `cairn pull [SNAPSHOTS]`: copy snapshots from a remote.

use cairn_engine::PullOptions;

/// Copy snapshots (with their history) from a remote, verifying every object; updates
/// NAME@REMOTE, never a local ref. No argument: every remote ref.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot ids or the remote's refs.
    snapshots: Vec<String>,
    /// The remote (default: origin).
    #[arg(long, value_name = "NAME")]
    remote: Option<String>,
}

impl From<Args> for PullOptions {
    fn from(args: Args) -> PullOptions {
        PullOptions {
            snapshots: args.snapshots,
            remote: args.remote,
        }
    }
}
