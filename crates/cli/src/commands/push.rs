//! `cairn push [SNAPSHOTS]`: copy snapshots to a remote.

use cairn_engine::{PushOptions, PushOutcome, Request, verbs};

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View, human_bytes};

/// Copy snapshots (with their history) to a remote, sending only what it lacks; a ref
/// also sets REF@REMOTE if it still holds what this store last saw there. No argument:
/// every local ref.
#[derive(clap::Args, Debug)]
#[command(display_order = 22)]
pub struct Args {
    /// Snapshots or refs.
    snapshots: Vec<String>,
    /// The remote (default: origin).
    #[arg(long, value_name = "NAME")]
    remote: Option<String>,
    /// Also push each snapshot's dependency layers stored here (those its lockfiles give
    /// on this machine; a layer bound to its root stays): by id, with a record of each.
    #[arg(long)]
    deps: bool,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        super::with_default_view(Request::Push(self.into()))
    }
}

impl From<Args> for PushOptions {
    fn from(args: Args) -> PushOptions {
        PushOptions {
            snapshots: args.snapshots,
            remote: args.remote,
            deps: args.deps,
        }
    }
}

impl Human for verbs::Push {
    fn report(o: &PushOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, push(o))
    }
}

fn push(o: &PushOutcome) -> String {
    let mut human = format!(
        "pushed {} snapshot{} to {}: {} objects sent ({}), {} already there\n",
        o.pushed.len(),
        if o.pushed.len() == 1 { "" } else { "s" },
        o.remote,
        o.objects_sent,
        human_bytes(o.bytes_sent),
        o.objects_present,
    );
    for r in &o.refs {
        human.push_str(&format!("{} -> {}\n", r.name, r.snapshot));
    }
    for key in &o.layers {
        human.push_str(&format!("dependency layer {key} pushed\n"));
    }
    for w in &o.warnings {
        human.push_str(&format!("warning: {w}\n"));
    }
    human
}
