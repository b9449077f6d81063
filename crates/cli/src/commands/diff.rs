//! `cairn diff A B [-- PATHS]`: compare two snapshots or worktrees, as a patch, `--stat`
//! or `--name-status`.

use std::ffi::OsString;

use cairn_engine::{Detail, DiffOptions, DiffOutcome, FileChange, Request, verbs};

use crate::commands::{IntoRequest, Requested};
use crate::output::{Report, quote_path};
use crate::render::{Format, Human, View, palette, patch, stat_text};

/// Compare two snapshots or worktrees (a path means its live files).
#[derive(clap::Args, Debug)]
#[command(display_order = 13)]
pub struct Args {
    /// A snapshot (ref name or id prefix) or a worktree path.
    a: String,
    /// A snapshot (ref name or id prefix) or a worktree path.
    b: String,
    /// Per-file counts and a summary, as git prints them.
    #[arg(long, conflicts_with = "name_status")]
    stat: bool,
    /// One line per file: status letter and path.
    #[arg(long)]
    name_status: bool,
    /// Lines of context around each change.
    #[arg(short = 'U', long = "unified", value_name = "N", default_value_t = 3)]
    context: u32,
    /// With --json, each text file's hunks too (`patch`), as the output without --json
    /// prints them.
    #[arg(short = 'p', long, conflicts_with_all = ["stat", "name_status"])]
    patch: bool,
    /// Exit 1 if anything differs.
    #[arg(long)]
    exit_code: bool,
    /// Only these paths (relative to the tree root; a directory means all below it).
    #[arg(last = true)]
    paths: Vec<OsString>,
}

impl IntoRequest for Args {
    fn request(self, json: bool) -> Requested {
        let view = self.view();
        Ok((Request::Diff(self.options(json)), view))
    }
}

impl Args {
    /// How the differences are shown.
    pub fn view(&self) -> View {
        let format = if self.stat {
            Format::Stat
        } else if self.name_status {
            Format::NameStatus
        } else {
            Format::Patch
        };
        View {
            format,
            context: self.context,
            ..View::default()
        }
    }

    /// The engine's options, reading only what the output shows (with `json`: counts).
    pub fn options(self, json: bool) -> DiffOptions {
        let detail = match self.view().format {
            _ if json => Detail::Counts,
            Format::NameStatus => Detail::Names,
            Format::Stat => Detail::Counts,
            Format::Patch => Detail::Contents,
        };
        DiffOptions {
            a: Some(self.a),
            b: self.b,
            paths: super::tree_paths(self.paths),
            detail,
            patch: json && self.patch,
            exit_code: self.exit_code,
        }
    }
}

impl Human for verbs::Diff {
    fn report(o: &DiffOutcome, json: serde_json::Value, view: &View) -> Report {
        let human = diff_text(o, view);
        let mut report =
            Report::new(json, String::from_utf8_lossy(&human).into_owned()).with_bytes(human);
        if let (Some(note), false) = (&o.message, o.differ) {
            report.notes.push(note.clone());
        }
        report
    }
}

fn name_status(changes: &[&FileChange]) -> String {
    let mut out = String::new();
    for c in changes {
        if c.status == "R100" {
            out.push_str(&format!(
                "R100\t{}\t{}\n",
                quote_path(c.old_path().unwrap_or_default()),
                quote_path(c.new_path().unwrap_or_default())
            ));
        } else {
            out.push_str(&format!(
                "{}\t{}\n",
                c.status,
                quote_path(c.path.as_bytes())
            ));
        }
    }
    out
}

fn diff_text(o: &DiffOutcome, view: &View) -> Vec<u8> {
    let changes = o.changes();
    match view.format {
        Format::NameStatus => name_status(&changes).into_bytes(),
        Format::Stat => stat_text(&changes).into_bytes(),
        Format::Patch => patch(&changes, view.context, palette(view)),
    }
}
