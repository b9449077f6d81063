//! `cairn push [SNAPSHOTS]`: copy snapshots to a remote.

use cairn_engine::PushOptions;

/// Copy snapshots (with their history) to a remote, sending only what it lacks; a ref
/// also sets REF@REMOTE if it still holds what this store last saw there. No argument:
/// every local ref.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshots or refs.
    snapshots: Vec<String>,
    /// The remote (default: origin).
    #[arg(long, value_name = "NAME")]
    remote: Option<String>,
}

impl From<Args> for PushOptions {
    fn from(args: Args) -> PushOptions {
        PushOptions {
            snapshots: args.snapshots,
            remote: args.remote,
        }
    }
}
