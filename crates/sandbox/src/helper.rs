//! [`Landlock`], the engine's [`Sandbox`]: each command is started by a helper process
//! that confines itself with [`crate::enforce`] and then becomes the command ([`exec`]),
//! so no `unsafe` `pre_exec` runs in a process that may have many threads.

use std::ffi::OsString;
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use cairn_engine::{
    Captured, ConfineError, Confined, DenialsUnknown, Output, ProcessDir, PutBack, Ran, Sandbox,
    SandboxPolicy, SavedSecrets,
};
use path_policy::{BeneathError, Root};

use crate::audit::DenialLog;
use crate::putback::SecretCopy;

/// Exit status of the helper when it cannot confine the command.
pub const SANDBOX_UNAVAILABLE: i32 = 231;
/// Exit status of the helper when a writable path is not what may be granted (any more):
/// it then writes [`REFUSED`] and why to its report.
const GRANT_REFUSED: i32 = 232;
/// How the helper's report starts when it refused a writable path.
const REFUSED: &str = "refused: ";

/// Confines commands with Landlock through a helper: the program `helper`, given `args`
/// and then `POLICY SCRATCH REPORT -- COMMAND…`, calls [`exec`] with those, and given
/// `args` and then `--reap`, calls [`reap`] (`cairn`'s hidden `__sandbox-exec`).
#[derive(Debug, Clone)]
pub struct Landlock {
    helper: PathBuf,
    args: Vec<OsString>,
}

impl Landlock {
    /// Commands started through `helper args…`.
    pub fn new(
        helper: impl Into<PathBuf>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> Landlock {
        Landlock {
            helper: helper.into(),
            args: args.into_iter().map(Into::into).collect(),
        }
    }
}

impl SavedSecrets for SecretCopy {
    fn put_back(
        self: Box<Self>,
        root: &Root,
        now_denied: &[Vec<u8>],
    ) -> Result<Vec<PutBack>, BeneathError> {
        SecretCopy::put_back(*self, root, now_denied)
    }
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> ConfineError + '_ {
    move |source| ConfineError::Io {
        path: path.to_owned(),
        source,
    }
}

impl Sandbox for Landlock {
    fn save_secrets(
        &self,
        root: &Root,
        paths: &[Vec<u8>],
    ) -> Result<Box<dyn SavedSecrets>, BeneathError> {
        Ok(Box::new(SecretCopy::save(root, paths)?))
    }

    fn run(&self, confined: &Confined<'_>) -> Result<Ran, ConfineError> {
        let policy = confined.policy;
        // Named after this process, so that the next run removes it if this one is killed.
        let private = ProcessDir::new("run", |_| {})?;
        let scratch = private.path().join("tmp");
        std::fs::create_dir(&scratch).map_err(io(&scratch))?;
        let report = private.path().join("report");
        std::fs::File::create(&report).map_err(io(&report))?;
        let policy_json = serde_json::to_string(policy).map_err(|e| ConfineError::Io {
            path: scratch.clone(),
            source: std::io::Error::other(e),
        })?;
        let spawn_error = |source| ConfineError::Spawn {
            command: format!("{:?}", confined.command),
            source,
        };
        // The command gets a process group of its own, led by a reaper that kills it when
        // this process ends however it ends (a kill -9 too), so that nothing it started
        // outlives it; unless it is a person's terminal's (its job control needs the
        // command in the foreground group).
        let terminal =
            !matches!(confined.output, Output::Capture { .. }) && std::io::stdin().is_terminal();
        let reaper = if terminal {
            None
        } else {
            Some(Reaper::start(&self.helper, &self.args).map_err(spawn_error)?)
        };
        let mut cmd = Command::new(&self.helper);
        cmd.args(&self.args)
            .arg(&policy_json)
            .arg(&scratch)
            .arg(&report)
            .arg("--")
            .args(confined.command);
        cmd.current_dir(confined.dir)
            .envs(confined.env.iter().map(|(k, v)| (k, v)))
            .env("CAIRN_SANDBOX", policy.label())
            .env("TMPDIR", &scratch);
        if let Some(reaper) = &reaper {
            use std::os::unix::process::CommandExt;
            cmd.process_group(reaper.group());
        }
        if policy.network() {
            cmd.env_remove("CAIRN_SANDBOX_NETWORK_DISABLED");
        } else {
            cmd.env("CAIRN_SANDBOX_NETWORK_DISABLED", "1");
        }
        match confined.output {
            Output::Inherit => {}
            Output::InheritToStderr => {
                cmd.stdout(std::io::stderr());
            }
            Output::Capture { .. } => {
                cmd.stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
            }
        }
        let log = match policy {
            SandboxPolicy::DangerFullAccess => Err(DenialsUnknown::Unconfined),
            _ => DenialLog::open().map_err(|e| DenialsUnknown::Log(e.into())),
        };
        let mut child = cmd.spawn().map_err(spawn_error)?;
        let pid = child.id();
        let (stdout, stderr) = match confined.output {
            Output::Capture { limit } => capture(&mut child, limit),
            _ => (None, None),
        };
        let (status, ended) = match (confined.timeout, &reaper) {
            (Some(limit), Some(reaper)) => {
                wait_for(&mut child, limit, confined.cancel, reaper).map_err(spawn_error)?
            }
            _ => (child.wait().map_err(spawn_error)?, Ended::Itself),
        };
        if confined.timeout.is_none()
            && let Some(reaper) = reaper
        {
            // Without a timeout, what the command started may outlive it, as before.
            reaper.disarm();
        }
        let stdout = stdout.map(|r| r.join().unwrap_or_default());
        let stderr = stderr.map(|r| r.join().unwrap_or_default());
        let signal = std::os::unix::process::ExitStatusExt::signal(&status);
        let exit_code = status
            .code()
            .unwrap_or(128 + signal.unwrap_or(rustix::process::Signal::KILL.as_raw()));
        if exit_code == SANDBOX_UNAVAILABLE {
            return Err(ConfineError::Unavailable);
        }
        let reported = std::fs::read_to_string(&report).unwrap_or_default();
        if let (GRANT_REFUSED, Some(why)) = (exit_code, reported.strip_prefix(REFUSED)) {
            return Err(ConfineError::Grant(why.to_owned()));
        }
        let logged = reported.trim() == "1";
        let denied = log.and_then(|log| {
            log.denials(pid, logged)
                .map_err(|e| DenialsUnknown::Log(e.into()))
        });
        Ok(Ran {
            exit_code,
            signal,
            timed_out: ended == Ended::TimedOut,
            cancelled: ended == Ended::Cancelled,
            denied,
            stdout,
            stderr,
        })
    }
}

/// Why a command waited for by [`wait_for`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// On its own.
    Itself,
    /// Killed past its time.
    TimedOut,
    /// Killed once `cancel` was set.
    Cancelled,
}

/// Waits for `child`, in the process group `reaper` leads, at most `limit` and until
/// `cancel` is set; then kills the group. Either way what is left of the group is killed
/// once the leader is gone, so nothing it started holds its output open. Returns its
/// status, and why it ended.
fn wait_for(
    child: &mut Child,
    limit: std::time::Duration,
    cancel: Option<&std::sync::atomic::AtomicBool>,
    reaper: &Reaper,
) -> std::io::Result<(std::process::ExitStatus, Ended)> {
    // A limit too far to count is none.
    let deadline = std::time::Instant::now().checked_add(limit);
    let kill_group = || reaper.kill_group();
    let ended = loop {
        if let Some(status) = child.try_wait()? {
            kill_group();
            return Ok((status, Ended::Itself));
        }
        if cancel.is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed)) {
            break Ended::Cancelled;
        }
        let now = std::time::Instant::now();
        let left = deadline.map_or(std::time::Duration::MAX, |d| {
            d.saturating_duration_since(now)
        });
        if left.is_zero() {
            break Ended::TimedOut;
        }
        std::thread::sleep(left.min(std::time::Duration::from_millis(10)));
    };
    kill_group();
    Ok((child.wait()?, ended))
}

/// The leader of a command's process group: a helper process (`HELPER ARGS… --reap`,
/// [`reap`]) that kills its group, itself with it, when its stdin, a pipe from this
/// process, ends without a word: when this process ends, however it ends. Dropped, it kills
/// the group and is waited for; [`Reaper::disarm`] lets the group live on instead.
struct Reaper {
    child: Child,
    group: rustix::process::Pid,
    armed: bool,
}

impl Reaper {
    fn start(helper: &Path, args: &[OsString]) -> std::io::Result<Reaper> {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new(helper)
            .args(args)
            .arg(REAP)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        let group = i32::try_from(child.id())
            .ok()
            .and_then(rustix::process::Pid::from_raw);
        match group {
            Some(group) => Ok(Reaper {
                child,
                group,
                armed: true,
            }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                Err(std::io::Error::other("the reaper has no process id"))
            }
        }
    }

    /// Its process group's id, for the command to join.
    fn group(&self) -> i32 {
        self.group.as_raw_nonzero().get()
    }

    fn kill_group(&self) {
        // Gone already (ESRCH) is what is hoped for.
        let _ = rustix::process::kill_process_group(self.group, rustix::process::Signal::KILL);
    }

    /// Tells it to end without killing its group, and waits for it.
    fn disarm(mut self) {
        use std::io::Write as _;
        if let Some(mut stdin) = self.child.stdin.take() {
            let _ = stdin.write_all(b"x");
        }
        let _ = self.child.wait();
        self.armed = false;
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        if self.armed {
            self.kill_group();
        }
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// The argument that makes the helper the reaper of its process group ([`reap`]).
const REAP: &str = "--reap";

/// The reaper ([`Reaper`]): waits for its stdin to end; unless a byte came first, kills its
/// process group (itself with it).
pub fn reap() -> ! {
    let mut byte = [0u8; 1];
    let mut stdin = std::io::stdin().lock();
    let told = loop {
        match stdin.read(&mut byte) {
            Ok(0) => break false,
            Ok(_) => break true,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break false,
        }
    };
    if !told {
        let _ = rustix::process::kill_current_process_group(rustix::process::Signal::KILL);
    }
    std::process::exit(0)
}

type Reading = std::thread::JoinHandle<Captured>;

/// Reads the child's stdout and stderr on threads of their own (so neither pipe fills up
/// while the other is read), each kept up to `limit` bytes and read to its end.
fn capture(child: &mut Child, limit: usize) -> (Option<Reading>, Option<Reading>) {
    fn read(mut from: impl Read + Send + 'static, limit: usize) -> Reading {
        std::thread::spawn(move || {
            let mut out = Captured::default();
            let mut buf = [0u8; 64 << 10];
            loop {
                match from.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        let room = limit.saturating_sub(out.bytes.len());
                        out.bytes.extend_from_slice(&buf[..n.min(room)]);
                        out.cut |= n > room;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            out
        })
    }
    (
        child.stdout.take().map(|o| read(o, limit)),
        child.stderr.take().map(|e| read(e, limit)),
    )
}

/// The helper: confines this process to `policy_json` (a [`SandboxPolicy`]), then becomes
/// `command`. It writes to `report` whether Landlock logs the command's denials (`1` or `0`),
/// or why it refused a writable path.
pub fn exec(policy_json: &str, scratch: &Path, report: &Path, command: &[OsString]) -> ! {
    use std::io::Write as _;
    use std::os::unix::process::CommandExt;
    // Killed when the process that started it ends, however it ends (what the command
    // starts is killed by its group's reaper); the setting outlives the exec below.
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    // Opened before the sandbox closes it off; closed on exec.
    let mut report = std::fs::OpenOptions::new().write(true).open(report).ok();
    let policy: SandboxPolicy = match serde_json::from_str(policy_json) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("cairn: invalid sandbox policy: {e}");
            std::process::exit(2);
        }
    };
    match crate::enforce(&policy, scratch) {
        Ok(enforced) => {
            if let Some(r) = report.as_mut() {
                let _ = write!(r, "{}", u8::from(enforced.denials_logged));
            }
            drop(report);
        }
        Err(crate::SandboxError::Unavailable) => std::process::exit(SANDBOX_UNAVAILABLE),
        Err(crate::SandboxError::Grant(e)) => {
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
    let err = Command::new(program).args(rest).exec();
    eprintln!(
        "cairn: cannot run {}: {err}",
        PathBuf::from(program).display()
    );
    std::process::exit(127);
}

/// [`exec`] with its arguments as the helper is given them: `POLICY SCRATCH REPORT --
/// COMMAND…`, or [`reap`] for `--reap` (for a helper that has no parser of its own); exits 2
/// if they are not that.
pub fn exec_args(args: &[OsString]) -> ! {
    match args {
        [reaper] if reaper == REAP => reap(),
        [policy, scratch, report, dashes, command @ ..] if dashes == "--" => {
            let Some(policy) = policy.to_str() else {
                eprintln!("cairn: the sandbox policy is not UTF-8");
                std::process::exit(2);
            };
            exec(policy, Path::new(scratch), Path::new(report), command)
        }
        _ => {
            eprintln!("cairn: the sandbox helper takes POLICY SCRATCH REPORT -- COMMAND…");
            std::process::exit(2);
        }
    }
}
