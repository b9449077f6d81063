//! `cairn review [DIR]`: the task's changes against its baseline.

use cairn_engine::{Detail, Request, ReviewOptions, ReviewOutcome, verbs};
use camino::Utf8PathBuf;

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View, palette, patch, summary};

/// The task's changes against its baseline.
#[derive(clap::Args, Debug)]
#[command(display_order = 31)]
pub struct Args {
    /// The worktree (default: the one holding the current directory).
    dir: Option<Utf8PathBuf>,
}

impl IntoRequest for Args {
    fn request(self, json: bool) -> Requested {
        super::with_default_view(Request::Review(self.options(json)))
    }
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

impl Human for verbs::Review {
    fn report(o: &ReviewOutcome, json: serde_json::Value, view: &View) -> Report {
        let human = review(o, view);
        Report::new(json, String::from_utf8_lossy(&human).into_owned()).with_bytes(human)
    }
}

fn review(o: &ReviewOutcome, view: &View) -> Vec<u8> {
    if o.changes.is_empty() {
        return format!(
            "No changes since the task's baseline {}\n",
            o.baseline.short(12)
        )
        .into_bytes();
    }
    let mut human = summary(&o.changes).into_bytes();
    human.push(b'\n');
    human.extend(patch(&o.changes.changes(), 3, palette(view)));
    human
}
