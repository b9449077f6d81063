//! `cairn checks SNAP [--log NAME]`: the attestations recorded of a snapshot's tree.

use cairn_engine::{ChecksOptions, ChecksOutcome, Request, verbs};

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View};

/// The checks recorded of a snapshot's tree, newest first; with --log, a check's recorded
/// output.
#[derive(clap::Args, Debug)]
#[command(display_order = 40)]
pub struct Args {
    /// The snapshot whose tree's checks to list (a ref, id prefix or checkpoint name).
    snapshot: String,
    /// Also the recorded output (stdout, then stderr) of the newest run of this check.
    #[arg(long, value_name = "NAME")]
    log: Option<String>,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        super::with_default_view(Request::Checks(self.into()))
    }
}

impl From<Args> for ChecksOptions {
    fn from(args: Args) -> ChecksOptions {
        ChecksOptions {
            snapshot: args.snapshot,
            log: args.log,
        }
    }
}

impl Human for verbs::Checks {
    fn report(o: &ChecksOutcome, json: serde_json::Value, _: &View) -> Report {
        if let Some(log) = &o.log {
            let mut bytes = log.stdout.clone().into_bytes();
            bytes.extend_from_slice(log.stderr.as_bytes());
            return Report::new(json, String::new()).with_bytes(bytes);
        }
        Report::new(json, checks(o))
    }
}

fn checks(o: &ChecksOutcome) -> String {
    if o.checks.is_empty() {
        return format!(
            "no checks recorded for snapshot {} (tree {})\n",
            o.snapshot, o.tree
        );
    }
    let mut out = String::new();
    for c in &o.checks {
        let result = match (c.passed, c.timed_out) {
            (true, _) => "passed".to_owned(),
            (false, true) => "timed out".to_owned(),
            (false, false) => format!("failed (exit {})", c.exit_code),
        };
        let signed = c
            .signed_by
            .as_ref()
            .map(|s| format!(", signed by {s}"))
            .unwrap_or_default();
        out.push_str(&format!(
            "{} {} {result} in {} ms, {} on {}{signed}: {}\n",
            c.attestation.short(12),
            c.check,
            c.duration_ms,
            c.started,
            c.host,
            c.command.join(" ")
        ));
    }
    out
}
