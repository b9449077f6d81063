//! `cairn redo [DIR]`: re-apply the newest undone change set (the engine's
//! [`UndoOptions`], as `undo` takes them).

use cairn_engine::UndoOptions;
use camino::Utf8PathBuf;

/// Re-apply the newest undone change set, if its files are as the undo left them.
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
