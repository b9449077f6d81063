//! `cairn run`: a command confined to its worktree, and secrets put back afterwards.

use std::path::{Path, PathBuf};

use cairn_engine::{
    GrantSet, Outcome, PolicyOptions, Request, SkippedPath, SnapshotOptions, StatusOptions,
    TreePath,
};
use camino::{Utf8Path, Utf8PathBuf};
use cas::SnapshotId;
use path_policy::{BeneathError, Root};
use sandbox::audit::{Denial, DenialLog};
use sandbox::{SandboxPolicy, SecretCopy};
use serde::Serialize;

use crate::context::{Ctx, absolute, current_dir};
use crate::error::Error;
use crate::output::{Report, json_path};
use crate::progress::Bar;
use crate::target::Target;

/// Options of `cairn run`.
pub struct RunArgs<'a> {
    pub worktree: &'a Utf8Path,
    pub also: &'a [Utf8PathBuf],
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
    /// The first worktree's new head.
    snapshot: SnapshotId,
    snapshots: Vec<WorktreeSnapshot>,
    sandbox: &'static str,
    /// The effective policy the command ran under.
    policy: SandboxPolicy,
    #[serde(skip_serializing_if = "Option::is_none")]
    denied: Option<Vec<Denial>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    denied_unavailable: Option<String>,
}

/// A worktree of the run and its snapshot after it.
#[derive(Serialize)]
struct WorktreeSnapshot {
    worktree: Utf8PathBuf,
    snapshot: SnapshotId,
}

/// A denied path the command changed, and whether it was put back.
#[derive(Serialize)]
struct Violation {
    worktree: Utf8PathBuf,
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

    /// The worktree's remembered grants and its next-run grants, taken for this run in the
    /// same transaction that reads them (logged as spent): no other run gets those.
    fn take_grants(&self, root: &Utf8Path) -> Result<[GrantSet; 2], Error> {
        let request = Request::Policy(PolicyOptions {
            worktree: Some(root.to_owned()),
            take_once: true,
        });
        match self.call(request)? {
            Outcome::Policy(p) => Ok([p.policy.always, p.taken.unwrap_or_default()]),
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

/// One worktree of a run: where it is, and its secrets saved.
struct Member {
    root: Utf8PathBuf,
    boundary: Root,
    secrets: SecretCopy,
}

/// `cairn run WORKTREE [--also WORKTREE]… [--read-only] [--network] [--allow-write PATH]…
/// [--no-sandbox] -- CMD…`.
pub fn run(ctx: &Ctx, args: &RunArgs<'_>) -> Result<Report, Error> {
    if args.command.is_empty() {
        return Err(Error::usage(
            "usage",
            "cairn run: no command given after --",
        ));
    }
    let cwd = current_dir()?;
    let store = ctx.store_path(&cwd)?;
    let steps = Steps {
        target: Target::for_store(&store, ctx.offline),
        cwd: cwd.clone(),
        bar: Bar::new(),
    };
    // Look around while holding the store, then let go of it while the command runs.
    let mut members: Vec<Member> = Vec::new();
    for worktree in std::iter::once(args.worktree).chain(args.also.iter().map(|w| w.as_path())) {
        let (root, before) = steps.look(&absolute(&cwd, worktree))?;
        if members.iter().any(|m| m.root == root) {
            continue;
        }
        let boundary = Root::open(root.as_std_path()).map_err(beneath)?;
        let secrets = SecretCopy::save(&boundary, &before).map_err(beneath)?;
        members.push(Member {
            root,
            boundary,
            secrets,
        });
    }
    let root = members[0].root.clone();
    let store_dir = std::fs::canonicalize(&store).map_err(io(store.as_std_path()))?;
    let hidden = hidden_dirs(&store_dir, &members);
    let scratch = tempfile::Builder::new()
        .prefix("cairn-run-tmp-")
        .tempdir()
        .map_err(io(Path::new("/tmp")))?;
    // The sandbox opens every writable path without following a symlink.
    let scratch_dir = std::fs::canonicalize(scratch.path()).map_err(io(scratch.path()))?;
    let policy = if args.no_sandbox {
        SandboxPolicy::DangerFullAccess
    } else if args.read_only {
        SandboxPolicy::ReadOnly { hidden }
    } else {
        let mut writable_roots: Vec<PathBuf> = Vec::new();
        let mut network = args.network;
        for m in &members {
            writable_roots.push(m.root.clone().into_std_path_buf());
            // Next-run grants are spent now, as the run starts, even if it then refuses.
            for set in &steps.take_grants(&m.root)? {
                for grant in &set.writable {
                    // As when it was granted: a grant swapped for a symlink since, or one
                    // that now holds the store, is refused, not followed (and the sandbox
                    // checks the handle it opens again).
                    cairn_engine::check_writable(grant, &store_dir).map_err(|e| {
                        Error::usage(
                            "invalid_grant",
                            format!(
                                "{}: its grant no longer holds ({e}); revoke it with cairn policy revoke {} --write {grant}",
                                m.root, m.root
                            ),
                        )
                    })?;
                    writable_roots.push(grant.clone().into_std_path_buf());
                }
                network |= set.network;
            }
        }
        for path in args.allow_write {
            // Named as it resolves, as a grant is: a symlink is refused, never followed (it
            // could be swapped while the run starts).
            let given = absolute(&cwd, path);
            cairn_engine::check_writable(&given, &store_dir).map_err(|e| {
                Error::usage("invalid_grant", format!("--allow-write {given}: {e}"))
            })?;
            writable_roots.push(given.into_std_path_buf());
        }
        writable_roots.sort();
        writable_roots.dedup();
        SandboxPolicy::WorkspaceWrite {
            read_only_subpaths: protected(&members),
            writable_roots,
            hidden,
            network,
        }
    };
    let policy_json =
        serde_json::to_string(&policy).map_err(|e| Error::failure("encode", e.to_string()))?;
    let report = tempfile::NamedTempFile::new().map_err(io(Path::new("/tmp")))?;
    let exe = std::env::current_exe()
        .map_err(|e| Error::failure("io", format!("current executable: {e}")))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("__sandbox-exec")
        .arg(&policy_json)
        .arg(&scratch_dir)
        .arg(report.path())
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
    let log = match policy {
        SandboxPolicy::DangerFullAccess => Err("the command ran unconfined (--no-sandbox)".into()),
        _ => DenialLog::open().map_err(|e| e.to_string()),
    };
    let spawn_error =
        |e: std::io::Error| Error::failure("io", format!("running {:?}: {e}", args.command));
    let mut child = cmd.spawn().map_err(spawn_error)?;
    let pid = child.id();
    let status = child.wait().map_err(spawn_error)?;
    let exit_code = status.code().unwrap_or(128 + 9);
    if exit_code == SANDBOX_UNAVAILABLE {
        return Err(Error::usage(
            "sandbox_unavailable",
            format!(
                "{root}: the command could not be confined (Landlock or a private mount namespace is unavailable) and was not run; pass --no-sandbox to run it unconfined"
            ),
        ));
    }
    let reported = std::fs::read_to_string(report.path()).unwrap_or_default();
    if let (GRANT_REFUSED, Some(why)) = (exit_code, reported.strip_prefix(REFUSED)) {
        return Err(Error::usage(
            "invalid_grant",
            format!("{root}: {why}; the command was not run"),
        ));
    }
    let logged = reported.trim() == "1";
    let denials = log.and_then(|log| log.denials(pid, logged).map_err(|e| e.to_string()));

    // Snapshot what the command did, then put every secret back as it was.
    let message = format!(
        "run: {}",
        args.command
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut human = String::new();
    let mut violations = Vec::new();
    let mut snapshots = Vec::new();
    let mut kept_aside = Vec::new();
    // Every worktree's secrets are put back even if a step fails for one of them; the
    // first failure is reported after that.
    let mut failed: Option<Error> = None;
    for m in members {
        let after = match steps.snapshot(&m.root, &message) {
            Ok((snapshot, after)) => {
                snapshots.push(WorktreeSnapshot {
                    worktree: m.root.clone(),
                    snapshot,
                });
                after
            }
            Err(e) => {
                failed.get_or_insert(e);
                // Without a capture, what the command created is unknown: the saved
                // secrets still go back.
                Vec::new()
            }
        };
        let put_back = match m.secrets.put_back(&m.boundary, &after) {
            Ok(put_back) => put_back,
            Err(e) => {
                failed.get_or_insert(beneath(e));
                continue;
            }
        };
        for p in put_back {
            let path = json_path(&p.path);
            let change = p.change.as_str();
            let kept = p.kept.as_ref().map(|k| k.display().to_string());
            let shown = if snapshots.len() == 1 {
                path.clone()
            } else {
                format!("{}/{path}", m.root)
            };
            match &kept {
                None => human.push_str(&format!("put back {shown} ({change}; denied path)\n")),
                Some(kept) => {
                    human.push_str(&format!(
                        "could not put back {shown} ({change}; denied path): something that is not a directory stands in its way; its saved copy is at {kept}\n"
                    ));
                    kept_aside.push(format!(
                        "; {shown} could not be put back (not a directory on its way), saved copy kept at {kept}"
                    ));
                }
            }
            violations.push(Violation {
                worktree: m.root.clone(),
                path: TreePath(p.path.clone()),
                change,
                kept,
            });
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    let notes = if ctx.json {
        Vec::new()
    } else {
        denial_notes(&denials, &root, exit_code)
    };
    let (denied, denied_unavailable) = match denials {
        Ok(d) => (Some(d), None),
        Err(why) => (None, Some(why)),
    };
    let outcome = RunOutcome {
        exit_code,
        violations,
        snapshot: snapshots[0].snapshot,
        snapshots,
        sandbox: policy.label(),
        policy,
        denied,
        denied_unavailable,
    };
    let n = outcome.violations.len();
    let mut report = Report::new(outcome, human).with_exit(exit_code);
    report.notes = notes;
    if exit_code == 0 && n > 0 {
        let mut message = format!(
            "the command changed {n} denied path{}; put back",
            if n == 1 { "" } else { "s" }
        );
        message.extend(kept_aside);
        return Ok(report.refused(message));
    }
    Ok(report)
}

/// For stderr: each denial with the grant that would allow it, or why they are not known
/// when the command failed.
fn denial_notes(
    denials: &Result<Vec<Denial>, String>,
    root: &Utf8Path,
    exit_code: i32,
) -> Vec<String> {
    match denials {
        Ok(denied) => denied
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
        Err(why) if exit_code != 0 => vec![format!("what the sandbox denied is not known: {why}")],
        Err(_) => Vec::new(),
    }
}

/// What the command cannot see: the store's folder, and the user's runtime directory
/// (`$XDG_RUNTIME_DIR`, else `/run/user/UID`) with the session bus and systemd's sockets,
/// through which a command could start programs outside the sandbox; not if a worktree lives
/// there.
fn hidden_dirs(store_dir: &Path, members: &[Member]) -> Vec<PathBuf> {
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| format!("/run/user/{}", rustix::process::getuid().as_raw()).into());
    let runtime = std::fs::canonicalize(runtime)
        .ok()
        .filter(|r| r.is_dir() && !members.iter().any(|m| m.root.as_std_path().starts_with(r)));
    std::iter::once(store_dir.to_owned())
        .chain(runtime)
        .collect()
}

/// What stays read-only inside what is writable: each worktree's `.git` (a directory, or
/// the file of a linked worktree). The store's folder is hidden from the command altogether.
fn protected(members: &[Member]) -> Vec<PathBuf> {
    members
        .iter()
        .map(|m| m.root.join(".git").into_std_path_buf())
        .collect()
}

/// Exit code of the helper when it cannot confine the command.
pub const SANDBOX_UNAVAILABLE: i32 = 231;
/// Exit code of the helper when a writable path is not what may be granted (any more): it
/// then writes [`REFUSED`] and why to its report.
const GRANT_REFUSED: i32 = 232;
/// How the helper's report starts when it refused a writable path.
const REFUSED: &str = "refused: ";

/// The hidden helper: confine this process to the policy, then become the command.
/// It writes to `report` whether Landlock logs the command's denials (`1` or `0`).
pub fn sandbox_exec(
    policy_json: &str,
    scratch: &Path,
    report: &Path,
    command: &[std::ffi::OsString],
) -> ! {
    use std::io::Write as _;
    use std::os::unix::process::CommandExt;
    // Opened before the sandbox closes it off; closed on exec.
    let mut report = std::fs::OpenOptions::new().write(true).open(report).ok();
    let policy: SandboxPolicy = match serde_json::from_str(policy_json) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("cairn: invalid sandbox policy: {e}");
            std::process::exit(2);
        }
    };
    match sandbox::enforce(&policy, scratch) {
        Ok(enforced) => {
            if let Some(r) = report.as_mut() {
                let _ = write!(r, "{}", u8::from(enforced.denials_logged));
            }
            drop(report);
        }
        Err(sandbox::SandboxError::Unavailable) => std::process::exit(SANDBOX_UNAVAILABLE),
        Err(sandbox::SandboxError::Grant(e)) => {
            if let Some(r) = report.as_mut() {
                let _ = write!(r, "{REFUSED}{e}");
            }
            std::process::exit(GRANT_REFUSED);
        }
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
