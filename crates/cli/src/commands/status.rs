//! `cairn status [WORKTREE]`: changes since the worktree's head snapshot.

use cairn_engine::{Request, StatusOptions, StatusOutcome, verbs};
use camino::Utf8PathBuf;

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View, skipped_human, summary};

/// Changes in a worktree since its head snapshot.
#[derive(clap::Args, Debug)]
#[command(display_order = 14)]
pub struct Args {
    /// The worktree (default: the one holding the current directory).
    worktree: Option<Utf8PathBuf>,
    /// One status line: `[checkpoint: N files changed]`.
    #[arg(long)]
    short: bool,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        let view = self.view();
        Ok((Request::Status(self.into()), view))
    }
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

impl Human for verbs::Status {
    fn report(o: &StatusOutcome, json: serde_json::Value, view: &View) -> Report {
        Report::new(json, status(o, view))
    }
}

fn status(o: &StatusOutcome, view: &View) -> String {
    let mut human = status_summary(o, view);
    if !view.short {
        human.push_str(&skipped_human(&o.skipped));
    }
    human
}

fn status_summary(o: &StatusOutcome, view: &View) -> String {
    let n = o.changes.stats.files;
    if view.short {
        format!(
            "[checkpoint: {n} file{} changed]\n",
            if n == 1 { "" } else { "s" }
        )
    } else if n == 0 {
        match o.head {
            Some(h) => format!("No changes since snapshot {}\n", h.short(12)),
            None => "No snapshot yet; nothing in scope\n".to_owned(),
        }
    } else {
        summary(&o.changes)
    }
}
