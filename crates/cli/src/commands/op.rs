//! `cairn op log [DIR]`: the worktree's operation log.

use cairn_engine::{OpLogOptions, OpLogOutcome, Request, verbs};
use camino::Utf8PathBuf;
use clap::Subcommand;

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View};

/// The worktree's operation log.
#[derive(clap::Args, Debug)]
#[command(display_order = 30)]
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

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        let request = match self.action {
            OpAction::Log { dir } => Request::OpLog(OpLogOptions { dir }),
        };
        super::with_default_view(request)
    }
}

impl Human for verbs::OpLog {
    fn report(o: &OpLogOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, op_log(o))
    }
}

fn op_log(o: &OpLogOutcome) -> String {
    let mut human = String::new();
    for op in &o.ops {
        let state = if op.undone {
            "undone"
        } else if op.undoable {
            "undoable"
        } else {
            ""
        };
        let short =
            |s: Option<cas::SnapshotId>| s.map(|s| s.short(12)).unwrap_or_else(|| "-".into());
        let target = op
            .undoes
            .map(|s| format!(" (of op {s})"))
            .or(op.redoes.map(|s| format!(" (of op {s})")))
            .unwrap_or_default();
        let detail = match (&op.detail, &op.by) {
            (Some(d), Some(by)) => format!(" {d} (by {by})"),
            (Some(d), None) => format!(" {d}"),
            _ => String::new(),
        };
        human.push_str(&format!(
            "{:>4}  {}  {:<10} {} -> {}{target}{detail}{}\n",
            op.seq,
            op.time.strftime("%Y-%m-%d %H:%M:%S"),
            op.op,
            short(op.before),
            short(op.after),
            if state.is_empty() {
                String::new()
            } else {
                format!("  [{state}]")
            }
        ));
    }
    human
}
