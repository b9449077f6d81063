//! `cairn status [WORKTREE]`: changes since the worktree's head snapshot.

use cairn_engine::StatusOptions;
use camino::Utf8PathBuf;

use crate::render::View;

/// Changes in a worktree since its head snapshot.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The worktree (default: the one holding the current directory).
    worktree: Option<Utf8PathBuf>,
    /// One status line: `[checkpoint: N files changed]`.
    #[arg(long)]
    short: bool,
}

impl Args {
    pub fn view(&self) -> View {
        View {
            short: self.short,
            ..View::default()
        }
    }
}

impl From<Args> for StatusOptions {
    fn from(args: Args) -> StatusOptions {
        StatusOptions {
            worktree: args.worktree,
        }
    }
}
