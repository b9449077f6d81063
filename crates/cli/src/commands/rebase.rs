//! `cairn rebase WORKTREE --onto SNAP`: a worktree's changes moved onto another snapshot.

use cairn_engine::{RebaseOptions, RebaseOutcome, Request, verbs};
use camino::Utf8PathBuf;

use crate::commands::{IntoRequest, Requested};
use crate::output::{Report, quote_path};
use crate::render::{Human, View};

/// Move a worktree's changes since its base (the nearest common ancestor of its head and
/// SNAP; live edits included, captured first) onto SNAP by a three-way merge: the worktree
/// then holds the result, and its head is a new snapshot whose parent is SNAP. Any conflict
/// is listed, exits 1 and changes nothing. `undo` reverts a rebase.
#[derive(clap::Args, Debug)]
#[command(display_order = 42)]
pub struct Args {
    /// The worktree directory.
    worktree: Utf8PathBuf,
    /// The snapshot to move the worktree's changes onto: checkpoint name, ref or id prefix.
    #[arg(long, value_name = "SNAP")]
    onto: String,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        super::with_default_view(Request::Rebase(self.into()))
    }
}

impl From<Args> for RebaseOptions {
    fn from(args: Args) -> RebaseOptions {
        RebaseOptions {
            worktree: args.worktree,
            onto: args.onto,
        }
    }
}

impl Human for verbs::Rebase {
    fn report(o: &RebaseOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, rebase(o))
    }
}

fn rebase(o: &RebaseOutcome) -> String {
    let short = |id: &cas::SnapshotId| id.short(12);
    if !o.conflicts.is_empty() {
        return o
            .conflicts
            .iter()
            .map(|c| format!("CONFLICT ({}): {}\n", c.kind, quote_path(c.path.as_bytes())))
            .collect();
    }
    if !o.rebased {
        return format!(
            "{} already descends from {}: nothing to do\n",
            o.worktree,
            short(&o.onto)
        );
    }
    let mut human = String::new();
    for p in &o.written {
        human.push_str(&format!("write  {}\n", quote_path(p.as_bytes())));
    }
    for p in &o.deleted {
        human.push_str(&format!("delete {}\n", quote_path(p.as_bytes())));
    }
    human.push_str(&format!(
        "rebased {} onto {}: snapshot {}, {} written, {} deleted\n",
        o.worktree,
        short(&o.onto),
        o.snapshot,
        o.written.len(),
        o.deleted.len()
    ));
    human
}
