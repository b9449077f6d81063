//! `cairn undo [DIR]`: revert the newest change set.

use cairn_engine::{Request, UndoOptions, UndoOutcome, verbs};
use camino::Utf8PathBuf;

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View, undo_refused, undo_report};

/// Revert the newest change set not yet undone, if its files are as it left them.
#[derive(clap::Args, Debug)]
#[command(display_order = 28)]
pub struct Args {
    /// The worktree (default: the one holding the current directory).
    dir: Option<Utf8PathBuf>,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        super::with_default_view(Request::Undo(self.into()))
    }
}

impl From<Args> for UndoOptions {
    fn from(args: Args) -> UndoOptions {
        UndoOptions { worktree: args.dir }
    }
}

impl Human for verbs::Undo {
    fn report(o: &UndoOutcome, json: serde_json::Value, _: &View) -> Report {
        undo_report(json, o, "undo", "reverted")
    }

    fn refused(o: &UndoOutcome, report: Report, message: &str) -> Report {
        undo_refused(o, report, message)
    }
}
