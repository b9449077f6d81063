//! `run`: a command confined to its worktrees ([`Sandbox`]), what it did snapshotted, and
//! the secrets it touched put back.
//!
//! The same steps serve every face. [`Engine::run`] runs the command where the engine runs,
//! its output captured, confined to the worktrees and their remembered grants. `cairn run`
//! on a terminal uses a [`Runner`] of its own: the command gets the terminal, the store calls
//! go to the process holding the store ([`RunSteps`]), and a person may widen the sandbox
//! (`--network`, `--allow-write`, `--no-sandbox`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use camino::{Utf8Path, Utf8PathBuf};
use cas::SnapshotId;
use path_policy::{BeneathError, Root};
use serde::{Deserialize, Serialize};

use crate::confine::{
    ConfineError, Confined, Denial, Output, Sandbox, SandboxPolicy, SavedSecrets, hidden_dirs,
    refuse_widening,
};
use crate::engine::{Call, Engine};
use crate::error::{Code, Error, IoError};
use crate::path::RawPath;
use crate::policy::{PolicyOutcome, check_writable};
use crate::spec::{VerbSpec, verb, verbs};
use crate::verbs::policy::PolicyOptions;
use crate::verbs::snapshot::{SnapshotOptions, SnapshotOutcome};
use crate::verbs::status::{StatusOptions, StatusOutcome};
use crate::worktrees::SkippedPath;

/// `run WORKTREE [--also WORKTREE]… [--read-only] -- CMD…`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunOptions {
    /// The worktree the command runs in (its working directory) and may write.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// Other worktrees the command may write, snapshotted and protected the same way.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub also: Vec<Utf8PathBuf>,
    /// Write nowhere but the private temporary directory (for verifiers).
    #[serde(default)]
    pub read_only: bool,
    // `network`, `allow_write` and `no_sandbox` widen the sandbox: only a person on a
    // terminal gives them (`Runner::person`, `Call::person`), so no route or tool takes them.
    /// Allow TCP bind and connect.
    #[serde(default)]
    #[schemars(extend("x-cli-only" = true))]
    pub network: bool,
    /// Also allow writing beneath these paths.
    #[serde(default)]
    #[schemars(with = "Vec<String>", extend("x-cli-only" = true))]
    pub allow_write: Vec<Utf8PathBuf>,
    /// Run unconfined (where Landlock is missing).
    #[serde(default)]
    #[schemars(extend("x-cli-only" = true))]
    pub no_sandbox: bool,
    /// The command and its arguments.
    #[serde(with = "os_strings")]
    #[schemars(with = "Vec<String>")]
    pub command: Vec<OsString>,
}

impl RunOptions {
    /// Run `command` in `worktree`.
    pub fn new<S: Into<OsString>>(
        worktree: impl Into<Utf8PathBuf>,
        command: impl IntoIterator<Item = S>,
    ) -> RunOptions {
        RunOptions {
            worktree: worktree.into(),
            command: command.into_iter().map(Into::into).collect(),
            ..RunOptions::default()
        }
    }

    /// The options that give the command more than its worktrees and their remembered
    /// grants, as the command line spells them.
    fn widening(&self) -> Vec<&'static str> {
        [
            (self.no_sandbox, "--no-sandbox"),
            (!self.allow_write.is_empty(), "--allow-write"),
            (self.network, "--network"),
        ]
        .into_iter()
        .filter_map(|(given, name)| given.then_some(name))
        .collect()
    }
}

/// Serde for a command's words as JSON strings (a word that is not UTF-8 cannot be sent).
mod os_strings {
    use std::ffi::OsString;

    pub(crate) fn serialize<S: serde::Serializer>(
        words: &[OsString],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeSeq};
        let mut seq = s.serialize_seq(Some(words.len()))?;
        for word in words {
            let text = word.to_str().ok_or_else(|| {
                S::Error::custom(format!("{}: not valid UTF-8", word.to_string_lossy()))
            })?;
            seq.serialize_element(text)?;
        }
        seq.end()
    }

    pub(crate) fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<OsString>, D::Error> {
        let words: Vec<String> = serde::Deserialize::deserialize(d)?;
        Ok(words.into_iter().map(OsString::from).collect())
    }
}

/// What `run` did.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunOutcome {
    /// The command's exit status (128 + the signal's number if a signal ended it).
    pub exit_code: i32,
    /// Denied paths (secrets) the command changed, each put back.
    pub violations: Vec<Violation>,
    /// The first worktree's new head.
    pub snapshot: SnapshotId,
    /// Each worktree's new head.
    pub snapshots: Vec<RunSnapshot>,
    /// The policy's name (`workspace-write`, `read-only`, `danger-full-access`).
    pub sandbox: String,
    /// The effective policy the command ran under.
    pub policy: SandboxPolicy,
    /// What the kernel denied the command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied: Option<Vec<Denial>>,
    /// Why what the kernel denied is not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied_unavailable: Option<String>,
    /// The command's stdout, when captured (not on a terminal): its first MiB
    /// ([`crate::limits::MAX_OUTPUT_BYTES`]), bytes that are not UTF-8 replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
    /// Whether stdout was cut at the limit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stdout_cut: bool,
    /// The command's stderr, when captured, as stdout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// Whether stderr was cut at the limit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stderr_cut: bool,
    /// Why this is a refusal (exit 1): the command succeeded but changed denied paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A worktree of a run and its snapshot after it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunSnapshot {
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// Its new head.
    pub snapshot: SnapshotId,
}

/// A denied path the command changed, and whether it was put back.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Violation {
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// The path in it.
    pub path: RawPath,
    /// `created`, `modified` or `deleted`.
    pub change: String,
    /// Where its saved copy was kept, when it could not be put back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
}

/// The store calls of a run, made where the store is: the engine's own methods, or (for
/// `cairn run` when `cairn serve` holds the store) the server's. The store is never held
/// while the command runs.
pub trait RunSteps {
    /// `status` of `worktree`.
    fn status(&self, worktree: &Utf8Path) -> Result<StatusOutcome, Error>;
    /// `policy` of the worktree at `root`, with `take_once`.
    fn take_grants(&self, root: &Utf8Path) -> Result<PolicyOutcome, Error>;
    /// `snapshot` of the worktree at `root`.
    fn snapshot(&self, root: &Utf8Path, message: &str) -> Result<SnapshotOutcome, Error>;
}

/// A run's store calls on an engine in this process.
struct Here<'a> {
    engine: &'a Engine,
    call: &'a Call<'a>,
}

impl RunSteps for Here<'_> {
    fn status(&self, worktree: &Utf8Path) -> Result<StatusOutcome, Error> {
        let options = StatusOptions {
            worktree: Some(worktree.to_owned()),
        };
        self.engine.status(self.call, options)
    }

    fn take_grants(&self, root: &Utf8Path) -> Result<PolicyOutcome, Error> {
        let options = PolicyOptions {
            worktree: Some(root.to_owned()),
            take_once: true,
        };
        self.engine.policy(self.call, options)
    }

    fn snapshot(&self, root: &Utf8Path, message: &str) -> Result<SnapshotOutcome, Error> {
        self.engine
            .snapshot(self.call, SnapshotOptions::new(root).message(message))
    }
}

/// One run of a command, with who runs it deciding where its store calls go, what
/// confines it and where its output goes.
pub struct Runner<'a> {
    /// Where the store calls go.
    pub steps: &'a dyn RunSteps,
    /// What confines the command.
    pub sandbox: &'a dyn Sandbox,
    /// The store's folder (hidden from the command; never writable).
    pub store: &'a Utf8Path,
    /// The caller's directory (relative worktrees and `--allow-write` paths).
    pub cwd: &'a Utf8Path,
    /// Where the command's output goes.
    pub output: Output,
    /// A person on a terminal asks: `network`, `allow_write` and `no_sandbox` are taken.
    /// Anyone else is refused them: the command runs where the engine runs, and only a
    /// person may give it more than its worktrees and their remembered grants.
    pub person: bool,
}

/// Why a command was not run, or its worktrees not restored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// No command.
    #[error("cairn run: no command given after --")]
    NoCommand,
    /// An engine opened without a sandbox.
    #[error(
        "{worktree}: this engine has no sandbox (it was opened without one), so it runs no command"
    )]
    NoSandbox {
        /// The worktree.
        worktree: Utf8PathBuf,
    },
    /// The kernel cannot confine the command.
    #[error("{root}: {source}")]
    Unconfined {
        /// The worktree.
        root: Utf8PathBuf,
        /// Why.
        source: ConfineError,
    },
    /// The kernel cannot confine the command, and a person may run it unconfined.
    #[error("{root}: {source}; pass --no-sandbox to run it unconfined")]
    UnconfinedOnTerminal {
        /// The worktree.
        root: Utf8PathBuf,
        /// Why.
        source: ConfineError,
    },
    /// A writable path the sandbox refused.
    #[error("{root}: {why}; the command was not run")]
    Grant {
        /// The worktree.
        root: Utf8PathBuf,
        /// Why.
        why: String,
    },
    /// A remembered grant that no longer holds.
    #[error(
        "{root}: its grant no longer holds ({source}); revoke it with cairn policy revoke {root} --write {grant}"
    )]
    GrantGone {
        /// The worktree.
        root: Utf8PathBuf,
        /// The granted path.
        grant: Utf8PathBuf,
        /// Why.
        source: Box<Error>,
    },
    /// An `--allow-write` path that may not be granted.
    #[error("--allow-write {path}: {source}")]
    AllowWrite {
        /// The path.
        path: Utf8PathBuf,
        /// Why.
        source: Box<Error>,
    },
    /// Starting or preparing the confined command failed.
    #[error(transparent)]
    Confine(ConfineError),
    /// Opening a worktree or saving its secrets failed.
    #[error(transparent)]
    Beneath(BeneathError),
}

crate::error::coded!(RunError);

impl RunError {
    /// Its code.
    pub fn code(&self) -> Code {
        match self {
            RunError::NoCommand => Code::Usage,
            RunError::NoSandbox { .. }
            | RunError::Unconfined { .. }
            | RunError::UnconfinedOnTerminal { .. } => Code::SandboxUnavailable,
            RunError::Grant { .. } | RunError::GrantGone { .. } | RunError::AllowWrite { .. } => {
                Code::InvalidGrant
            }
            RunError::Confine(_) | RunError::Beneath(_) => Code::Io,
        }
    }
}

/// One worktree of a run: where it is, and its secrets saved.
struct Member {
    root: Utf8PathBuf,
    boundary: Root,
    secrets: Box<dyn SavedSecrets>,
}

fn beneath(e: BeneathError) -> Error {
    RunError::Beneath(e).into()
}

/// The paths a capture left out because a deny pattern matched them (secrets).
fn denied(skipped: &[SkippedPath]) -> Vec<Vec<u8>> {
    skipped
        .iter()
        .filter(|s| s.denied_by.is_some())
        .map(|s| s.path.as_bytes().to_vec())
        .collect()
}

impl Runner<'_> {
    /// Runs `options.command`, snapshots each worktree and puts its secrets back (every
    /// worktree's, even when a step fails for one of them; the first failure is returned
    /// after that).
    pub fn run(&self, options: RunOptions) -> Result<RunOutcome, Error> {
        refuse_widening(options.worktree.as_str(), &options.widening(), self.person)?;
        if options.command.is_empty() {
            return Err(RunError::NoCommand.into());
        }
        let cwd = self.cwd;
        // Look around while the store is held, then let go of it while the command runs.
        let mut members: Vec<Member> = Vec::new();
        for worktree in std::iter::once(&options.worktree).chain(&options.also) {
            let status = self.steps.status(&crate::path::absolute(cwd, worktree))?;
            let root = status.worktree;
            if members.iter().any(|m| m.root == root) {
                continue;
            }
            let boundary = Root::open(root.as_std_path()).map_err(beneath)?;
            let secrets = self
                .sandbox
                .save_secrets(&boundary, &denied(&status.skipped))
                .map_err(beneath)?;
            members.push(Member {
                root,
                boundary,
                secrets,
            });
        }
        let root = members[0].root.clone();
        let store_dir =
            std::fs::canonicalize(self.store).map_err(|e| IoError::new(self.store, e))?;
        let policy = self.policy(&options, &members, &store_dir)?;

        let confined = Confined {
            policy: &policy,
            command: &options.command,
            dir: root.as_std_path(),
            output: self.output,
            env: &[],
            timeout: None,
            cancel: None,
        };
        let ran = self.sandbox.run(&confined).map_err(|e| match e {
            ConfineError::Unavailable if self.person => RunError::UnconfinedOnTerminal {
                root: root.clone(),
                source: e,
            },
            ConfineError::Unavailable => RunError::Unconfined {
                root: root.clone(),
                source: e,
            },
            ConfineError::Grant(why) => RunError::Grant {
                root: root.clone(),
                why,
            },
            other => RunError::Confine(other),
        })?;

        // Snapshot what the command did, then put every secret back as it was.
        let message = format!(
            "run: {}",
            options
                .command
                .iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" ")
        );
        let mut violations = Vec::new();
        let mut snapshots = Vec::new();
        let mut kept_aside = Vec::new();
        let mut failed: Option<Error> = None;
        for (i, m) in members.into_iter().enumerate() {
            let after = match self.steps.snapshot(&m.root, &message) {
                Ok(s) => {
                    snapshots.push(RunSnapshot {
                        worktree: m.root.clone(),
                        snapshot: s.snapshot,
                    });
                    denied(&s.skipped)
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
                let kept = p.kept.as_ref().map(|k| k.display().to_string());
                if let Some(kept) = &kept {
                    let path = diff::path_text(&p.path);
                    let shown = if i == 0 {
                        path
                    } else {
                        format!("{}/{path}", m.root)
                    };
                    kept_aside.push(format!(
                        "; {shown} could not be put back (not a directory on its way), saved copy kept at {kept}"
                    ));
                }
                violations.push(Violation {
                    worktree: m.root.clone(),
                    path: RawPath::from(p.path),
                    change: p.change.as_str().to_owned(),
                    kept,
                });
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        let n = violations.len();
        let message = (ran.exit_code == 0 && n > 0).then(|| {
            let mut message = format!(
                "the command changed {n} denied path{}; put back",
                if n == 1 { "" } else { "s" }
            );
            message.extend(kept_aside);
            message
        });
        let (denied, denied_unavailable) = match ran.denied {
            Ok(d) => (Some(d), None),
            Err(why) => (None, Some(why.to_string())),
        };
        let text = |c: &Option<crate::confine::Captured>| {
            c.as_ref()
                .map(|c| (String::from_utf8_lossy(&c.bytes).into_owned(), c.cut))
        };
        let (stdout, stdout_cut) = text(&ran.stdout).map_or((None, false), |(t, c)| (Some(t), c));
        let (stderr, stderr_cut) = text(&ran.stderr).map_or((None, false), |(t, c)| (Some(t), c));
        Ok(RunOutcome {
            exit_code: ran.exit_code,
            violations,
            snapshot: snapshots[0].snapshot,
            snapshots,
            sandbox: policy.label().to_owned(),
            policy,
            denied,
            denied_unavailable,
            stdout,
            stdout_cut,
            stderr,
            stderr_cut,
            message,
        })
    }

    /// The policy the command runs under. Next-run grants are spent here, as the run
    /// starts, even if it then refuses.
    fn policy(
        &self,
        options: &RunOptions,
        members: &[Member],
        store_dir: &Path,
    ) -> Result<SandboxPolicy, Error> {
        let roots: Vec<&Utf8Path> = members.iter().map(|m| m.root.as_path()).collect();
        let hidden = hidden_dirs(store_dir, &roots);
        if options.no_sandbox {
            return Ok(SandboxPolicy::DangerFullAccess);
        }
        if options.read_only {
            return Ok(SandboxPolicy::ReadOnly { hidden });
        }
        let mut writable_roots: Vec<PathBuf> = Vec::new();
        let mut network = options.network;
        for m in members {
            writable_roots.push(m.root.clone().into_std_path_buf());
            let policy = self.steps.take_grants(&m.root)?;
            for set in [policy.policy.always, policy.taken.unwrap_or_default()] {
                for grant in &set.writable {
                    // As when it was granted: a grant swapped for a symlink since, or one
                    // that now holds the store, is refused, not followed (and the sandbox
                    // checks the handle it opens again).
                    check_writable(grant, store_dir).map_err(|e| RunError::GrantGone {
                        root: m.root.clone(),
                        grant: grant.clone(),
                        source: Box::new(e),
                    })?;
                    writable_roots.push(grant.clone().into_std_path_buf());
                }
                network |= set.network;
            }
        }
        for path in &options.allow_write {
            // Named as it resolves, as a grant is: a symlink is refused, never followed (it
            // could be swapped while the run starts).
            let given = crate::path::absolute(self.cwd, path);
            check_writable(&given, store_dir).map_err(|e| RunError::AllowWrite {
                path: given.clone(),
                source: Box::new(e),
            })?;
            writable_roots.push(given.into_std_path_buf());
        }
        writable_roots.sort();
        writable_roots.dedup();
        Ok(SandboxPolicy::WorkspaceWrite {
            read_only_subpaths: protected(members),
            writable_roots,
            hidden,
            network,
        })
    }
}

/// What stays read-only inside what is writable: each worktree's `.git` (a directory, or
/// the file of a linked worktree). The store's folder is hidden from the command altogether.
fn protected(members: &[Member]) -> Vec<PathBuf> {
    members
        .iter()
        .map(|m| m.root.join(".git").into_std_path_buf())
        .collect()
}

impl Engine {
    /// Runs a command confined to its worktree (and `also`), where this engine runs, on its
    /// machine: it may write only there, in the worktrees' remembered grants and in a
    /// private temporary directory; it reads everywhere but the store's folder; it has the
    /// network only if a grant gives it. Its stdout and stderr are captured and returned
    /// (each up to [`crate::limits::MAX_OUTPUT_BYTES`]); it gets no stdin. Each worktree is
    /// snapshotted afterwards and its denied paths (secrets) put back. `network`,
    /// `allow_write` and `no_sandbox` are refused (`not_permitted`) unless the call is a
    /// person's ([`Call::person`]): only a person on a terminal widens a sandbox. Needs the sandbox given to [`Engine::with_sandbox`].
    pub fn run(&self, call: &Call, options: RunOptions) -> Result<RunOutcome, Error> {
        refuse_widening(options.worktree.as_str(), &options.widening(), call.person)?;
        let Some(sandbox) = self.sandbox() else {
            return Err(RunError::NoSandbox {
                worktree: options.worktree,
            }
            .into());
        };
        Runner {
            steps: &Here { engine: self, call },
            sandbox,
            store: self.store_path(),
            cwd: &call.cwd,
            output: Output::Capture {
                limit: crate::limits::MAX_OUTPUT_BYTES,
            },
            person: false,
        }
        .run(options)
    }
}

impl Engine {
    /// [`Engine::run`] for [`crate::Outcome`], which holds this large outcome boxed.
    pub(crate) fn run_boxed(
        &self,
        call: &Call,
        options: RunOptions,
    ) -> Result<Box<RunOutcome>, Error> {
        self.run(call, options).map(Box::new)
    }
}

// What each verb of this module says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Run a command in a worktree, confined by the OS sandbox (Landlock): it may write only in the worktree (and `also`), the worktrees' remembered grants and a private $TMPDIR; it reads everywhere but the store; no network unless a grant allows it. The command runs where the engine runs: through cairn serve or cairn mcp, on the server's machine, with no stdin; its stdout and stderr are returned (each cut at 1 MiB). Afterwards each worktree is snapshotted and every denied path (secret) the command changed is put back and listed in `violations`; `denied` lists what the kernel refused it, to ask for with policy_allow. Only a person on a terminal widens the sandbox (`cairn run --network`, `--allow-write`, `--no-sandbox`).
    Run(RunOptions) -> Box<RunOutcome> = "run" via run_boxed [Route, Tool];
}

impl VerbSpec for verbs::Run {
    fn refusal(outcome: &Self::Outcome) -> Option<&str> {
        outcome.message.as_deref()
    }

    const REFUSED: Option<&'static str> = Some(
        "The command succeeded but changed denied paths (secrets), each put back and listed in `violations`; `message` says so. Or what the request names is busy (an error).",
    );

    const EXAMPLE: Option<&'static str> =
        Some(r#"{"worktree": "wt", "command": ["cargo", "test"], "cwd": "/home/agent/project"}"#);
}
