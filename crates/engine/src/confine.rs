//! [`Sandbox`]: what `run` asks of the operating system's sandbox, injected by the embedder
//! (`sandbox::Landlock`), so that the engine itself never links Landlock or reads audit
//! records; and the values that pass between the two. Also what `run` and `verify` both
//! rule of a confined command: what it cannot see, and who may widen its confinement.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use camino::Utf8Path;

use path_policy::{BeneathError, Root};
use serde::{Deserialize, Serialize};

use crate::error::{Code, Error};

/// The sandbox a command of `run` is confined in. An engine without one refuses `run`.
pub trait Sandbox: Send + Sync {
    /// Private copies of `paths` (relative to `root`: a worktree's denied paths, its
    /// secrets), taken before the command runs, to be put back after it.
    fn save_secrets(
        &self,
        root: &Root,
        paths: &[Vec<u8>],
    ) -> Result<Box<dyn SavedSecrets>, BeneathError>;

    /// Runs `command` confined to its policy and waits for it to end. The command is not
    /// run at all if it cannot be confined.
    fn run(&self, command: &Confined<'_>) -> Result<Ran, ConfineError>;
}

/// Secrets saved by [`Sandbox::save_secrets`].
pub trait SavedSecrets: Send {
    /// Puts every saved path back as it was beneath `root` and removes denied paths that
    /// are new (`now_denied`: the denied paths found after the command). Returns what the
    /// command had changed. A copy that cannot be put back is kept, and named.
    fn put_back(
        self: Box<Self>,
        root: &Root,
        now_denied: &[Vec<u8>],
    ) -> Result<Vec<PutBack>, BeneathError>;
}

/// What a command run by `run` may do. Serializable, so it can be handed to the helper
/// process that enforces it, and reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "mode", rename_all = "kebab-case")]
pub enum SandboxPolicy {
    /// Read anything, write nothing (but the private temporary directory).
    ReadOnly {
        /// Directories the command cannot see at all.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        hidden: Vec<PathBuf>,
    },
    /// Write only beneath the writable roots (and the private temporary directory).
    WorkspaceWrite {
        /// Directories (or files) the command may change.
        writable_roots: Vec<PathBuf>,
        /// Paths below a writable root meant to stay read-only (each worktree's `.git`).
        #[serde(default)]
        read_only_subpaths: Vec<PathBuf>,
        /// Directories the command cannot see at all: the store's folder, so neither its
        /// files nor its server's socket are in reach.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        hidden: Vec<PathBuf>,
        /// Whether TCP bind and connect are allowed.
        #[serde(default)]
        network: bool,
    },
    /// No sandbox at all.
    DangerFullAccess,
}

impl SandboxPolicy {
    /// Its name, which the command finds in `CAIRN_SANDBOX`.
    pub fn label(&self) -> &'static str {
        match self {
            SandboxPolicy::ReadOnly { .. } => "read-only",
            SandboxPolicy::WorkspaceWrite { .. } => "workspace-write",
            SandboxPolicy::DangerFullAccess => "danger-full-access",
        }
    }

    /// Whether the command may use the network.
    pub fn network(&self) -> bool {
        match self {
            SandboxPolicy::ReadOnly { .. } => false,
            SandboxPolicy::WorkspaceWrite { network, .. } => *network,
            SandboxPolicy::DangerFullAccess => true,
        }
    }
}

/// A command to run confined.
#[derive(Debug)]
pub struct Confined<'a> {
    /// What it may do.
    pub policy: &'a SandboxPolicy,
    /// The program and its arguments.
    pub command: &'a [OsString],
    /// Its working directory.
    pub dir: &'a Path,
    /// Where its output goes.
    pub output: Output,
    /// Environment variables set for it, on top of the caller's.
    pub env: &'a [(OsString, OsString)],
    /// How long it may run: past that, it and every process of its group are killed
    /// (the command then runs in a process group of its own).
    pub timeout: Option<std::time::Duration>,
    /// Once set, it and every process of its group are killed, as past the timeout (only
    /// watched with a timeout).
    pub cancel: Option<&'a std::sync::atomic::AtomicBool>,
}

/// Where a confined command's standard streams go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The caller's own stdin, stdout and stderr (a person's terminal).
    Inherit,
    /// The caller's stdin and stderr; its stdout goes to the caller's stderr too (the
    /// caller's stdout carries its own answer).
    InheritToStderr,
    /// No stdin; stdout and stderr captured, each up to `limit` bytes (the rest is read
    /// and dropped, and the capture marked as cut).
    Capture {
        /// The most bytes kept of each.
        limit: usize,
    },
}

/// How a confined command ended.
#[derive(Debug)]
pub struct Ran {
    /// Its exit status (128 + the signal's number if a signal ended it).
    pub exit_code: i32,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// Whether it outlived [`Confined::timeout`] and was killed for it.
    pub timed_out: bool,
    /// Whether it was killed for [`Confined::cancel`].
    pub cancelled: bool,
    /// What the kernel denied it, or why that cannot be told.
    pub denied: Result<Vec<Denial>, DenialsUnknown>,
    /// Its stdout, when captured.
    pub stdout: Option<Captured>,
    /// Its stderr, when captured.
    pub stderr: Option<Captured>,
}

/// Why what the kernel denied a command cannot be told.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DenialsUnknown {
    /// It ran unconfined, so nothing was denied it.
    #[error("the command ran unconfined (--no-sandbox)")]
    Unconfined,
    /// The kernel's log of denials could not be read.
    #[error(transparent)]
    Log(Box<dyn std::error::Error + Send + Sync>),
}

/// A stream of the command, captured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// Its first bytes, up to the limit.
    pub bytes: Vec<u8>,
    /// Whether more came than the limit.
    pub cut: bool,
}

/// Why a command could not be run confined; it did not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfineError {
    /// The kernel cannot confine it (no Landlock, or no private mount namespace).
    #[error(
        "the command could not be confined (Landlock or a private mount namespace is unavailable) and was not run"
    )]
    Unavailable,
    /// A writable path is not what may be granted (any more): a symlink on its way, a
    /// pseudo file system, missing.
    #[error("{0}")]
    Grant(String),
    /// Starting or waiting for it failed.
    #[error("running {command}: {source}")]
    Spawn {
        /// The command, as text.
        command: String,
        /// The error.
        source: std::io::Error,
    },
    /// Preparing its run failed (its temporary directory, the policy's handover).
    #[error("{}: {source}", path.display())]
    Io {
        /// What was being made or read.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// One access the kernel refused the command.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Denial {
    /// The object: a path (a denied create names its directory), or `ADDR:PORT` for TCP.
    pub path: String,
    /// Landlock's name of the access (`fs.write_file`, `fs.make_reg`, `net.connect_tcp`).
    pub access: String,
}

/// What a command did to a denied path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// It was not there before.
    Created,
    /// It is there, with other bytes, mode, kind or link target.
    Modified,
    /// It is gone (or no longer reachable without passing a symlink).
    Deleted,
}

impl Change {
    /// `created`, `modified` or `deleted`.
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Created => "created",
            Change::Modified => "modified",
            Change::Deleted => "deleted",
        }
    }
}

/// One denied path the command changed, and what was done about it.
#[derive(Debug, Clone)]
pub struct PutBack {
    /// The path, relative to the root.
    pub path: Vec<u8>,
    /// What the command did.
    pub change: Change,
    /// Set when the saved copy could not be put back (something that is not a directory
    /// now stands on its way): where the copy was kept instead.
    pub kept: Option<PathBuf>,
}

/// Options only a person on a terminal may give, asked for by someone else: a command
/// that would run with more than its confinement (`run`'s worktrees and remembered grants,
/// `verify`'s view), or an attestation signed with a key of the machine the engine runs on.
#[derive(Debug, thiserror::Error)]
#[error(
    "{subject}: {widening} may only be given by a person on a terminal (the cairn command line); through a server, a tool or the library a command stays confined to what it was given (ask for more with policy_allow) and nothing is signed with this machine's keys"
)]
pub struct WideningError {
    /// The worktree or snapshot of the call.
    pub subject: String,
    /// The options, as the command line spells them (`--network, --allow-write`).
    pub widening: String,
}

crate::error::coded!(WideningError);

impl WideningError {
    /// Its code.
    pub fn code(&self) -> Code {
        Code::NotPermitted
    }
}

/// Refuses `widening` (options as the command line spells them that give a command more
/// than its confinement, or sign with this machine's keys) unless a person asks: the one
/// rule of `run` and `verify`.
pub(crate) fn refuse_widening(
    subject: &str,
    widening: &[&'static str],
    person: bool,
) -> Result<(), Error> {
    if person || widening.is_empty() {
        return Ok(());
    }
    Err(WideningError {
        subject: subject.to_owned(),
        widening: widening.join(", "),
    }
    .into())
}

/// What the command cannot see: the store's folder, and the user's runtime directory
/// (`$XDG_RUNTIME_DIR`, else `/run/user/UID`) with the session bus and systemd's sockets,
/// through which a command could start programs outside the sandbox; not if a worktree lives
/// there.
pub(crate) fn hidden_dirs(store_dir: &Path, roots: &[&Utf8Path]) -> Vec<PathBuf> {
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| format!("/run/user/{}", rustix::process::getuid().as_raw()).into());
    let runtime = std::fs::canonicalize(runtime)
        .ok()
        .filter(|r| r.is_dir() && !roots.iter().any(|root| root.as_std_path().starts_with(r)));
    std::iter::once(store_dir.to_owned())
        .chain(runtime)
        .collect()
}

/// A private folder of this process's in the system's temporary directory,
/// `cairn-KIND-UID/PID-…` (the `cairn-KIND-UID` folder this user's alone), removed with what
/// is in it when dropped. One whose process is gone (killed before it could remove it) is
/// removed by the next one made of its kind, after `clear` was called on it (to detach a
/// mount its dead process served there). What `run`'s commands get as `$TMPDIR` and where
/// `verify`'s views are made.
#[derive(Debug)]
pub struct ProcessDir {
    path: PathBuf,
}

impl ProcessDir {
    /// A new empty folder of kind `kind` (`run`, `verify`).
    pub fn new(kind: &str, clear: fn(&Path)) -> Result<ProcessDir, ConfineError> {
        let parent = kinds_dir(kind)?;
        remove_stale(&parent, clear);
        let made = tempfile::Builder::new()
            .prefix(&format!("{}-", std::process::id()))
            .tempdir_in(&parent)
            .map_err(|source| ConfineError::Io {
                path: parent.clone(),
                source,
            })?;
        // Kept by this guard, not by tempfile's (which would not undo a chmod).
        let path = made.keep();
        let path = std::fs::canonicalize(&path).map_err(|source| ConfineError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(ProcessDir { path })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the folders of kind `kind` whose process is gone, after calling `clear` on
    /// each (what [`ProcessDir::new`] does first).
    pub fn remove_stale(kind: &str, clear: fn(&Path)) {
        let uid = rustix::process::getuid().as_raw();
        remove_stale(
            &std::env::temp_dir().join(format!("cairn-{kind}-{uid}")),
            clear,
        );
    }
}

fn remove_stale(parent: &Path, clear: fn(&Path)) {
    for stale in stale_dirs(parent) {
        clear(&stale);
        remove_all(&stale);
    }
}

impl Drop for ProcessDir {
    fn drop(&mut self) {
        remove_all(&self.path);
    }
}

/// `cairn-KIND-UID` in the system's temporary directory, made if missing, refused unless
/// it is a directory (not a link) of this user's that no one else may enter.
fn kinds_dir(kind: &str) -> Result<PathBuf, ConfineError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let uid = rustix::process::getuid().as_raw();
    let dir = std::env::temp_dir().join(format!("cairn-{kind}-{uid}"));
    let io = |source| ConfineError::Io {
        path: dir.clone(),
        source,
    };
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(e)),
    }
    let meta = std::fs::symlink_metadata(&dir).map_err(io)?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(io(std::io::Error::other(
            "not a private directory of this user's (remove it)",
        )));
    }
    Ok(dir)
}

/// The folders in `parent` whose process is gone.
fn stale_dirs(parent: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| {
            let name = entry.file_name();
            let pid = name
                .to_str()
                .and_then(|n| n.split('-').next())
                .and_then(|p| p.parse::<u32>().ok());
            !pid.is_some_and(|p| Path::new(&format!("/proc/{p}")).exists())
        })
        .map(|entry| entry.path())
        .collect()
}

/// Removes `path` and what is below it, making directories a command made unwritable
/// writable again first if that is what stops it.
fn remove_all(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if std::fs::remove_dir_all(path).is_ok() || std::fs::symlink_metadata(path).is_err() {
        return;
    }
    let mut pending = vec![path.to_owned()];
    while let Some(dir) = pending.pop() {
        if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        if let Ok(entries) = std::fs::read_dir(&dir) {
            pending.extend(entries.flatten().map(|e| e.path()));
        }
    }
    if let Err(e) = std::fs::remove_dir_all(path) {
        tracing::warn!(path = %path.display(), error = %e, "could not remove a private folder");
    }
}
