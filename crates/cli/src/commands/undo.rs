//! `cairn undo [DIR]`: revert the newest change set.

use cairn_engine::UndoOptions;
use camino::Utf8PathBuf;

/// Revert the newest change set not yet undone, if its files are as it left them.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The worktree (default: the one holding the current directory).
    dir: Option<Utf8PathBuf>,
}

impl From<Args> for UndoOptions {
    fn from(args: Args) -> UndoOptions {
        UndoOptions { worktree: args.dir }
    }
}
