//! `cairn verify SNAP -- CMD…`: a check run against a snapshot in a throwaway view, and
//! recorded as an attestation of its tree (or answered from the one recorded).

use cairn_engine::{Request, VerifyOptions, VerifyOutcome, ViewKind, verbs};
use camino::Utf8PathBuf;

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View};

/// Run a check against a snapshot in a throwaway view of it, confined as `cairn run` is,
/// and record its attestation; a check recorded before for the same tree, command and
/// environment values answers at once.
#[derive(clap::Args, Debug)]
#[command(display_order = 39)]
pub struct Args {
    /// The snapshot to check (a ref, id prefix or checkpoint name).
    snapshot: String,
    /// The check's name (default: the command's first word).
    #[arg(long, value_name = "NAME")]
    check: Option<String>,
    /// An environment variable the check depends on: NAME=VALUE, or NAME for its value in
    /// this command's environment (never a server's). The command gets it, the attestation
    /// records it, and other values make another check.
    #[arg(long = "env", value_name = "NAME")]
    env: Vec<String>,
    /// Allow TCP bind and connect.
    #[arg(long)]
    network: bool,
    /// Seconds the command may run; then it, with everything it started, is killed and
    /// the check fails.
    #[arg(long, value_name = "SECS")]
    timeout: Option<u64>,
    /// Run the check even if the same check of the same tree is recorded, and record
    /// another.
    #[arg(long)]
    rerun: bool,
    /// An SSH private key file (OpenSSH format, Ed25519 or ECDSA, no passphrase) to sign
    /// the attestation with.
    #[arg(long, value_name = "KEY")]
    sign: Option<Utf8PathBuf>,
    /// Then push the attestation (with the snapshot, if the remote lacks it) to the
    /// default remote, as `push SNAP` does; also when the answer is a record made before.
    #[arg(long)]
    push: bool,
    /// Leave dependency layers (node_modules, .venv, ... saved by `cairn deps save`) out
    /// of the view.
    #[arg(long)]
    no_deps: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        super::with_default_view(Request::Verify(self.into()))
    }
}

impl From<Args> for VerifyOptions {
    fn from(args: Args) -> VerifyOptions {
        // A bare NAME is this process's value: the engine may run elsewhere (`cairn serve`).
        let env = args
            .env
            .into_iter()
            .map(|entry| match (entry.contains('='), std::env::var(&entry)) {
                (false, Ok(value)) => format!("{entry}={value}"),
                _ => entry,
            })
            .collect();
        VerifyOptions {
            snapshot: args.snapshot,
            check: args.check,
            env,
            network: args.network,
            timeout: args.timeout,
            rerun: args.rerun,
            sign: args.sign,
            command: args.command,
            push: args.push,
            no_deps: args.no_deps,
        }
    }
}

impl Human for verbs::Verify {
    fn report(o: &VerifyOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, verify(o))
    }
}

fn verify(o: &VerifyOutcome) -> String {
    let result = if o.passed { "passed" } else { "failed" };
    let how = if o.timed_out {
        "timed out".to_owned()
    } else {
        format!("exit {}", o.exit_code)
    };
    let view = match o.view {
        Some(ViewKind::Mount) => ", in a mount",
        Some(ViewKind::Checkout) => ", in a checkout",
        None => "",
    };
    let cached = if o.cached { ", recorded before" } else { "" };
    let signed = if o.signed { ", signed" } else { "" };
    let mut out = format!(
        "check {} {result} ({how}, {} ms{view}{cached}{signed}): attestation {}\n",
        o.check, o.duration_ms, o.attestation
    );
    out.push_str(&super::checkout::attached(&o.deps));
    if let Some(p) = &o.pushed {
        out.push_str(&format!(
            "pushed to {}: {} objects, {} attestation records and signatures\n",
            p.remote, p.objects_sent, p.attestations_sent
        ));
    }
    out
}
