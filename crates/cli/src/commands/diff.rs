//! `cairn diff A B [-- PATHS]`: compare two snapshots or worktrees, as a patch, `--stat`
//! or `--name-status`.

use std::ffi::OsString;

use cairn_engine::{Detail, DiffOptions};

use crate::render::{Format, View};

/// Compare two snapshots or worktrees (a path means its live files).
#[derive(clap::Args, Debug)]
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
    /// Exit 1 if anything differs.
    #[arg(long)]
    exit_code: bool,
    /// Only these paths (relative to the tree root; a directory means all below it).
    #[arg(last = true)]
    paths: Vec<OsString>,
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
            a: self.a,
            b: self.b,
            paths: super::tree_paths(self.paths),
            detail,
            exit_code: self.exit_code,
        }
    }
}
