//! `cairn merge SNAP --into REPO`: a snapshot merged back into git as a commit.

use cairn_engine::{MergeOptions, MergeOutcome, Request, verbs};
use camino::Utf8PathBuf;

use crate::commands::{IntoRequest, Requested};
use crate::output::{Report, quote_path};
use crate::render::{Human, View};

/// Three-way merge a snapshot into the git repository it was onboarded from, as a
/// commit on a new branch (or, with --checkout, the current one); with conflicts, report
/// them and change nothing.
#[derive(clap::Args, Debug)]
#[command(display_order = 10)]
pub struct Args {
    /// The snapshot (ref name or id prefix).
    snapshot: String,
    /// The git repository.
    #[arg(long, value_name = "REPO")]
    into: Utf8PathBuf,
    /// The common ancestor (default: the nearest ancestor onboarded from REPO).
    #[arg(long, value_name = "SNAP")]
    base: Option<String>,
    /// The branch to create (default cairn/<first 12 hex of SNAP>).
    #[arg(long, value_name = "B")]
    branch: Option<String>,
    /// Commit to the current branch and move index and working tree with it, if every
    /// path that changes is clean.
    #[arg(long)]
    checkout: bool,
    /// Commit message (default: the snapshot's).
    #[arg(short, long)]
    message: Option<String>,
    /// Checks the snapshot's tree must have a passing attestation of (`verify`), or nothing
    /// is merged; each becomes a `Cairn-Verified: NAME ATTESTATION` trailer of the commit.
    #[arg(long, value_name = "NAME")]
    require: Vec<String>,
    /// An allowed-signers file (ssh-keygen's format): a required check counts only if a
    /// key it lists signed its attestation.
    #[arg(long, value_name = "FILE")]
    signed_by: Option<Utf8PathBuf>,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        super::with_default_view(Request::Merge(self.into()))
    }
}

impl From<Args> for MergeOptions {
    fn from(args: Args) -> MergeOptions {
        MergeOptions {
            snapshot: args.snapshot,
            into: args.into,
            base: args.base,
            branch: args.branch,
            checkout: args.checkout,
            message: args.message,
            require: args.require,
            signed_by: args.signed_by,
        }
    }
}

impl Human for verbs::Merge {
    fn report(o: &Box<MergeOutcome>, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, merge(o))
    }
}

fn merge(o: &MergeOutcome) -> String {
    match (&o.commit, &o.branch) {
        (Some(commit), Some(branch)) => format!(
            "merged {} into {}: branch {branch} at {commit}\n",
            o.snapshot, o.repository
        ),
        _ if !o.unverified.is_empty() => o
            .unverified
            .iter()
            .map(|u| format!("unverified: {}: {}\n", u.check, u.reason))
            .collect(),
        _ if !o.dirty.is_empty() => o
            .dirty
            .iter()
            .map(|p| format!("dirty: {}\n", quote_path(p.as_bytes())))
            .collect(),
        _ => o
            .conflicts
            .iter()
            .map(|c| format!("CONFLICT ({}): {}\n", c.kind, quote_path(c.path.as_bytes())))
            .collect(),
    }
}
