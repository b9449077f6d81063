//! `cairn run`: a command confined to its worktree, and secrets put back afterwards.

use std::path::{Path, PathBuf};

use camino::{Utf8Path, Utf8PathBuf};
use fs_manager::CaptureOptions;
use path_policy::{BeneathError, Root, SandboxPolicy, SecretCopy};

use crate::context::{Ctx, absolute, current_dir};
use crate::error::CliError;
use crate::output::{Report, json_path};

/// Options of `cairn run`.
pub struct RunArgs<'a> {
    pub worktree: &'a Utf8Path,
    pub read_only: bool,
    pub network: bool,
    pub allow_write: &'a [Utf8PathBuf],
    pub no_sandbox: bool,
    pub command: &'a [std::ffi::OsString],
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> CliError + '_ {
    move |e| CliError::store("io", format!("{}: {e}", path.display()))
}

fn beneath(e: BeneathError) -> CliError {
    CliError::store("io", e.to_string())
}

fn denied(skipped: &[fs_manager::Skipped]) -> Vec<Vec<u8>> {
    skipped
        .iter()
        .filter(|s| matches!(s.reason, fs_manager::SkipReason::Denied { .. }))
        .map(|s| s.path.clone())
        .collect()
}

/// A worktree's root, its denied paths now, and the store folder.
type Look = (Utf8PathBuf, Vec<Vec<u8>>, Option<PathBuf>);

/// Where `run` does its store work: in this process, or in the `cairn serve` that holds
/// the store (the command itself always runs here, under this terminal).
enum Steps<'a> {
    Direct(&'a Ctx),
    Server {
        client: cairn_client::Client,
        store: Utf8PathBuf,
    },
}

impl<'a> Steps<'a> {
    fn new(ctx: &'a Ctx) -> Result<Steps<'a>, CliError> {
        let store = ctx.store_path()?;
        Ok(
            match cairn_client::Client::connect(&cairn_client::Client::socket_of(&store)) {
                Ok(client) => Steps::Server { client, store },
                Err(_) => Steps::Direct(ctx),
            },
        )
    }

    /// The worktree's root, its denied paths now, and the store folder.
    fn look(&self, worktree: &Utf8Path) -> Result<Look, CliError> {
        match self {
            Steps::Direct(ctx) => {
                let store = ctx.open_existing()?;
                let live =
                    ctx.worktrees()
                        .live_state(&store, worktree, &CaptureOptions::default())?;
                let store_dir = std::fs::canonicalize(store.root()).ok();
                Ok((live.root, denied(&live.skipped), store_dir))
            }
            Steps::Server { store, .. } => {
                let v = self.remote(&["status", worktree.as_str()])?;
                let root = Utf8PathBuf::from(v["worktree"].as_str().unwrap_or_default());
                Ok((root, denied_json(&v), std::fs::canonicalize(store).ok()))
            }
        }
    }

    /// Snapshots the worktree: the new head and the denied paths now.
    fn snapshot(
        &self,
        root: &Utf8Path,
        message: &str,
    ) -> Result<(serde_json::Value, Vec<Vec<u8>>), CliError> {
        match self {
            Steps::Direct(ctx) => {
                let store = ctx.open_existing()?;
                let options = CaptureOptions {
                    message,
                    ..CaptureOptions::default()
                };
                let snap = ctx.worktrees().snapshot(&store, root, &options)?;
                Ok((serde_json::json!(snap.snapshot), denied(&snap.skipped)))
            }
            Steps::Server { .. } => {
                let v = self.remote(&["snapshot", root.as_str(), "-m", message])?;
                Ok((v["snapshot"].clone(), denied_json(&v)))
            }
        }
    }

    /// Runs a command in the server with `--json` and returns its object.
    fn remote(&self, args: &[&str]) -> Result<serde_json::Value, CliError> {
        let Steps::Server { client, store } = self else {
            return Err(CliError::store("server", "no server"));
        };
        let mut argv = vec!["--store".to_owned(), store.to_string(), "--json".to_owned()];
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        let request = cairn_client::CommandRequest {
            argv,
            cwd: current_dir()?,
            color: false,
        };
        let out = client
            .command(&request)
            .map_err(|e| CliError::store("server", e.to_string()))?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
            CliError::store("server", format!("unreadable answer from the server: {e}"))
        })?;
        if out.code != 0 {
            let message = v["error"]["message"]
                .as_str()
                .unwrap_or("failed")
                .to_owned();
            return Err(CliError {
                exit: out.code,
                code: "server",
                message,
            });
        }
        Ok(v)
    }
}

/// Denied paths from a `skipped` list in a command's JSON.
fn denied_json(v: &serde_json::Value) -> Vec<Vec<u8>> {
    v["skipped"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| {
            s["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("denied by pattern"))
        })
        .filter_map(|s| s["path"].as_str().map(|p| p.as_bytes().to_vec()))
        .collect()
}

/// `cairn run WORKTREE [--read-only] [--network] [--allow-write PATH]… [--no-sandbox] -- CMD…`.
pub fn run(ctx: &Ctx, args: &RunArgs<'_>) -> Result<Report, CliError> {
    if args.command.is_empty() {
        return Err(CliError::usage(
            "usage",
            "cairn run: no command given after --",
        ));
    }
    let cwd = current_dir()?;
    let worktree = absolute(&cwd, args.worktree);
    let steps = Steps::new(ctx)?;
    // Look around while holding the store, then let go of it while the command runs.
    let (root, before, store_dir) = steps.look(&worktree)?;
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
        serde_json::to_string(&policy).map_err(|e| CliError::store("encode", e.to_string()))?;
    let exe = std::env::current_exe()
        .map_err(|e| CliError::store("io", format!("current executable: {e}")))?;
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
        .map_err(|e| CliError::store("io", format!("running {:?}: {e}", args.command)))?;
    let exit_code = status.code().unwrap_or(128 + 9);
    if exit_code == SANDBOX_UNAVAILABLE {
        return Err(CliError::usage(
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
        let mut v = serde_json::json!({ "path": path, "change": change });
        match &p.kept {
            None => human.push_str(&format!("put back {path} ({change}; denied path)\n")),
            Some(kept) => {
                let kept = kept.display().to_string();
                human.push_str(&format!(
                    "could not put back {path} ({change}; denied path): something that is not a directory stands in its way; its saved copy is at {kept}\n"
                ));
                v["kept"] = kept.into();
            }
        }
        violations.push(v);
    }
    let json = serde_json::json!({
        "exit_code": exit_code,
        "violations": violations,
        "snapshot": snapshot,
        "sandbox": policy.label(),
    });
    let report = Report::new(json, human).with_exit(exit_code);
    if exit_code == 0 && !violations.is_empty() {
        let n = violations.len();
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
