//! `cairn unmount DIR`: unmount a mounted worktree.

use cairn_engine::UnmountOptions;
use camino::Utf8PathBuf;

/// Unmount a mounted worktree (its layer stays for the next `mount`).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The mounted worktree.
    dir: Utf8PathBuf,
    /// Leave an ordinary directory with the worktree's current files instead.
    #[arg(long)]
    materialize: bool,
}

impl From<Args> for UnmountOptions {
    fn from(args: Args) -> UnmountOptions {
        UnmountOptions {
            dir: args.dir,
            materialize: args.materialize,
        }
    }
}
