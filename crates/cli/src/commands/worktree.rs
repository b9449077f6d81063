//! `cairn worktree list|remove|rebind`: the worktree registry.

use cairn_engine::{
    Request, WorktreeListOptions, WorktreeListOutcome, WorktreePathOptions, WorktreesChanged, verbs,
};
use camino::Utf8PathBuf;
use clap::Subcommand;

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View};

/// The worktree registry.
#[derive(clap::Args, Debug)]
#[command(display_order = 12)]
pub struct Args {
    #[command(subcommand)]
    action: WorktreeAction,
}

#[derive(Subcommand, Debug)]
enum WorktreeAction {
    /// List registered worktrees.
    List,
    /// Forget a worktree (its files are left as they are).
    Remove {
        /// The worktree's root.
        path: Utf8PathBuf,
    },
    /// Accept that a worktree's root is now another directory (moved, restored, replaced);
    /// every file is read afresh at the next capture.
    Rebind {
        /// The worktree's root.
        path: Utf8PathBuf,
    },
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        let request = match self.action {
            WorktreeAction::List => Request::WorktreeList(WorktreeListOptions {}),
            WorktreeAction::Remove { path } => {
                Request::WorktreeRemove(WorktreePathOptions { path })
            }
            WorktreeAction::Rebind { path } => {
                Request::WorktreeRebind(WorktreePathOptions { path })
            }
        };
        super::with_default_view(request)
    }
}

impl Human for verbs::WorktreeList {
    fn report(o: &WorktreeListOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, worktree_list(o))
    }
}

impl Human for verbs::WorktreeRemove {
    fn report(o: &WorktreesChanged, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, worktree_changed(o, true))
    }
}

impl Human for verbs::WorktreeRebind {
    fn report(o: &WorktreesChanged, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, worktree_changed(o, false))
    }
}

fn worktree_list(o: &WorktreeListOutcome) -> String {
    o.worktrees
        .iter()
        .map(|w| {
            let head = w.head.map(|h| h.short(12)).unwrap_or_else(|| "-".into());
            let live = match w.live {
                Some(true) => "\tlive",
                Some(false) => "\tnot mounted",
                None => "",
            };
            let read_only = if w.read_only == Some(true) {
                "\tread-only"
            } else {
                ""
            };
            let remote = match &w.remote {
                Some(r) => format!("\tremote {r}"),
                None => String::new(),
            };
            let prefetch = match &w.prefetch {
                Some(p) => format!(
                    "\tprefetch {}/{} files{}",
                    p.objects_done,
                    p.objects_total,
                    if p.ended { " (ended)" } else { "" }
                ),
                None => String::new(),
            };
            format!(
                "{}\t{}\t{head}{live}{read_only}{remote}{prefetch}\n",
                w.path, w.kind
            )
        })
        .collect()
}

fn worktree_changed(o: &WorktreesChanged, removed: bool) -> String {
    o.worktrees
        .iter()
        .map(|w| {
            if removed {
                format!("removed worktree {} (files left in place)\n", w.path)
            } else {
                format!("worktree {} is the directory there now\n", w.path)
            }
        })
        .collect()
}
