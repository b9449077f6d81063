//! `cairn rewind [DIR]`: roll the worktree back to a checkpoint, named or (with `-i`)
//! picked in a terminal ([`super::picker`]).

use cairn_engine::{Request, RewindOptions, RollbackOutcome, TimelineOutcome, verbs};
use camino::Utf8PathBuf;

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View, rollback_text};

/// Roll the worktree back to a checkpoint (default: the latest); later ones stay.
#[derive(clap::Args, Debug)]
#[command(display_order = 27)]
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

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        super::with_default_view(Request::Rewind(self.into()))
    }
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

impl Human for verbs::Rewind {
    fn report(o: &RollbackOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, rollback_text(o, "rewind"))
    }
}

impl Human for verbs::Timeline {
    fn report(o: &TimelineOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(
            json,
            o.entries
                .iter()
                .map(|e| {
                    format!(
                        "{} {}{}\n",
                        e.snapshot.id.short(12),
                        e.checkpoint
                            .as_deref()
                            .map(|n| format!("[{n}] "))
                            .unwrap_or_default(),
                        e.snapshot.message.lines().next().unwrap_or("")
                    )
                })
                .collect::<String>(),
        )
    }
}
