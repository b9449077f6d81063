//! `cairn onboard SRC`: snapshot a directory and register it as an in-place worktree, or
//! with `--git REV` import a commit's tree (two engine requests).

use cairn_engine::{ImportOptions, ImportOutcome, OnboardOptions, OnboardOutcome, Request, verbs};
use camino::Utf8PathBuf;

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View, skipped_human};

/// Snapshot directory SRC (working files, uncommitted changes included) and register it
/// as an in-place worktree.
#[derive(clap::Args, Debug)]
#[command(display_order = 4)]
pub struct Args {
    /// The directory.
    src: Utf8PathBuf,
    /// Snapshot message.
    #[arg(short, long)]
    message: Option<String>,
    /// A `key=value` label (repeatable).
    #[arg(long = "label", value_name = "K=V")]
    labels: Vec<String>,
    /// Keep deny-pattern paths (secrets such as .env, *.pem) in scope for this worktree.
    #[arg(long)]
    include_denied: bool,
    /// Import the tree of this git commit of SRC instead (registers no worktree).
    #[arg(long, value_name = "REV")]
    git: Option<String>,
    /// Leave files larger than this many bytes out of this worktree's captures (each
    /// one is reported in `skipped`).
    #[arg(long, value_name = "BYTES")]
    max_file_size: Option<u64>,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        let Args {
            src,
            message,
            labels,
            include_denied,
            git,
            max_file_size,
        } = self;
        let request = match git {
            Some(rev) => Request::Import(ImportOptions {
                src,
                rev,
                message,
                labels,
                include_denied,
            }),
            None => Request::Onboard(OnboardOptions {
                src,
                message,
                labels,
                include_denied,
                max_file_size,
            }),
        };
        super::with_default_view(request)
    }
}

impl Human for verbs::Onboard {
    fn report(o: &OnboardOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, onboard(o))
    }
}

impl Human for verbs::Import {
    fn report(o: &ImportOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, import(o))
    }
}

fn onboard(o: &OnboardOutcome) -> String {
    let mut human = skipped_human(&o.skipped);
    human.push_str(&format!(
        "onboarded {} ({} files, {} bytes)\nsnapshot {}\n",
        o.worktree, o.files, o.bytes, o.snapshot
    ));
    human
}

fn import(o: &ImportOutcome) -> String {
    let mut human = skipped_human(&o.skipped);
    human.push_str(&format!(
        "imported {} of {} ({} files, {} bytes)\nsnapshot {}\n",
        o.source.git_commit, o.repository, o.files, o.bytes, o.snapshot
    ));
    human
}
