//! `cairn accept [DIR] [-- PATHS]`: keep the task's changes.

use std::ffi::OsString;

use cairn_engine::{AcceptOptions, AcceptOutcome, Request, verbs};
use camino::Utf8PathBuf;

use crate::commands::{IntoRequest, Requested};
use crate::output::{Report, quote_path};
use crate::render::{Human, View};

/// Keep the task's changes (only under the given paths, if any; else the task ends).
#[derive(clap::Args, Debug)]
#[command(display_order = 32)]
pub struct Args {
    /// The worktree (default: the one holding the current directory).
    dir: Option<Utf8PathBuf>,
    /// Paths relative to the worktree root.
    #[arg(last = true)]
    paths: Vec<OsString>,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        super::with_default_view(Request::Accept(self.into()))
    }
}

impl From<Args> for AcceptOptions {
    fn from(args: Args) -> AcceptOptions {
        AcceptOptions {
            dir: args.dir,
            paths: super::tree_paths(args.paths),
        }
    }
}

impl Human for verbs::Accept {
    fn report(o: &AcceptOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, accept(o))
    }
}

fn accept(o: &AcceptOutcome) -> String {
    let mut human: String = o
        .accepted
        .iter()
        .map(|p| format!("accepted {}\n", quote_path(p.as_bytes())))
        .collect();
    human.push_str(&match o.baseline {
        None => format!("task ended: {} change(s) kept\n", o.accepted.len()),
        Some(b) => format!(
            "{} path(s) accepted; baseline now {}\n",
            o.accepted.len(),
            b.short(12)
        ),
    });
    human
}
