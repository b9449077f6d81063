//! `cairn recover [DIR]`: finish an interrupted operation.

use cairn_engine::RecoverOptions;
use camino::Utf8PathBuf;

/// Finish an operation that was interrupted (nothing to do: exit 0).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The worktree (default: the one holding the current directory).
    dir: Option<Utf8PathBuf>,
}

impl From<Args> for RecoverOptions {
    fn from(args: Args) -> RecoverOptions {
        RecoverOptions { dir: args.dir }
    }
}
