//! `cairn log [TARGET]`: history, newest first.

use cairn_engine::{LogEntry, LogOptions, LogOutcome, Request, verbs};

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View, check_marks, stat_text};

/// History, newest first.
#[derive(clap::Args, Debug)]
#[command(display_order = 19)]
pub struct Args {
    /// A snapshot (ref name or id prefix) or a worktree path (default: the worktree
    /// holding the current directory).
    target: Option<String>,
    /// Show at most N snapshots.
    #[arg(short = 'n', long = "max-count", value_name = "N")]
    max_count: Option<usize>,
    /// Each snapshot's change summary against its first parent.
    #[arg(long)]
    stat: bool,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        super::with_default_view(Request::Log(self.into()))
    }
}

impl From<Args> for LogOptions {
    fn from(args: Args) -> LogOptions {
        LogOptions {
            target: args.target,
            max_count: args.max_count,
            stat: args.stat,
        }
    }
}

impl Human for verbs::Log {
    fn report(o: &LogOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, log(o))
    }
}

fn log(o: &LogOutcome) -> String {
    let mut human = String::new();
    for entry in &o.snapshots {
        human.push_str(&log_entry(entry));
        if let Some(stat) = &entry.stat {
            human.push_str(&stat_text(&stat.changes()));
            human.push('\n');
        }
    }
    human
}

fn log_entry(e: &LogEntry) -> String {
    let mut out = format!("snapshot {}", e.id);
    if !e.checks.is_empty() {
        out.push_str(&format!("  {}", check_marks(&e.checks)));
    }
    out.push('\n');
    for p in &e.parents {
        out.push_str(&format!("Parent:  {}\n", p.short(12)));
    }
    out.push_str(&format!("Date:    {}\n", e.created));
    if !e.labels.is_empty() {
        out.push_str(&format!("Labels:  {}\n", e.labels.join(" ")));
    }
    if let Some(src) = &e.source {
        match &src.git {
            Some(g) => out.push_str(&format!(
                "Source:  {} (git {}{})\n",
                src.path,
                g.commit.get(..g.commit.len().min(12)).unwrap_or(&g.commit),
                if g.dirty { ", dirty" } else { "" }
            )),
            None => out.push_str(&format!("Source:  {}\n", src.path)),
        }
    }
    out.push('\n');
    for line in e.message.lines() {
        out.push_str(&format!("    {line}\n"));
    }
    if !e.message.is_empty() {
        out.push('\n');
    }
    out
}
