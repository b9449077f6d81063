//! `cairn checkpoint [DIR]`: a named snapshot on the worktree's checkpoint stack.

use cairn_engine::CheckpointOptions;
use camino::Utf8PathBuf;

/// Snapshot with a name on the worktree's checkpoint stack (onboards DIR in place if it
/// is not a worktree yet; nothing git owns is touched). The first one starts a task.
#[derive(clap::Args, Debug)]
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
