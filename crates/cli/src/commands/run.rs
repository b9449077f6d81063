//! `cairn run`: the engine's `run` with the command on this terminal. The store calls go
//! where the store is (its server, or an engine here); the command itself always runs
//! here, with this terminal's stdin and stdout, and a person may widen its sandbox.

use std::path::PathBuf;

use cairn_engine::{
    Outcome, PolicyOptions, PolicyOutcome, Request, RunOptions, RunOutcome, RunSteps, Runner,
    SnapshotOptions, SnapshotOutcome, StatusOptions, StatusOutcome, verbs,
};
use camino::{Utf8Path, Utf8PathBuf};

use crate::commands::OwnCommand;
use crate::context::{Ctx, current_dir};
use crate::error::{CliError, Error};
use crate::output::Report;
use crate::progress::Bar;
use crate::render::{Human, View};
use crate::target::Target;

/// Run a command confined to a worktree (Landlock): it may write only there (and in the
/// other worktrees given, the worktrees' remembered grants and a private temporary
/// directory); secrets it touches are put back; what the kernel denied is reported.
#[derive(clap::Args, Debug)]
#[command(display_order = 15)]
pub struct Args {
    /// The worktree.
    worktree: Utf8PathBuf,
    /// Another worktree the command may write, snapshotted and protected the same way
    /// (repeatable).
    #[arg(long, value_name = "WORKTREE")]
    also: Vec<Utf8PathBuf>,
    /// Write nowhere but the private temporary directory (for verifiers).
    #[arg(long)]
    read_only: bool,
    /// Allow TCP bind and connect.
    #[arg(long)]
    network: bool,
    /// Also allow writing beneath PATH (repeatable).
    #[arg(long = "allow-write", value_name = "PATH")]
    allow_write: Vec<Utf8PathBuf>,
    /// Run unconfined (where Landlock is missing).
    #[arg(long)]
    no_sandbox: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<std::ffi::OsString>,
}

impl OwnCommand for Args {}

impl From<Args> for RunOptions {
    fn from(args: Args) -> RunOptions {
        RunOptions {
            worktree: args.worktree,
            also: args.also,
            read_only: args.read_only,
            network: args.network,
            allow_write: args.allow_write,
            no_sandbox: args.no_sandbox,
            command: args.command,
        }
    }
}

// The sandbox helper's arguments (`POLICY SCRATCH REPORT -- COMMAND…`, or `--reap`);
// hidden, so it has no help text.
#[derive(clap::Args, Debug)]
#[command(name = "__sandbox-exec", hide = true, display_order = 17)]
pub struct SandboxExecArgs {
    #[arg(long, exclusive = true)]
    reap: bool,
    #[arg(required_unless_present = "reap")]
    policy: Option<String>,
    #[arg(required_unless_present = "reap")]
    scratch: Option<PathBuf>,
    #[arg(required_unless_present = "reap")]
    report: Option<PathBuf>,
    #[arg(last = true)]
    command: Vec<std::ffi::OsString>,
}

impl OwnCommand for SandboxExecArgs {}

/// The store calls of `run`, where the store is (its server, or here).
struct Steps {
    target: Target,
    cwd: Utf8PathBuf,
    bar: Bar,
}

impl Steps {
    fn call(&self, request: Request) -> Result<Outcome, Error> {
        Ok(self.target.call(&self.cwd, request, &self.bar, false)?.0)
    }
}

fn unexpected(outcome: &Outcome) -> Error {
    CliError::UnexpectedOutcome {
        verb: outcome.verb(),
    }
    .into()
}

impl RunSteps for Steps {
    fn status(&self, worktree: &Utf8Path) -> Result<StatusOutcome, Error> {
        let request = Request::Status(StatusOptions {
            worktree: Some(worktree.to_owned()),
        });
        match self.call(request)? {
            Outcome::Status(s) => Ok(s),
            other => Err(unexpected(&other)),
        }
    }

    fn take_grants(&self, root: &Utf8Path) -> Result<PolicyOutcome, Error> {
        let request = Request::Policy(PolicyOptions {
            worktree: Some(root.to_owned()),
            take_once: true,
        });
        match self.call(request)? {
            Outcome::Policy(p) => Ok(p),
            other => Err(unexpected(&other)),
        }
    }

    fn snapshot(&self, root: &Utf8Path, message: &str) -> Result<SnapshotOutcome, Error> {
        let request = Request::Snapshot(SnapshotOptions::new(root).message(message));
        match self.call(request)? {
            Outcome::Snapshot(s) => Ok(s),
            other => Err(unexpected(&other)),
        }
    }
}

/// `cairn run WORKTREE [--also WORKTREE]… [--read-only] [--network] [--allow-write PATH]…
/// [--no-sandbox] -- CMD…`.
pub fn run(ctx: &Ctx, args: Args) -> Result<Report, Error> {
    if args.command.is_empty() {
        return Err(cairn_engine::RunError::NoCommand.into());
    }
    let cwd = current_dir()?;
    let store = ctx.store_path(&cwd)?;
    let steps = Steps {
        target: Target::for_store(&store, ctx.offline),
        cwd: cwd.clone(),
        bar: Bar::new(),
    };
    let output = if ctx.json {
        // stdout carries exactly one JSON object: the command's own output goes to stderr.
        cairn_engine::Output::InheritToStderr
    } else {
        cairn_engine::Output::Inherit
    };
    let outcome = Runner {
        steps: &steps,
        sandbox: &crate::target::sandbox()?,
        store: &store,
        cwd: &cwd,
        output,
        person: true,
    }
    .run(args.into())?;
    let notes = if ctx.json {
        Vec::new()
    } else {
        denial_notes(&outcome)
    };
    let mut report = crate::render::report(&Outcome::Run(Box::new(outcome)), &Default::default());
    report.notes = notes;
    Ok(report)
}

/// For stderr: each denial with the grant that would allow it, or why they are not known
/// when the command failed.
fn denial_notes(o: &RunOutcome) -> Vec<String> {
    let root = o
        .snapshots
        .first()
        .map(|s| s.worktree.as_str())
        .unwrap_or_default();
    match (&o.denied, &o.denied_unavailable) {
        (Some(denied), _) => denied
            .iter()
            .map(|d| {
                let grant = if d.access.starts_with("net.") {
                    "--network".to_owned()
                } else {
                    format!("--write {}", d.path)
                };
                format!(
                    "the sandbox denied {} on {} (to allow it: cairn policy allow {root} {grant})",
                    d.access, d.path
                )
            })
            .collect(),
        (None, Some(why)) if o.exit_code != 0 => {
            vec![format!("what the sandbox denied is not known: {why}")]
        }
        _ => Vec::new(),
    }
}

/// The hidden helper `__sandbox-exec`: confine this process to the policy, then become the
/// command; or, with `--reap`, lead the command's process group and kill it when `cairn`
/// ends.
pub fn sandbox_exec(args: &SandboxExecArgs) -> ! {
    match (&args.policy, &args.scratch, &args.report) {
        (Some(policy), Some(scratch), Some(report)) if !args.reap => {
            sandbox::exec(policy, scratch, report, &args.command)
        }
        _ => sandbox::reap(),
    }
}

impl Human for verbs::Run {
    fn report(o: &Box<RunOutcome>, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, human(o)).with_exit(o.exit_code)
    }
}

/// `run`'s human text: each denied path put back, or where its copy was kept.
fn human(o: &RunOutcome) -> String {
    let first = o.snapshots.first().map(|s| &s.worktree);
    let mut human = String::new();
    for v in &o.violations {
        let path = crate::output::json_path(v.path.as_bytes());
        let shown = if Some(&v.worktree) == first {
            path
        } else {
            format!("{}/{path}", v.worktree)
        };
        let change = &v.change;
        match &v.kept {
            None => human.push_str(&format!("put back {shown} ({change}; denied path)\n")),
            Some(kept) => human.push_str(&format!(
                "could not put back {shown} ({change}; denied path): something that is not a directory stands in its way; its saved copy is at {kept}\n"
            )),
        }
    }
    human
}
