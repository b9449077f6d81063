//! `cairn run`: a command confined to its worktree, and secrets put back afterwards.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use camino::{Utf8Path, Utf8PathBuf};
use fs_manager::CaptureOptions;
use path_policy::SandboxPolicy;

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

/// Copies a file, symlink or directory tree, keeping modes and link targets.
fn copy_tree(from: &Path, to: &Path) -> Result<(), CliError> {
    let meta = from.symlink_metadata().map_err(io(from))?;
    if meta.file_type().is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(from).map_err(io(from))?, to)
            .map_err(io(to))?;
    } else if meta.is_dir() {
        std::fs::create_dir_all(to).map_err(io(to))?;
        for entry in std::fs::read_dir(from).map_err(io(from))? {
            let entry = entry.map_err(io(from))?;
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
        std::fs::set_permissions(to, meta.permissions()).map_err(io(to))?;
    } else {
        std::fs::copy(from, to).map_err(io(from))?;
    }
    Ok(())
}

/// Everything about a path that a change could alter: kind, mode, bytes, link target,
/// recursively.
fn fingerprint(path: &Path, out: &mut Vec<u8>) {
    let Ok(meta) = path.symlink_metadata() else {
        out.extend_from_slice(b"absent;");
        return;
    };
    use std::os::unix::fs::MetadataExt;
    out.extend_from_slice(format!("{:o};", meta.mode()).as_bytes());
    if meta.file_type().is_symlink() {
        out.extend_from_slice(
            std::fs::read_link(path)
                .unwrap_or_default()
                .as_os_str()
                .as_bytes(),
        );
    } else if meta.is_dir() {
        let mut names: Vec<_> = std::fs::read_dir(path)
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        names.sort();
        for name in names {
            out.extend_from_slice(name.as_bytes());
            out.push(b'/');
            fingerprint(&path.join(&name), out);
        }
    } else {
        out.extend_from_slice(blake3::hash(&std::fs::read(path).unwrap_or_default()).as_bytes());
    }
    out.push(b';');
}

fn remove_any(path: &Path) -> Result<(), CliError> {
    match path.symlink_metadata() {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path).map_err(io(path)),
        Ok(_) => std::fs::remove_file(path).map_err(io(path)),
        Err(_) => Ok(()),
    }
}

fn denied(skipped: &[fs_manager::Skipped]) -> Vec<Vec<u8>> {
    skipped
        .iter()
        .filter(|s| s.reason.starts_with("denied by pattern"))
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
                let live = fs_manager::live_state(&store, worktree, &CaptureOptions::default())?;
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
                let snap = fs_manager::snapshot(&store, root, &options)?;
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
    let backup = tempfile::Builder::new()
        .prefix("cairn-run-secrets-")
        .tempdir()
        .map_err(io(Path::new("/tmp")))?;
    for (i, rel) in before.iter().enumerate() {
        copy_tree(
            &root.as_std_path().join(std::ffi::OsStr::from_bytes(rel)),
            &backup.path().join(i.to_string()),
        )?;
    }
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
    let mut paths: Vec<&Vec<u8>> = before.iter().chain(after.iter()).collect();
    paths.sort();
    paths.dedup();
    let mut violations = Vec::new();
    for rel in paths {
        let live = root.as_std_path().join(std::ffi::OsStr::from_bytes(rel));
        let saved = before
            .iter()
            .position(|b| b == rel)
            .map(|i| backup.path().join(i.to_string()));
        let change = match &saved {
            None => "created",
            Some(_) if live.symlink_metadata().is_err() => "deleted",
            Some(s) => {
                let (mut a, mut b) = (Vec::new(), Vec::new());
                fingerprint(s, &mut a);
                fingerprint(&live, &mut b);
                if a == b {
                    continue;
                }
                "modified"
            }
        };
        remove_any(&live)?;
        if let Some(s) = &saved {
            copy_tree(s, &live)?;
        }
        violations.push(serde_json::json!({ "path": json_path(rel), "change": change }));
    }
    let mut human = String::new();
    for v in &violations {
        human.push_str(&format!(
            "put back {} ({}; denied path)\n",
            v["path"].as_str().unwrap_or_default(),
            v["change"].as_str().unwrap_or_default()
        ));
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
        return Ok(report.refused(format!(
            "the command changed {n} denied path{}; put back",
            if n == 1 { "" } else { "s" }
        )));
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
