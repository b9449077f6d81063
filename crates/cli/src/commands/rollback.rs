//! `cairn rollback WORKTREE SNAP [-- PATHS]`: make a worktree's scope equal a snapshot.

use std::ffi::OsString;

use cairn_engine::{Request, RollbackOptions, RollbackOutcome, verbs};
use camino::Utf8PathBuf;

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View, rollback_text};

/// Make a worktree's scope equal a snapshot (only the given paths, if any).
#[derive(clap::Args, Debug)]
#[command(display_order = 9)]
pub struct Args {
    /// The worktree.
    worktree: Utf8PathBuf,
    /// The snapshot (ref name or id prefix).
    snapshot: String,
    /// List what would change; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Paths relative to the worktree root.
    #[arg(last = true)]
    paths: Vec<OsString>,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        super::with_default_view(Request::Rollback(self.into()))
    }
}

impl From<Args> for RollbackOptions {
    fn from(args: Args) -> RollbackOptions {
        RollbackOptions {
            worktree: args.worktree,
            snapshot: args.snapshot,
            dry_run: args.dry_run,
            paths: super::tree_paths(args.paths),
        }
    }
}

impl Human for verbs::Rollback {
    fn report(o: &RollbackOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, rollback_text(o, "rollback"))
    }
}
