//! `verify`: a check run against a snapshot in a throwaway view, inside the sandbox `run`
//! uses, and recorded as an attestation of the snapshot's tree (`cas::Attestation`); or,
//! when the same check of the same tree is recorded already, that record.
//!
//! The view lives in a private folder of the verifying process's under the system's
//! temporary directory (`cairn-verify-UID/PID-…`, a [`ProcessDir`]), unregistered. Where this
//! engine holds its store open (`cairn serve`, a library's engine) and FUSE is available,
//! it is a mount of the snapshot served by this process (the `mount` crate, as `cairn mount`
//! serves one) with a layer of its own in that folder: ready at once, nothing copied, and
//! the check's writes stay in the layer. Else it is a checkout of the snapshot's tree there
//! (a command line opens the store per call: serving a mount from it would hold the store
//! for the check's whole run). Either way it has the snapshot's dependency layers unless
//! `no_deps`, planned for its root and attached as `mount` and `checkout` attach them. It
//! goes when the check ends, whatever happened: the mount is unmounted, then the folder
//! removed. One that a killed `verify` left (its process is gone) is removed by the next
//! `verify` of any store, its mount, no longer served, detached first.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use camino::{Utf8Path, Utf8PathBuf};
use cas::{
    Attestation, AttestationId, CheckOutput, Exit, MAX_CHECK_OUTPUT, PreparedBlob, SnapshotId,
    TreeId, WriteBatch,
};
use serde::{Deserialize, Serialize};

use crate::confine::{Captured, ConfineError, Confined, Output, ProcessDir, SandboxPolicy};
use crate::engine::{Call, Engine, resolve_snapshot};
use crate::error::{Code, Error, IoError};
use crate::mounts::mount_error;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// `verify SNAP [--check NAME] [--env NAME]… [--network] [--timeout SECS] [--rerun] [--sign
/// KEY] -- CMD…`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyOptions {
    /// The snapshot to check (a ref, id prefix or checkpoint name).
    #[schemars(extend("x-snapshot" = true))]
    pub snapshot: String,
    /// The check's name (default: the command's first word).
    #[serde(default)]
    pub check: Option<String>,
    /// An environment variable the check depends on, as NAME=VALUE: the command gets it, the attestation records it, and other values make another check. (The command line also takes a bare NAME, and sends its own value; the engine never reads its own environment, so a request naming only NAME is refused.)
    #[serde(default)]
    pub env: Vec<String>,
    // `network` and `sign` are a person's alone, by `run`'s rule (`refuse_widening`):
    // through a route, a tool or `/v1/call` an agent could reach the network, or have the
    // engine sign a check it named with a key of the machine's (`-- true` named `tests`).
    /// Allow TCP bind and connect.
    #[serde(default)]
    #[schemars(extend("x-cli-only" = true))]
    pub network: bool,
    /// Seconds the command may run; then it, with everything it started, is killed and the check fails.
    #[serde(default, deserialize_with = "crate::engine::whole_number::deserialize")]
    pub timeout: Option<u64>,
    /// Run the check even if the same check of the same tree is recorded, and record another.
    #[serde(default)]
    pub rerun: bool,
    /// An SSH private key file (OpenSSH format, Ed25519 or ECDSA, no passphrase) to sign the attestation with.
    #[serde(default)]
    #[schemars(with = "Option<String>", extend("x-cli-only" = true))]
    pub sign: Option<Utf8PathBuf>,
    /// The command and its arguments.
    pub command: Vec<String>,
    /// Then push the attestation (with the snapshot, if the remote lacks it) to the default remote, as `push SNAP` does; also when the answer is a record made before.
    #[serde(default)]
    pub push: bool,
    /// Leave dependency layers (node_modules, .venv, ... saved by `cairn deps save`) out of the view.
    #[serde(default)]
    pub no_deps: bool,
}

impl VerifyOptions {
    /// The options only a person may give, as the command line spells them.
    fn widening(&self) -> Vec<&'static str> {
        [(self.network, "--network"), (self.sign.is_some(), "--sign")]
            .into_iter()
            .filter_map(|(given, name)| given.then_some(name))
            .collect()
    }

    /// Check `snapshot` with `command`.
    pub fn new<S: Into<String>>(
        snapshot: impl Into<String>,
        command: impl IntoIterator<Item = S>,
    ) -> VerifyOptions {
        VerifyOptions {
            snapshot: snapshot.into(),
            command: command.into_iter().map(Into::into).collect(),
            ..VerifyOptions::default()
        }
    }
}

/// What `verify` found.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VerifyOutcome {
    /// The attestation: the record of this run, or of the one recorded before.
    #[schemars(with = "String")]
    pub attestation: AttestationId,
    /// The snapshot checked.
    #[schemars(with = "String")]
    pub snapshot: SnapshotId,
    /// Its tree, which the attestation is about.
    #[schemars(with = "String")]
    pub tree: TreeId,
    /// The check's name.
    pub check: String,
    /// Whether it passed: exit status 0, not killed, not timed out.
    pub passed: bool,
    /// The command's exit status (128 + the signal's number if a signal ended it).
    pub exit_code: i32,
    /// The signal that ended it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<u32>,
    /// Whether it outlived the timeout and was killed.
    #[serde(default)]
    pub timed_out: bool,
    /// Whether the answer is a record made before (the command did not run).
    pub cached: bool,
    /// The view the command ran in (none when `cached`): `mount`, a FUSE mount of the
    /// snapshot with a throwaway layer, or `checkout`, a throwaway copy of its files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<ViewKind>,
    /// The dependency layers attached in the view, as `checkout` and `mount` attach them
    /// (none when `cached` or with `no_deps`).
    #[serde(default)]
    pub deps: Vec<crate::deps::AttachedDeps>,
    /// How long the command ran.
    pub duration_ms: u64,
    /// Whether the attestation is signed (by this call's key, or before).
    pub signed: bool,
    /// Why this is a refusal (exit 1): the check failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// With `push`: what was sent where.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pushed: Option<VerifyPushed>,
}

/// What `verify --push` sent.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VerifyPushed {
    /// The remote.
    pub remote: String,
    /// Objects sent (the snapshot and what it reaches, where the remote lacked them).
    pub objects_sent: u64,
    /// Attestations (records and signatures) sent; 0 if the remote had them all.
    pub attestations_sent: u64,
}

/// The kind of view a check ran in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ViewKind {
    /// A FUSE mount of the snapshot with a layer of its own, dropped afterwards.
    Mount,
    /// A checkout of the snapshot's files, removed afterwards.
    Checkout,
}

/// Why a check was not run or not recorded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckRunError {
    /// No command.
    #[error("cairn verify {snapshot}: no command given after --")]
    NoCommand {
        /// The snapshot.
        snapshot: String,
    },
    /// A check name that cannot be recorded.
    #[error("--check {name:?}: a check's name is 1 to 255 characters, no control characters")]
    CheckName {
        /// The name.
        name: String,
    },
    /// An `--env` entry that is not NAME or NAME=VALUE.
    #[error("--env {entry:?}: {source}")]
    Env {
        /// The entry.
        entry: String,
        /// Why.
        source: cas::ObjectError,
    },
    /// `--env NAME` without a value: the command line sends its own (when it has one); the
    /// engine never reads its environment, which may be a server's.
    #[error(
        "--env {name}: no value given (give {name}=VALUE; the command line sends NAME's value from its environment, where it is not set, and the engine never reads its own)"
    )]
    EnvUnset {
        /// The name.
        name: String,
    },
    /// A timeout of 0 seconds.
    #[error("--timeout 0: a check needs at least a second")]
    ZeroTimeout,
    /// The signing key cannot sign.
    #[error(transparent)]
    Key(#[from] attest::KeyError),
    /// An engine opened without a sandbox.
    #[error(
        "cairn verify {snapshot}: this engine has no sandbox (it was opened without one), so it runs no check"
    )]
    NoSandbox {
        /// The snapshot.
        snapshot: String,
    },
    /// The kernel cannot confine the command.
    #[error("cairn verify {snapshot}: {source}")]
    Unconfined {
        /// The snapshot.
        snapshot: String,
        /// Why.
        source: ConfineError,
    },
    /// Starting the confined command failed.
    #[error("cairn verify {snapshot}: {source}")]
    Confine {
        /// The snapshot.
        snapshot: String,
        /// Why.
        source: ConfineError,
    },
    /// The caller went away while the check ran ([`Call::cancel`]): it was killed, its view
    /// dropped, and nothing recorded.
    #[error(
        "cairn verify {snapshot}: cancelled, its caller gone; check {check} was stopped and nothing recorded"
    )]
    Cancelled {
        /// The snapshot.
        snapshot: String,
        /// The check.
        check: String,
    },
    /// The recorded attestations of the tree cannot be read.
    #[error(transparent)]
    Record(#[from] cas::AttestationReadError),
    /// `--push` failed after the attestation was recorded.
    #[error("attestation {attestation} is recorded in this store but was not pushed: {source}")]
    NotPushed {
        /// The attestation.
        attestation: AttestationId,
        /// Why the push failed.
        source: Box<Error>,
    },
}

crate::error::coded!(CheckRunError);

impl CheckRunError {
    /// Its code.
    pub fn code(&self) -> Code {
        match self {
            CheckRunError::NoCommand { .. } | CheckRunError::ZeroTimeout => Code::Usage,
            CheckRunError::CheckName { .. } | CheckRunError::Env { .. } => Code::InvalidInput,
            CheckRunError::EnvUnset { .. } => Code::InvalidEnv,
            CheckRunError::Key(attest::KeyError::Read { .. }) => Code::InvalidPath,
            CheckRunError::Key(_) => Code::InvalidInput,
            CheckRunError::NoSandbox { .. } | CheckRunError::Unconfined { .. } => {
                Code::SandboxUnavailable
            }
            CheckRunError::Confine { .. } => Code::Io,
            CheckRunError::Cancelled { .. } => Code::Interrupted,
            CheckRunError::Record(cas::AttestationReadError::Corrupt { .. }) => Code::Corrupt,
            CheckRunError::Record(_) => Code::Store,
            CheckRunError::NotPushed { source, .. } => {
                source.known_code().unwrap_or(Code::RemoteFailed)
            }
        }
    }
}

/// The check's name, command and environment values, checked: what makes two runs the
/// same check.
struct Check {
    name: String,
    command: Vec<String>,
    env: BTreeMap<String, String>,
}

fn check_of(options: &VerifyOptions) -> Result<Check, CheckRunError> {
    let Some(first) = options.command.first() else {
        return Err(CheckRunError::NoCommand {
            snapshot: options.snapshot.clone(),
        });
    };
    let name = options.check.clone().unwrap_or_else(|| first.clone());
    check_name(&name)?;
    let mut env = BTreeMap::new();
    for entry in &options.env {
        let (key, value) = match entry.split_once('=') {
            Some((key, value)) => (key.to_owned(), value.to_owned()),
            // Not this process's value: it may be a server's, not the caller's.
            None => {
                return Err(CheckRunError::EnvUnset {
                    name: entry.clone(),
                });
            }
        };
        cas::validate_env_name(&key).map_err(|source| CheckRunError::Env {
            entry: entry.clone(),
            source,
        })?;
        if value.contains('\0') {
            return Err(CheckRunError::Env {
                entry: entry.clone(),
                source: cas::ObjectError::InvalidField {
                    field: "environment variable value (holds NUL)",
                },
            });
        }
        env.insert(key, value);
    }
    Ok(Check {
        name,
        command: options.command.clone(),
        env,
    })
}

/// Refuses a name no check can have: empty, over 255 bytes, or holding a control character
/// (it goes into a line of a commit message as `merge --require` names it).
pub(crate) fn check_name(name: &str) -> Result<(), CheckRunError> {
    if name.is_empty() || name.len() > 255 || name.chars().any(char::is_control) {
        return Err(CheckRunError::CheckName {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// This machine's name, as the kernel has it.
fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// One check's throwaway view of a snapshot, in a private folder of this process's: `view/`
/// (the check's working directory, with the snapshot's dependency layers as `checkout` or
/// `mount` attaches them) and, for a mount, `layer/` (its layer). Dropped, the
/// mount is unmounted (detached if still in use) and then the folder removed.
struct View {
    mounted: Option<mount::Mounted>,
    root: Utf8PathBuf,
    layer: Utf8PathBuf,
    /// The dependency layers attached.
    deps: Vec<crate::deps::AttachedDeps>,
    /// Removed last, when dropped after the mount.
    _dir: ProcessDir,
}

impl View {
    fn kind(&self) -> ViewKind {
        match self.mounted {
            Some(_) => ViewKind::Mount,
            None => ViewKind::Checkout,
        }
    }
}

impl Drop for View {
    fn drop(&mut self) {
        let Some(mounted) = self.mounted.take() else {
            return;
        };
        // Detached at once; but its session ends only once nothing uses it, which a process
        // the check started out of its group (`setsid`) puts off for as long as it runs:
        // waited for a while, then left to end on its own.
        let (done, ended) = std::sync::mpsc::channel();
        let unmounting = std::thread::Builder::new()
            .name("verify-unmount".to_owned())
            .spawn(move || {
                let _ = done.send(mounted.unmount(true));
            });
        if let Err(e) = unmounting {
            tracing::warn!("verify view {}: {e}", self.root);
            return;
        }
        match ended.recv_timeout(UNMOUNT_WAIT) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("verify view: {e}"),
            Err(_) => tracing::warn!(
                "verify view {}: still in use by a process the check left running; its mount ends when that process does",
                self.root
            ),
        }
    }
}

/// How long a view's unmount is waited for.
const UNMOUNT_WAIT: Duration = Duration::from_secs(2);

/// Removes the views whose process is gone (a killed `verify`, or server), their mounts
/// detached first (what the next `verify` does first; `recover` too).
pub(crate) fn remove_stale_views() {
    ProcessDir::remove_stale(VIEWS, clear_stale_view);
}

/// The kind of the views' private folders (`cairn-verify-UID`).
const VIEWS: &str = "verify";

/// Detaches the mount of a view whose process is gone (a killed `verify`), so its folder
/// can be removed.
fn clear_stale_view(dir: &std::path::Path) {
    if let Some(root) = Utf8Path::from_path(&dir.join(VIEW)) {
        mount::clear_stale(root);
    }
}

/// The view's folder in its private folder.
const VIEW: &str = "view";

fn utf8(path: std::path::PathBuf) -> Result<Utf8PathBuf, Error> {
    Utf8PathBuf::from_path_buf(path)
        .map_err(|p| IoError::new(p.display(), std::io::Error::other("not UTF-8")).into())
}

impl Engine {
    /// Runs a check against a snapshot, or answers with the one recorded: the command runs
    /// in a throwaway view of the snapshot (its working directory), confined by this
    /// engine's sandbox (it may write only in the view and a private $TMPDIR, reads
    /// everywhere but the store, and has no network unless `network`), with no stdin, killed
    /// (with everything it started) after `timeout` seconds. Its run is recorded as an
    /// attestation of the snapshot's tree: its name, command, `env` values, exit status,
    /// duration, start time, host, cairn version and its stdout and stderr (each up to
    /// [`cas::MAX_CHECK_OUTPUT`], cut at the end). If the same check (tree, name, command
    /// and env values) is recorded already, that record is the answer (`cached`), unless
    /// `rerun`. With `sign`, the attestation is signed with that SSH key (SSHSIG, namespace
    /// `cairn-attestation`). `network` and `sign` are refused (`not_permitted`) unless the
    /// call is a person's ([`Call::person`]), by `run`'s rule. A failed check is a refusal
    /// (exit 1).
    pub fn verify(&self, call: &Call, options: VerifyOptions) -> Result<VerifyOutcome, Error> {
        crate::confine::refuse_widening(&options.snapshot, &options.widening(), call.person)?;
        let check = check_of(&options)?;
        if options.timeout == Some(0) {
            return Err(CheckRunError::ZeroTimeout.into());
        }
        let key = options
            .sign
            .as_ref()
            .map(|path| attest::SigningKey::read(&call.path(path)))
            .transpose()
            .map_err(CheckRunError::from)?;
        let (snapshot, tree, recorded) = {
            let store = self.store(Access::Write)?;
            let mut reader = store.reader()?;
            let snapshot = match resolve_snapshot(&reader, &call.cwd, &options.snapshot) {
                Ok(id) => id,
                // A snapshot the store lacks, viewed through a mount: its trees now, its
                // files as the check reads them.
                Err(e)
                    if matches!(e.code(), "unknown_id" | "unknown_ref")
                        && mount::fuse_available().is_ok() =>
                {
                    let Some(shared) = self.shared_store() else {
                        return Err(e);
                    };
                    drop(reader);
                    let fetched =
                        self.fetch_trees_named(call, &store, &shared, &options.snapshot)?;
                    reader = store.reader()?;
                    match fetched {
                        Some((id, _)) => id,
                        None => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            };
            let tree = reader.snapshot(snapshot)?.tree;
            let recorded = if options.rerun {
                None
            } else {
                newest_same(&reader, tree, &check)?
            };
            (snapshot, tree, recorded)
        };
        if let Some((id, attestation)) = recorded {
            let signed = self.sign(id, &attestation, key.as_ref())?;
            let answer = outcome(id, snapshot, &attestation, true, signed);
            return self.push_checked(call, options.push, answer);
        }
        let Some(sandbox) = self.sandbox() else {
            return Err(CheckRunError::NoSandbox {
                snapshot: options.snapshot,
            }
            .into());
        };
        let store_dir = std::fs::canonicalize(self.store_path())
            .map_err(|e| IoError::new(self.store_path(), e))?;

        let mut view = self.view(call, &options, snapshot)?;
        let mut hidden = crate::confine::hidden_dirs(&store_dir, &[&view.root]);
        // The layer is the mount's: the check sees its writes through the mount alone.
        hidden.push(view.layer.clone().into_std_path_buf());
        let policy = SandboxPolicy::WorkspaceWrite {
            writable_roots: vec![view.root.clone().into_std_path_buf()],
            read_only_subpaths: Vec::new(),
            hidden,
            network: options.network,
        };
        let command: Vec<OsString> = check.command.iter().map(OsString::from).collect();
        let env: Vec<(OsString, OsString)> = (check.env.iter())
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect();
        // Without a timeout, still a group of its own: what it started is killed with it.
        let timeout = Duration::from_secs(options.timeout.unwrap_or(u64::MAX));
        let started = jiff::Timestamp::now();
        let clock = Instant::now();
        let ended = std::sync::atomic::AtomicBool::new(false);
        let ran = std::thread::scope(|scope| {
            let ticking = scope
                .spawn(|| tick_while_running(call.progress, &check.name, options.timeout, &ended));
            let ran = sandbox.run(&Confined {
                policy: &policy,
                command: &command,
                dir: view.root.as_std_path(),
                output: Output::Capture {
                    limit: MAX_CHECK_OUTPUT,
                },
                env: &env,
                timeout: Some(timeout),
                cancel: call.cancel,
            });
            ended.store(true, std::sync::atomic::Ordering::Release);
            ticking.thread().unpark();
            ran
        })
        .map_err(|source| match source {
            ConfineError::Unavailable => CheckRunError::Unconfined {
                snapshot: options.snapshot.clone(),
                source,
            },
            source => CheckRunError::Confine {
                snapshot: options.snapshot.clone(),
                source,
            },
        })?;
        let duration_ms = u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX);
        let view_kind = view.kind();
        let deps = std::mem::take(&mut view.deps);
        drop(view);
        // Gone while the check ended, too: a caller that went is answered by nobody.
        let gone = call
            .cancel
            .is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed));
        if ran.cancelled || gone {
            return Err(CheckRunError::Cancelled {
                snapshot: options.snapshot,
                check: check.name,
            }
            .into());
        }

        let mut batch = WriteBatch::new();
        let mut output = |captured: Option<Captured>| {
            let captured = captured.unwrap_or_default();
            let blob = batch.add_blob(PreparedBlob::new(&captured.bytes));
            CheckOutput {
                blob,
                cut: captured.cut,
            }
        };
        let stdout = output(ran.stdout);
        let stderr = output(ran.stderr);
        let attestation = Attestation {
            tree,
            check: check.name,
            command: check.command,
            env: check.env,
            exit: Exit {
                code: ran.exit_code,
                signal: ran.signal.and_then(|s| u32::try_from(s).ok()),
                timed_out: ran.timed_out,
            },
            started,
            duration_ms,
            host: host(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            stdout,
            stderr,
        };
        let id = batch.add_attestation(&attestation);
        let signed = match &key {
            Some(key) => {
                let signature = key
                    .sign(&attestation.encode())
                    .map_err(CheckRunError::from)?;
                batch.add_attestation_signature(id, &key.fingerprint(), signature.to_pem().into());
                true
            }
            None => false,
        };
        self.store(Access::Write)?.write(&batch)?;
        let mut answer = outcome(id, snapshot, &attestation, false, signed);
        answer.view = Some(view_kind);
        answer.deps = deps;
        self.push_checked(call, options.push, answer)
    }

    /// A throwaway view of `snapshot` (named by `options`) with its dependency layers unless
    /// `no_deps`: a mount served here if this engine holds its store open and FUSE is
    /// available, else a checkout.
    fn view(
        &self,
        call: &Call,
        options: &VerifyOptions,
        snapshot: SnapshotId,
    ) -> Result<View, Error> {
        let spec = &options.snapshot;
        let dir =
            ProcessDir::new(VIEWS, clear_stale_view).map_err(|source| CheckRunError::Confine {
                snapshot: spec.to_owned(),
                source,
            })?;
        let root = utf8(dir.path().join(VIEW))?;
        let layer = utf8(dir.path().join("layer"))?;
        std::fs::create_dir(&root).map_err(|e| IoError::new(&root, e))?;
        let (tree, created) = {
            let store = self.store(Access::Read)?;
            let snap = store.reader()?.snapshot(snapshot)?;
            (snap.tree, snap.created)
        };
        let mut view = View {
            mounted: None,
            root,
            layer,
            deps: Vec::new(),
            _dir: dir,
        };
        let planned = if options.no_deps {
            Vec::new()
        } else {
            crate::deps::plan(&*self.store(Access::Write)?, snapshot, &view.root)?
        };
        if let Some(shared) = self.shared_store() {
            let attached: Vec<_> = planned.iter().map(crate::deps::Attach::attached).collect();
            let lazy: Arc<dyn mount::Lazy> = Arc::new(crate::lazy::MountSource {
                shared: shared.clone(),
                remotes: self.lazy.clone(),
                offline: call.offline,
            });
            let readers: mount::Readers = Arc::new(move || {
                shared
                    .read()
                    .unwrap_or_else(PoisonError::into_inner)
                    .reader()
            });
            let started = mount::Mounted::start(
                mount::FuseMountOptions {
                    root: view.root.clone(),
                    layer: view.layer.clone(),
                    base: Some(tree),
                    base_time: std::time::SystemTime::UNIX_EPOCH
                        + Duration::from_secs(created.as_second().max(0).unsigned_abs()),
                    read_only: false,
                    lazy: Some(lazy),
                    grafts: crate::verbs::mount::grafts(&attached),
                },
                readers,
            );
            match started {
                Ok(mounted) => {
                    view.mounted = Some(mounted);
                    view.deps = planned.iter().map(crate::deps::AttachedDeps::of).collect();
                    return Ok(view);
                }
                Err(mount::MountError::Unavailable { .. }) => {}
                Err(e) => return Err(mount_error(e)),
            }
        }
        let store = self.store(Access::Read)?;
        fs_manager::write_tree(&store.reader()?, tree, &view.root, call.progress)?;
        view.deps = self.write_deps(
            &store,
            &view.root,
            &planned,
            crate::verbs::checkout::Registered::No,
            call.progress,
        )?;
        Ok(view)
    }

    /// Signs the recorded attestation `id` with `key` unless that key signed it already;
    /// returns whether it is signed at all.
    fn sign(
        &self,
        id: AttestationId,
        attestation: &Attestation,
        key: Option<&attest::SigningKey>,
    ) -> Result<bool, Error> {
        let store = self.store(Access::Write)?;
        let signatures = store.reader()?.attestation_signatures(id)?;
        let Some(key) = key else {
            return Ok(!signatures.is_empty());
        };
        let fingerprint = key.fingerprint();
        if signatures.iter().any(|(f, _)| *f == fingerprint) {
            return Ok(true);
        }
        let signature = key
            .sign(&attestation.encode())
            .map_err(CheckRunError::from)?;
        let mut batch = WriteBatch::new();
        batch.add_attestation_signature(id, &fingerprint, signature.to_pem().into());
        store.write(&batch)?;
        Ok(true)
    }
}

/// While a check runs, reports its seconds to `progress` (`check NAME`, one item a second,
/// out of its timeout's seconds if it has one), so a long check shows it is alive: the
/// command line draws it, a server streams it.
fn tick_while_running(
    progress: &dyn cas::Progress,
    name: &str,
    timeout: Option<u64>,
    ended: &std::sync::atomic::AtomicBool,
) {
    use std::sync::atomic::Ordering;
    progress.start(&format!("check {name}"), timeout.unwrap_or(0), 0);
    let mut next = Instant::now() + Duration::from_secs(1);
    while !ended.load(Ordering::Acquire) {
        let now = Instant::now();
        if now >= next {
            progress.advance(1, 0);
            next += Duration::from_secs(1);
        } else {
            std::thread::park_timeout(next - now);
        }
    }
    progress.finish();
}

/// The newest recorded attestation of the same check of `tree`.
fn newest_same(
    reader: &cas::Reader,
    tree: TreeId,
    check: &Check,
) -> Result<Option<(AttestationId, Attestation)>, Error> {
    let found = reader.attestations(tree).map_err(CheckRunError::from)?;
    Ok(found
        .into_iter()
        .filter(|(_, a)| a.same_check(tree, &check.name, &check.command, &check.env))
        .max_by_key(|(id, a)| (a.started, *id)))
}

fn outcome(
    id: AttestationId,
    snapshot: SnapshotId,
    attestation: &Attestation,
    cached: bool,
    signed: bool,
) -> VerifyOutcome {
    let passed = attestation.exit.passed();
    let message = (!passed).then(|| {
        let how = if attestation.exit.timed_out {
            "timed out".to_owned()
        } else if let Some(signal) = attestation.exit.signal {
            format!("killed by signal {signal}")
        } else {
            format!("exit status {}", attestation.exit.code)
        };
        format!(
            "check {} of snapshot {snapshot} failed ({how}); attestation {id}",
            attestation.check
        )
    });
    VerifyOutcome {
        attestation: id,
        snapshot,
        tree: attestation.tree,
        check: attestation.check.clone(),
        passed,
        exit_code: attestation.exit.code,
        signal: attestation.exit.signal,
        timed_out: attestation.exit.timed_out,
        cached,
        view: None,
        deps: Vec::new(),
        duration_ms: attestation.duration_ms,
        signed,
        message,
        pushed: None,
    }
}

impl Engine {
    /// `--push`: the attestation of `answer` to the default remote, with its snapshot if the
    /// remote lacks it, as `push SNAP` sends them. A failure says the attestation is
    /// recorded here all the same.
    fn push_checked(
        &self,
        call: &Call,
        push: bool,
        mut answer: VerifyOutcome,
    ) -> Result<VerifyOutcome, Error> {
        if !push {
            return Ok(answer);
        }
        let options = crate::PushOptions {
            snapshots: vec![answer.snapshot.to_string()],
            remote: None,
            deps: false,
        };
        let pushed = self
            .push(call, options)
            .map_err(|source| CheckRunError::NotPushed {
                attestation: answer.attestation,
                source: Box::new(source),
            })?;
        answer.pushed = Some(VerifyPushed {
            remote: pushed.remote,
            objects_sent: pushed.objects_sent,
            attestations_sent: pushed.attestations_sent,
        });
        Ok(answer)
    }
}

verb! {
    /// Run a check against a snapshot in a throwaway view of it (a FUSE mount with its own layer where the engine holds its store open and FUSE is available, else a private checkout) with the snapshot's dependency layers (node_modules, .venv and the like, saved by `deps save`) attached as `checkout` and `mount` attach them unless `no_deps`, confined as `run` is (it may write only in the view and a private $TMPDIR; no network unless allowed), killed after `timeout` seconds, and record it as an attestation of the snapshot's tree: name, command, env values, exit status, duration, start time, host, cairn version, stdout and stderr. The same check of the same tree recorded before (by any snapshot with that tree) is the answer at once (`cached`), unless `rerun`. With `sign`, the attestation is signed with that SSH key; with `push`, it is pushed (with the snapshot) to the default remote. A failed check is a refusal. The command runs where the engine runs, with no stdin.
    Verify(VerifyOptions) -> VerifyOutcome = "verify" via verify [Route, Tool];
}

// What this verb says of itself beyond its types (see `VerbSpec`).

impl VerbSpec for verbs::Verify {
    fn named_snapshots(options: &Self::Options) -> Vec<&str> {
        vec![options.snapshot.as_str()]
    }

    fn refusal(outcome: &Self::Outcome) -> Option<&str> {
        outcome.message.as_deref()
    }

    const REFUSED: Option<&'static str> = Some(
        "The check failed (exit status not 0, killed, or timed out); its attestation is recorded and `message` says how. Or what the request names is busy (an error).",
    );

    const EXAMPLE: Option<&'static str> = Some(
        r#"{"snapshot": "3f2a9c", "check": "tests", "command": ["cargo", "test"], "timeout": 600, "cwd": "/home/agent/project"}"#,
    );
}
