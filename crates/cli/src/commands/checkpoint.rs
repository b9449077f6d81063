//! `cairn checkpoint [DIR]`: a named snapshot on the worktree's checkpoint stack.

use cairn_engine::{CheckpointOptions, CheckpointOutcome, Request, verbs};
use camino::Utf8PathBuf;

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View, skipped_human};

/// Snapshot with a name on the worktree's checkpoint stack (onboards DIR in place if it
/// is not a worktree yet; nothing git owns is touched). The first one starts a task.
#[derive(clap::Args, Debug)]
#[command(display_order = 26)]
pub struct Args {
    /// The directory (default: the current one).
    dir: Option<Utf8PathBuf>,
    /// A name for it, usable wherever a snapshot is expected in this worktree.
    #[arg(long)]
    name: Option<String>,
    /// Snapshot message.
    #[arg(short, long)]
    message: Option<String>,
    /// Leave files larger than this many bytes out of this worktree's captures.
    #[arg(long, value_name = "BYTES")]
    max_file_size: Option<u64>,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        super::with_default_view(Request::Checkpoint(self.into()))
    }
}

impl From<Args> for CheckpointOptions {
    fn from(args: Args) -> CheckpointOptions {
        CheckpointOptions {
            dir: args.dir,
            name: args.name,
            message: args.message,
            max_file_size: args.max_file_size,
        }
    }
}

impl Human for verbs::Checkpoint {
    fn report(o: &CheckpointOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, checkpoint(o))
    }
}

fn checkpoint(o: &CheckpointOutcome) -> String {
    let mut human = skipped_human(&o.capture.skipped);
    if o.onboarded {
        human.push_str(&format!("onboarded {} in place\n", o.worktree));
    }
    let label = o
        .name
        .as_deref()
        .map(|n| format!(" {n}"))
        .unwrap_or_default();
    human.push_str(&format!(
        "checkpoint{label} {} ({} added, {} modified, {} removed{})\n",
        o.capture.snapshot,
        o.capture.added,
        o.capture.modified,
        o.capture.removed,
        if o.task_started { "; task started" } else { "" }
    ));
    human
}
