//! `cairn combine SNAP SNAP…`: several snapshots' changes merged into one new snapshot.

use cairn_engine::{CombineOptions, CombineOutcome, Request, verbs};

use crate::commands::{IntoRequest, Requested};
use crate::output::{Report, quote_path};
use crate::render::{Human, View};

/// Merge several snapshots' changes against their base into one new snapshot whose
/// parents are they (in the order given), inside the store: no worktree or git repository
/// changes. With more than two, each is merged onto the running result against the base,
/// one after the other. Any conflict is listed with the snapshots that changed the path,
/// exits 1 and records nothing.
#[derive(clap::Args, Debug)]
#[command(display_order = 41)]
pub struct Args {
    /// The snapshots whose changes to combine (at least two, each once); the new snapshot's
    /// parents, in this order.
    #[arg(required = true, num_args = 2.., value_name = "SNAP")]
    snapshots: Vec<String>,
    /// The common ancestor the changes are taken against (default: the snapshots' nearest
    /// common ancestor).
    #[arg(long, value_name = "SNAP")]
    base: Option<String>,
    /// The new snapshot's message (default: one naming the snapshots combined).
    #[arg(short, long)]
    message: Option<String>,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        super::with_default_view(Request::Combine(self.into()))
    }
}

impl From<Args> for CombineOptions {
    fn from(args: Args) -> CombineOptions {
        CombineOptions {
            snapshots: args.snapshots,
            base: args.base,
            message: args.message,
        }
    }
}

impl Human for verbs::Combine {
    fn report(o: &CombineOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, combine(o))
    }
}

fn combine(o: &CombineOutcome) -> String {
    let short = |id: &cas::SnapshotId| id.short(12);
    match &o.snapshot {
        Some(snapshot) => format!(
            "combined {} snapshots ({}) against base {}: snapshot {snapshot}\n",
            o.parents.len(),
            o.parents.iter().map(short).collect::<Vec<_>>().join(", "),
            short(&o.base),
        ),
        None => o
            .conflicts
            .iter()
            .map(|c| {
                let inputs: Vec<String> = c.inputs.iter().map(short).collect();
                format!(
                    "CONFLICT ({}): {} (changed by {})\n",
                    c.kind,
                    quote_path(c.path.as_bytes()),
                    inputs.join(", ")
                )
            })
            .collect(),
    }
}
