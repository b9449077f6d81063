//! `cairn log [TARGET]`: history, newest first.

use cairn_engine::LogOptions;

/// History, newest first.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A snapshot (ref name or id prefix) or a worktree path (default: the worktree
    /// holding the current directory).
    target: Option<String>,
    /// Show at most N snapshots.
    #[arg(short = 'n', long = "max-count", value_name = "N")]
    max_count: Option<usize>,
    /// Each snapshot's change summary against its first parent.
    #[arg(long)]
    stat: bool,
}

impl From<Args> for LogOptions {
    fn from(args: Args) -> LogOptions {
        LogOptions {
            target: args.target,
            max_count: args.max_count,
            stat: args.stat,
        }
    }
}
