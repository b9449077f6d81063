//! `cairn deps save|list|rm`: dependency layers (`node_modules`, `.venv`, ...) stored once
//! and attached to every checkout and mount of a snapshot with the same lockfiles.

use cairn_engine::{
    DepsListOptions, DepsOutcome, DepsRmOptions, DepsSaveOptions, LayerItem, Request, verbs,
};
use camino::Utf8PathBuf;
use clap::Subcommand;

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View};

/// Dependency layers: installed dependencies stored once, attached to new worktrees.
#[derive(clap::Args, Debug)]
#[command(name = "deps", display_order = 44)]
pub struct Args {
    #[command(subcommand)]
    action: DepsAction,
}

#[derive(Subcommand, Debug)]
enum DepsAction {
    /// Store each dependency directory of a worktree as a layer keyed by its lockfiles.
    Save {
        /// The worktree (default: the one holding the current directory).
        worktree: Option<Utf8PathBuf>,
    },
    /// List the stored layers and the worktrees they are attached to.
    List,
    /// Remove a layer (its files go with the next gc).
    Rm {
        /// The layer's key, or a prefix naming one layer.
        key: String,
    },
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        let request = match self.action {
            DepsAction::Save { worktree } => Request::DepsSave(DepsSaveOptions { worktree }),
            DepsAction::List => Request::DepsList(DepsListOptions {}),
            DepsAction::Rm { key } => Request::DepsRm(DepsRmOptions { key }),
        };
        super::with_default_view(request)
    }
}

impl Human for verbs::DepsSave {
    fn report(o: &DepsOutcome, json: serde_json::Value, _: &View) -> Report {
        let text = if o.layers.is_empty() {
            "no dependency directory with a lockfile beside it\n".to_owned()
        } else {
            layers(o, |l| {
                let how = if l.new == Some(true) {
                    "saved"
                } else {
                    "already stored"
                };
                format!("{how} {}", line(l))
            })
        };
        Report::new(json, text)
    }
}

impl Human for verbs::DepsList {
    fn report(o: &DepsOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(
            json,
            layers(o, |l| {
                let mut text = line(l);
                for w in &l.used_by {
                    text.push_str(&format!("\tattached to {w}\n"));
                }
                text
            }),
        )
    }
}

impl Human for verbs::DepsRm {
    fn report(o: &DepsOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, layers(o, |l| format!("removed {}", line(l))))
    }
}

fn line(l: &LayerItem) -> String {
    let locks: Vec<&str> = l.lockfiles.iter().map(|f| f.path.as_str()).collect();
    let rooted = match &l.rooted {
        Some(root) => format!(" (attaches only at {root})"),
        None => String::new(),
    };
    format!(
        "{}\t{}\t{} files, {} bytes, from {}{rooted}\n",
        l.key.chars().take(12).collect::<String>(),
        l.path,
        l.files,
        l.bytes,
        locks.join(", ")
    )
}

fn layers(o: &DepsOutcome, each: impl Fn(&LayerItem) -> String) -> String {
    o.layers.iter().map(each).collect()
}
