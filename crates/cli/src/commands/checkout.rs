//! `cairn checkout SNAP DEST`: hydrate a snapshot into a new worktree.

use cairn_engine::CheckoutOptions;
use camino::Utf8PathBuf;

/// Hydrate a snapshot into a new or empty directory and register it as a worktree.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The snapshot (ref name or id prefix).
    snapshot: String,
    /// The destination directory.
    dest: Utf8PathBuf,
}

impl From<Args> for CheckoutOptions {
    fn from(args: Args) -> CheckoutOptions {
        CheckoutOptions {
            snapshot: args.snapshot,
            dest: args.dest,
        }
    }
}
