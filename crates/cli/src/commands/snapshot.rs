//! `cairn snapshot WORKTREE`: a new snapshot of a worktree.

use cairn_engine::{Request, SnapshotOptions, SnapshotOutcome, verbs};
use camino::Utf8PathBuf;

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View, skipped_human};

/// New snapshot of a worktree, parent = its head.
#[derive(clap::Args, Debug)]
#[command(display_order = 5)]
pub struct Args {
    /// The worktree (or a directory inside it).
    worktree: Utf8PathBuf,
    /// Snapshot message.
    #[arg(short, long)]
    message: Option<String>,
    /// A `key=value` label (repeatable).
    #[arg(long = "label", value_name = "K=V")]
    labels: Vec<String>,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        super::with_default_view(Request::Snapshot(self.into()))
    }
}

impl From<Args> for SnapshotOptions {
    fn from(args: Args) -> SnapshotOptions {
        SnapshotOptions {
            worktree: args.worktree,
            message: args.message,
            labels: args.labels,
        }
    }
}

impl Human for verbs::Snapshot {
    fn report(o: &SnapshotOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, snapshot(o))
    }
}

fn snapshot(o: &SnapshotOutcome) -> String {
    let mut human = skipped_human(&o.skipped);
    if o.changed {
        human.push_str(&format!(
            "snapshot {} ({} added, {} modified, {} removed)\n",
            o.snapshot, o.added, o.modified, o.removed
        ));
    } else {
        human.push_str(&format!("unchanged: snapshot {}\n", o.snapshot));
    }
    human
}
