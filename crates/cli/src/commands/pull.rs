//! `cairn pull [SNAPSHOTS]`: copy snapshots from a remote.

use cairn_engine::{PullOptions, PullOutcome, Request, verbs};

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View, human_bytes};

/// Copy snapshots (with their history) from a remote, verifying every object; updates
/// NAME@REMOTE, never a local ref. No argument: every remote ref.
#[derive(clap::Args, Debug)]
#[command(display_order = 23)]
pub struct Args {
    /// Snapshot ids or the remote's refs.
    snapshots: Vec<String>,
    /// The remote (default: origin).
    #[arg(long, value_name = "NAME")]
    remote: Option<String>,
    /// Also bring the dependency layers the remote holds for the pulled snapshots (those
    /// their lockfiles give on this machine), each verified.
    #[arg(long)]
    deps: bool,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        super::with_default_view(Request::Pull(self.into()))
    }
}

impl From<Args> for PullOptions {
    fn from(args: Args) -> PullOptions {
        PullOptions {
            snapshots: args.snapshots,
            remote: args.remote,
            deps: args.deps,
        }
    }
}

impl Human for verbs::Pull {
    fn report(o: &PullOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, pull(o))
    }
}

fn pull(o: &PullOutcome) -> String {
    let mut human = format!(
        "pulled {} snapshot{} from {}: {} objects received ({})\n",
        o.pulled.len(),
        if o.pulled.len() == 1 { "" } else { "s" },
        o.remote,
        o.objects_received,
        human_bytes(o.bytes_received),
    );
    for r in &o.refs {
        human.push_str(&format!("{} -> {}\n", r.name, r.snapshot));
    }
    for key in &o.layers {
        human.push_str(&format!("dependency layer {key} pulled\n"));
    }
    for w in &o.warnings {
        human.push_str(&format!("warning: {w}\n"));
    }
    human
}
