//! `cairn review [DIR]`: the task's changes against its baseline.

use cairn_engine::{Detail, ReviewOptions};
use camino::Utf8PathBuf;

/// The task's changes against its baseline.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The worktree (default: the one holding the current directory).
    dir: Option<Utf8PathBuf>,
}

impl Args {
    /// The engine's options; the changed lines are read only to be printed (not with
    /// `json`).
    pub fn options(self, json: bool) -> ReviewOptions {
        ReviewOptions {
            dir: self.dir,
            detail: if json {
                Detail::Counts
            } else {
                Detail::Contents
            },
        }
    }
}
