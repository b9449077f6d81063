//! `cairn run`: a command confined to its worktree, and secrets put back afterwards.

use std::path::{Path, PathBuf};

use cairn_engine::{Outcome, Request, SkippedPath, SnapshotOptions, StatusOptions, TreePath};
use camino::{Utf8Path, Utf8PathBuf};
use cas::SnapshotId;
use path_policy::{BeneathError, Root, SandboxPolicy, SecretCopy};
use serde::Serialize;

use crate::context::{Ctx, absolute, current_dir};
use crate::error::Error;
use crate::output::{Report, json_path};
use crate::progress::Bar;
use crate::target::Target;

/// Options of `cairn run`.
pub struct RunArgs<'a> {
    pub worktree: &'a Utf8Path,
    pub read_only: bool,
    pub network: bool,
    pub allow_write: &'a [Utf8PathBuf],
    pub no_sandbox: bool,
    pub command: &'a [std::ffi::OsString],
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::failure("io", format!("{}: {e}", path.display()))
}

fn beneath(e: BeneathError) -> Error {
    Error::failure("io", e.to_string())
}

/// The paths a capture left out because a deny pattern matched them (secrets).
fn denied(skipped: &[SkippedPath]) -> Vec<Vec<u8>> {
    skipped
        .iter()
        .filter(|s| s.denied_by.is_some())
        .map(|s| s.path.as_bytes().to_vec())
        .collect()
}

/// What `run` did.
#[derive(Serialize)]
struct RunOutcome {
    exit_code: i32,
    violations: Vec<Violation>,
    snapshot: SnapshotId,
    sandbox: &'static str,
}

/// A denied path the command changed, and whether it was put back.
#[derive(Serialize)]
struct Violation {
    path: TreePath,
    change: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    kept: Option<String>,
}

/// The engine calls of `run`, where the store is (its server, or here); the command itself
/// always runs here, under this terminal.
struct Steps {
    target: Target,
    cwd: Utf8PathBuf,
    bar: Bar,
}

impl Steps {
    fn call(&self, request: Request) -> Result<Outcome, Error> {
        Ok(self.target.call(&self.cwd, request, &self.bar, false)?.0)
    }

    /// The worktree's root and its denied paths now.
    fn look(&self, worktree: &Utf8Path) -> Result<(Utf8PathBuf, Vec<Vec<u8>>), Error> {
        let request = Request::Status(StatusOptions {
            worktree: Some(worktree.to_owned()),
        });
        match self.call(request)? {
            Outcome::Status(s) => Ok((s.worktree, denied(&s.skipped))),
            other => Err(unexpected(&other)),
        }
    }

    /// Snapshots the worktree: the new head and the denied paths now.
    fn snapshot(
        &self,
        root: &Utf8Path,
        message: &str,
    ) -> Result<(SnapshotId, Vec<Vec<u8>>), Error> {
        let request = Request::Snapshot(SnapshotOptions::new(root).message(message));
        match self.call(request)? {
            Outcome::Snapshot(s) => Ok((s.snapshot, denied(&s.skipped))),
            other => Err(unexpected(&other)),
        }
    }
}

fn unexpected(outcome: &Outcome) -> Error {
    Error::failure(
        "server",
        format!("the server answered with the outcome of {}", outcome.verb()),
    )
}

/// `cairn run WORKTREE [--read-only] [--network] [--allow-write PATH]… [--no-sandbox] -- CMD…`.
pub fn run(ctx: &Ctx, args: &RunArgs<'_>) -> Result<Report, Error> {
    if args.command.is_empty() {
        return Err(Error::usage(
            "usage",
            "cairn run: no command given after --",
        ));
    }
    let cwd = current_dir()?;
    let worktree = absolute(&cwd, args.worktree);
    let store = ctx.store_path(&cwd)?;
    let steps = Steps {
        target: Target::for_store(&store, ctx.offline),
        cwd: cwd.clone(),
        bar: Bar::new(),
    };
    // Look around while holding the store, then let go of it while the command runs.
    let (root, before) = steps.look(&worktree)?;
    let store_dir = std::fs::canonicalize(&store).ok();
    let boundary = Root::open(root.as_std_path()).map_err(beneath)?;
    let secrets = SecretCopy::save(&boundary, &before).map_err(beneath)?;
    let scratch = tempfile::Builder::new()
        .prefix("cairn-run-tmp-")
        .tempdir()
        .map_err(io(Path::new("/tmp")))?;
    let policy = if args.no_sandbox {
        SandboxPolicy::DangerFullAccess
    } else if args.read_only {
        SandboxPolicy::ReadOnly
    } else {
        let mut writable_roots = vec![root.clone().into_std_path_buf()];
        writable_roots.extend(
            args.allow_write
                .iter()
                .map(|p| absolute(&cwd, p).into_std_path_buf()),
        );
        SandboxPolicy::WorkspaceWrite {
            writable_roots,
            read_only_subpaths: protected(&root, store_dir.as_deref()),
            network: args.network,
        }
    };
    let policy_json =
        serde_json::to_string(&policy).map_err(|e| Error::failure("encode", e.to_string()))?;
    let exe = std::env::current_exe()
        .map_err(|e| Error::failure("io", format!("current executable: {e}")))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("__sandbox-exec")
        .arg(&policy_json)
        .arg(scratch.path())
        .arg("--")
        .args(args.command);
    cmd.current_dir(&root)
        .env("CAIRN_SANDBOX", policy.label())
        .env("TMPDIR", scratch.path());
    if policy.network() {
        cmd.env_remove("CAIRN_SANDBOX_NETWORK_DISABLED");
    } else {
        cmd.env("CAIRN_SANDBOX_NETWORK_DISABLED", "1");
    }
    if ctx.json {
        // stdout carries exactly one JSON object: the command's own output goes to stderr.
        cmd.stdout(std::io::stderr());
    }
    let status = cmd
        .status()
        .map_err(|e| Error::failure("io", format!("running {:?}: {e}", args.command)))?;
    let exit_code = status.code().unwrap_or(128 + 9);
    if exit_code == SANDBOX_UNAVAILABLE {
        return Err(Error::usage(
            "sandbox_unavailable",
            format!(
                "{root}: the command could not be confined (Landlock or a private mount namespace is unavailable) and was not run; pass --no-sandbox to run it unconfined"
            ),
        ));
    }

    // Snapshot what the command did, then put every secret back as it was.
    let message = format!(
        "run: {}",
        args.command
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let (snapshot, after) = steps.snapshot(&root, &message)?;
    let put_back = secrets.put_back(&boundary, &after).map_err(beneath)?;
    let mut human = String::new();
    let mut violations = Vec::new();
    for p in &put_back {
        let path = json_path(&p.path);
        let change = p.change.as_str();
        let kept = p.kept.as_ref().map(|k| k.display().to_string());
        match &kept {
            None => human.push_str(&format!("put back {path} ({change}; denied path)\n")),
            Some(kept) => {
                human.push_str(&format!(
                    "could not put back {path} ({change}; denied path): something that is not a directory stands in its way; its saved copy is at {kept}\n"
                ));
            }
        }
        violations.push(Violation {
            path: TreePath(p.path.clone()),
            change,
            kept,
        });
    }
    let outcome = RunOutcome {
        exit_code,
        violations,
        snapshot,
        sandbox: policy.label(),
    };
    let has_violations = !outcome.violations.is_empty();
    let n = outcome.violations.len();
    let report = Report::new(outcome, human).with_exit(exit_code);
    if exit_code == 0 && has_violations {
        let mut message = format!(
            "the command changed {n} denied path{}; put back",
            if n == 1 { "" } else { "s" }
        );
        for p in &put_back {
            if let Some(kept) = &p.kept {
                message.push_str(&format!(
                    "; {} could not be put back (not a directory on its way), saved copy kept at {}",
                    json_path(&p.path),
                    kept.display()
                ));
            }
        }
        return Ok(report.refused(message));
    }
    Ok(report)
}

/// What stays read-only inside a writable worktree: its `.git` (a directory, or the file of
/// a linked worktree) and the store's folder if it lives there.
fn protected(root: &Utf8Path, store_dir: Option<&Path>) -> Vec<PathBuf> {
    let mut out = vec![root.join(".git").into_std_path_buf()];
    out.extend(
        store_dir
            .filter(|s| s.starts_with(root.as_std_path()))
            .map(Path::to_path_buf),
    );
    out
}

/// Exit code of the helper when it cannot confine the command.
pub const SANDBOX_UNAVAILABLE: i32 = 231;

/// The hidden helper: confine this process to the policy, then become the command.
pub fn sandbox_exec(policy_json: &str, scratch: &Path, command: &[std::ffi::OsString]) -> ! {
    use std::os::unix::process::CommandExt;
    let policy: SandboxPolicy = match serde_json::from_str(policy_json) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("cairn: invalid sandbox policy: {e}");
            std::process::exit(2);
        }
    };
    match path_policy::enforce(&policy, scratch) {
        Ok(()) => {}
        Err(path_policy::SandboxError::Unavailable) => std::process::exit(SANDBOX_UNAVAILABLE),
        Err(e) => {
            eprintln!(
                "cairn: {e}; the command was not run (pass --no-sandbox to run it unconfined)"
            );
            std::process::exit(SANDBOX_UNAVAILABLE);
        }
    }
    let Some((program, rest)) = command.split_first() else {
        std::process::exit(2)
    };
    let err = std::process::Command::new(program).args(rest).exec();
    eprintln!(
        "cairn: cannot run {}: {err}",
        PathBuf::from(program).display()
    );
    std::process::exit(127);
}
