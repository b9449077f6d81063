//! `cairn gc`: drop what nothing reaches, in the store or on a remote.

use cairn_engine::GcOptions;

use crate::render::View;

/// Drop what nothing reaches (with --remote: on that remote).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Report what would be removed; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// First drop op-log entries older than DAYS days; no size budget drops newer ones.
    #[arg(long, value_name = "DAYS", alias = "prune-ops")]
    keep_within: Option<u32>,
    /// Then drop older history, oldest first, until the store's database file takes at
    /// most BYTES, mount layers not counted (never refs, worktree heads, named
    /// checkpoints, task baselines, the change `undo` would revert or what is within
    /// --keep-within).
    #[arg(long, value_name = "BYTES")]
    max_size: Option<u64>,
    /// Collect a remote's garbage: packs no remote ref or pinned snapshot reaches.
    #[arg(long, value_name = "NAME")]
    remote: Option<String>,
    /// With --remote: hours a pack stays condemned before it is deleted (default 24),
    /// so a push in progress elsewhere is never cut.
    #[arg(long, value_name = "HOURS", requires = "remote")]
    grace: Option<u32>,
}

impl Args {
    /// A pruning run says what it dropped against the size asked for.
    pub fn view(&self) -> View {
        View {
            pruning: self.keep_within.is_some() || self.max_size.is_some(),
            max_size: self.max_size,
            ..View::default()
        }
    }
}

impl From<Args> for GcOptions {
    fn from(args: Args) -> GcOptions {
        GcOptions {
            dry_run: args.dry_run,
            keep_within: args.keep_within,
            max_size: args.max_size,
            remote: args.remote,
            grace: args.grace,
        }
    }
}
