//! `cairn discard [DIR] [-- PATHS]`: put the task's changes back to its baseline, and the
//! question it asks on the terminal before discarding everything.

use std::ffi::OsString;
use std::io::IsTerminal;

use cairn_engine::{DiscardOptions, DiscardOutcome, Request, verbs};
use camino::{Utf8Path, Utf8PathBuf};

use crate::commands::{IntoRequest, Requested};
use crate::context::prompt;
use crate::error::{CliError, Error};
use crate::output::{Report, quote_path};
use crate::render::{Human, View};

/// Put the task's changes back to its baseline (only under the given paths, if any;
/// else the task ends). `cairn undo` brings them back.
#[derive(clap::Args, Debug)]
#[command(display_order = 33)]
pub struct Args {
    /// The worktree (default: the one holding the current directory).
    dir: Option<Utf8PathBuf>,
    /// Do not ask before discarding everything.
    #[arg(long)]
    yes: bool,
    /// Paths relative to the worktree root.
    #[arg(last = true)]
    paths: Vec<OsString>,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        super::with_default_view(Request::Discard(self.into()))
    }
}

impl From<Args> for DiscardOptions {
    fn from(args: Args) -> DiscardOptions {
        DiscardOptions {
            dir: args.dir,
            paths: super::tree_paths(args.paths),
            yes: args.yes,
        }
    }
}

/// Asks on this terminal before throwing away every change of the task in `root`; `Ok(false)`
/// without a terminal to ask on.
pub fn confirm(root: &Utf8Path) -> Result<bool, Error> {
    if !std::io::stdin().is_terminal() {
        return Ok(false);
    }
    let answer = prompt(&format!(
        "Discard every change of the task in {root}? [y/N] "
    ))?;
    if matches!(answer.as_str(), "y" | "Y" | "yes") {
        Ok(true)
    } else {
        Err(CliError::NotDiscarded {
            root: root.to_owned(),
        }
        .into())
    }
}

impl Human for verbs::Discard {
    fn report(o: &DiscardOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, discard(o))
    }
}

fn discard(o: &DiscardOutcome) -> String {
    let mut human: String = o
        .discarded
        .iter()
        .map(|p| format!("discarded {}\n", quote_path(p.as_bytes())))
        .collect();
    human.push_str(&format!(
        "{} path(s) back to the baseline{}; `cairn undo` brings them back\n",
        o.discarded.len(),
        if o.task_ended { ", task ended" } else { "" }
    ));
    human
}
