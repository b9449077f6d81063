//! The CLI's errors are the engine's ([`cairn_engine::Error`]: a code, an exit status and a
//! message naming the path or id); the binary's own failures are [`CliError`]s turned into
//! one. Here too, the last guard against a panic.

pub use cairn_engine::Error;
use cairn_engine::{Code, IoError};
use camino::Utf8PathBuf;

/// A failure of the binary itself (its arguments, its terminal, its server or MCP), not of a
/// verb.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// What clap said of the command line (its first line).
    #[error("{message}")]
    Usage {
        /// The message.
        message: String,
    },
    /// A command that runs only as its own process, reached through another.
    #[error("this command runs on its own")]
    RunsOnItsOwn,
    /// A command that runs only as its own process, not in a server.
    #[error("this command runs only as its own process")]
    OwnProcessOnly,
    /// An argument before `--` that is not UTF-8.
    #[error(
        "{path}: not valid UTF-8 (cairn takes paths and names in UTF-8, except paths after `--`)"
    )]
    ArgumentNotUtf8 {
        /// The argument, quoted.
        path: String,
    },
    /// A current directory that is not UTF-8.
    #[error("{path}: path is not valid UTF-8")]
    DirectoryNotUtf8 {
        /// The directory, quoted.
        path: String,
    },
    /// `man DIR` where DIR is no directory.
    #[error("{dir}: not a directory (the man pages go into an existing one)")]
    NoManDirectory {
        /// The directory.
        dir: Utf8PathBuf,
    },
    /// A socket path taken by something else.
    #[error("{socket}: exists and is not a socket")]
    NotASocket {
        /// The path.
        socket: Utf8PathBuf,
    },
    /// `cairn serve` on a store another process holds.
    #[error(
        "store {path} is held by another process (a running `cairn serve`, or a command); stop it first"
    )]
    StoreHeld {
        /// The store.
        path: Utf8PathBuf,
    },
    /// A grant recorded as a request by a server running another binary.
    #[error(
        "{worktree}: the running cairn serve is another cairn binary than this one, so it recorded the grant as request {request} instead; restart cairn serve"
    )]
    OtherServerBinary {
        /// The worktree.
        worktree: Utf8PathBuf,
        /// The request recorded.
        request: u64,
    },
    /// A person answering no to discarding.
    #[error("nothing discarded in {root}")]
    NotDiscarded {
        /// The worktree.
        root: Utf8PathBuf,
    },
    /// A person answering no to a grant.
    #[error("{root}: nothing granted")]
    NotGranted {
        /// The worktree.
        root: Utf8PathBuf,
    },
    /// `rewind -i` without a terminal.
    #[error(
        "cairn rewind -i draws a picker and needs a terminal on stdin and stderr; without one, name the state: cairn rewind [DIR] --to SNAP (cairn log DIR lists them)"
    )]
    NoTerminal,
    /// `rewind -i` of a worktree with no recorded states.
    #[error("{worktree}: the worktree has no recorded states to rewind to")]
    NothingToRewind {
        /// The worktree.
        worktree: Utf8PathBuf,
    },
    /// A panic caught.
    #[error("internal error, a bug in cairn (please report it): {what}")]
    Panic {
        /// Its message and place.
        what: String,
    },
    /// A blocking task that did not finish.
    #[error("{what}: {source}")]
    Task {
        /// What it did.
        what: String,
        /// Why it did not finish.
        source: tokio::task::JoinError,
    },
    /// The server failed to answer.
    #[error(transparent)]
    Client(cairn_client::ClientError),
    /// The server answered with another verb's outcome.
    #[error("the server answered with the outcome of {verb}")]
    UnexpectedOutcome {
        /// That verb.
        verb: &'static str,
    },
    /// The server started for a mount exited.
    #[error("cairn serve for the mount exited ({status}): {last}")]
    ServerExited {
        /// Its exit status.
        status: std::process::ExitStatus,
        /// The last line of its log.
        last: String,
    },
    /// The server started for a mount did not answer.
    #[error("cairn serve for the mount did not answer on {socket} within 30 s (see {log})")]
    ServerSilent {
        /// Its socket.
        socket: Utf8PathBuf,
        /// Its log.
        log: Utf8PathBuf,
    },
    /// An MCP call cancelled before it ran.
    #[error("cancelled before it started")]
    McpCancelled,
    /// The MCP session failed.
    #[error("{what}: {source}")]
    Mcp {
        /// What failed.
        what: &'static str,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl CliError {
    /// Its code.
    pub fn code(&self) -> Code {
        use CliError as E;
        match self {
            E::Usage { .. } | E::RunsOnItsOwn | E::OwnProcessOnly => Code::Usage,
            E::ArgumentNotUtf8 { .. }
            | E::DirectoryNotUtf8 { .. }
            | E::NoManDirectory { .. }
            | E::NotASocket { .. } => Code::InvalidPath,
            E::StoreHeld { .. } => Code::StoreBusy,
            E::OtherServerBinary { .. } => Code::NotPermitted,
            E::NotDiscarded { .. } | E::NotGranted { .. } => Code::NotConfirmed,
            E::NoTerminal => Code::NoTerminal,
            E::NothingToRewind { .. } => Code::NothingToRewind,
            E::Panic { .. } => Code::Internal,
            E::Task { .. } => Code::Io,
            E::Client(_)
            | E::UnexpectedOutcome { .. }
            | E::ServerExited { .. }
            | E::ServerSilent { .. } => Code::Server,
            E::McpCancelled | E::Mcp { .. } => Code::Mcp,
        }
    }
}

impl From<CliError> for Error {
    fn from(e: CliError) -> Self {
        match e {
            // Refusing to start is the caller's to fix, though a busy store is otherwise a
            // store failure.
            CliError::StoreHeld { .. } => Error::new_usage(e.code(), e),
            e => Error::new(e.code(), e),
        }
    }
}

/// The store-opening failure `e` comes of, if it is one.
pub fn opened_as(e: &Error) -> Option<&cas::OpenError> {
    std::error::Error::source(e)?.downcast_ref()
}

/// The I/O failure `source` on `path` (a path, or what was being done).
pub fn io_error(path: impl std::fmt::Display, source: std::io::Error) -> Error {
    IoError::new(path, source).into()
}

thread_local! {
    /// Whether this thread runs inside [`contain_panics`].
    static CONTAINING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The message and place of the panic [`contain_panics`] caught.
    static CAUGHT: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Runs a command so that a panic ends it as exit 3 with the usual error shape, not exit 101.
///
/// A last guard: store contents never panic (the store contains redb's panics itself), so a
/// panic here is a bug in cairn, and the message says so and where.
pub fn contain_panics<T>(run: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CONTAINING.with(std::cell::Cell::get) {
                let message = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| info.payload().downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".to_owned());
                let at = info
                    .location()
                    .map(|l| format!(" at {}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                CAUGHT.with(|c| *c.borrow_mut() = Some(format!("{message}{at}")));
            } else {
                previous(info);
            }
        }));
    });
    let outer = CONTAINING.with(|c| c.replace(true));
    // Unwind safety: nothing the command touched is used after it failed.
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run));
    CONTAINING.with(|c| c.set(outer));
    caught.unwrap_or_else(|_| {
        let what = CAUGHT
            .with(|c| c.borrow_mut().take())
            .unwrap_or_else(|| "a panic".to_owned());
        Err(CliError::Panic { what }.into())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_exit_3_naming_where() {
        let result: Result<(), Error> = contain_panics(|| panic!("boom {}", 7));
        let e = result.expect_err("the panic is an error");
        assert_eq!((e.exit(), e.code()), (cairn_engine::EXIT_STORE, "internal"));
        assert!(e.to_string().contains("boom 7"), "{e}");
        assert!(e.to_string().contains("error.rs:"), "{e}");
        assert_eq!(contain_panics(|| Ok(5)).expect("no panic"), 5);
    }

    #[test]
    fn the_binary_s_errors_count_as_before() {
        let cases: Vec<(Error, &str, u8)> = vec![
            (
                CliError::StoreHeld { path: "/s".into() }.into(),
                "store_busy",
                cairn_engine::EXIT_USAGE,
            ),
            (
                CliError::NotGranted { root: "/w".into() }.into(),
                "not_confirmed",
                cairn_engine::EXIT_USAGE,
            ),
            (
                CliError::ServerSilent {
                    socket: "/s.sock".into(),
                    log: "/log".into(),
                }
                .into(),
                "server",
                cairn_engine::EXIT_STORE,
            ),
            (
                CliError::McpCancelled.into(),
                "mcp",
                cairn_engine::EXIT_STORE,
            ),
            (
                io_error("terminal", std::io::Error::other("gone")),
                "io",
                cairn_engine::EXIT_STORE,
            ),
        ];
        for (e, code, exit) in cases {
            assert_eq!((e.code(), e.exit()), (code, exit), "{e}");
        }
        let held: Error = CliError::StoreHeld { path: "/s".into() }.into();
        assert_eq!(
            held.to_string(),
            "store /s is held by another process (a running `cairn serve`, or a command); stop it first"
        );
        // The lock wait that ran out elsewhere is a store failure.
        let waited: Error = cas::OpenError::LockTimeout {
            path: "/s".into(),
            waited: std::time::Duration::ZERO,
        }
        .into();
        assert_eq!(
            (waited.code(), waited.exit()),
            ("store_busy", cairn_engine::EXIT_STORE)
        );
        assert!(opened_as(&waited).is_some());
    }
}
