//! `cairn redo [DIR]`: re-apply the newest undone change set (the engine's
//! [`UndoOptions`], as `undo` takes them).

use cairn_engine::{Request, UndoOptions, UndoOutcome, verbs};
use camino::Utf8PathBuf;

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View, undo_refused, undo_report};

/// Re-apply the newest undone change set, if its files are as the undo left them.
#[derive(clap::Args, Debug)]
#[command(display_order = 29)]
pub struct Args {
    /// The worktree (default: the one holding the current directory).
    dir: Option<Utf8PathBuf>,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        super::with_default_view(Request::Redo(self.into()))
    }
}

impl From<Args> for UndoOptions {
    fn from(args: Args) -> UndoOptions {
        UndoOptions { worktree: args.dir }
    }
}

impl Human for verbs::Redo {
    fn report(o: &UndoOutcome, json: serde_json::Value, _: &View) -> Report {
        undo_report(json, o, "redo", "reapplied")
    }

    fn refused(o: &UndoOutcome, report: Report, message: &str) -> Report {
        undo_refused(o, report, message)
    }
}
