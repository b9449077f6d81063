//! `cairn op log [DIR]`: the worktree's operation log.

use cairn_engine::{OpLogOptions, Request};
use camino::Utf8PathBuf;
use clap::Subcommand;

/// The worktree's operation log.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    action: OpAction,
}

#[derive(Subcommand, Debug)]
enum OpAction {
    /// The worktree's operation log, newest first.
    Log {
        /// The worktree (default: the one holding the current directory).
        dir: Option<Utf8PathBuf>,
    },
}

impl Args {
    pub fn request(self) -> Request {
        match self.action {
            OpAction::Log { dir } => Request::OpLog(OpLogOptions { dir }),
        }
    }
}
