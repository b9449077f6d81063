//! `cairn rewind [DIR]`: roll the worktree back to a checkpoint, named or (with `-i`)
//! picked in a terminal ([`super::picker`]).

use cairn_engine::RewindOptions;
use camino::Utf8PathBuf;

/// Roll the worktree back to a checkpoint (default: the latest); later ones stay.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The worktree (default: the one holding the current directory).
    pub dir: Option<Utf8PathBuf>,
    /// A checkpoint name, ref name or id prefix.
    #[arg(long, value_name = "SNAP")]
    to: Option<String>,
    /// List what would change; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Pick the state in a terminal: the worktree's checkpoints and snapshots, newest
    /// first; Enter previews, a second Enter rewinds, Esc changes nothing.
    #[arg(short, long, conflicts_with_all = ["to", "dry_run"])]
    pub interactive: bool,
}

impl From<Args> for RewindOptions {
    fn from(args: Args) -> RewindOptions {
        RewindOptions {
            dir: args.dir,
            to: args.to,
            dry_run: args.dry_run,
        }
    }
}
