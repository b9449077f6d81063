//! `cairn accept [DIR] [-- PATHS]`: keep the task's changes.

use std::ffi::OsString;

use cairn_engine::AcceptOptions;
use camino::Utf8PathBuf;

/// Keep the task's changes (only under the given paths, if any; else the task ends).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The worktree (default: the one holding the current directory).
    dir: Option<Utf8PathBuf>,
    /// Paths relative to the worktree root.
    #[arg(last = true)]
    paths: Vec<OsString>,
}

impl From<Args> for AcceptOptions {
    fn from(args: Args) -> AcceptOptions {
        AcceptOptions {
            dir: args.dir,
            paths: super::tree_paths(args.paths),
        }
    }
}
