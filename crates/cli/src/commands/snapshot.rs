//! `cairn snapshot WORKTREE`: a new snapshot of a worktree.

use cairn_engine::SnapshotOptions;
use camino::Utf8PathBuf;

/// New snapshot of a worktree, parent = its head.
#[derive(clap::Args, Debug)]
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

impl From<Args> for SnapshotOptions {
    fn from(args: Args) -> SnapshotOptions {
        SnapshotOptions {
            worktree: args.worktree,
            message: args.message,
            labels: args.labels,
        }
    }
}
