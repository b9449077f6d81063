//! The engine's error: opaque, with a stable [`Code`] for `--json`, an exit status derived
//! from it (2 bad usage or input, 3 store or I/O) and the error it comes of as its
//! [`source`](std::error::Error::source): a lower crate's, or one operation's own typed
//! error (`PolicyError`, `MountsError`, ...), each of which maps its variants to codes.

mod argument;
mod code;
mod lower;

use camino::{Utf8Path, Utf8PathBuf};

pub use argument::ArgumentError;
pub use code::Code;
use lower::Lower;

/// Exit status for bad usage or bad input.
pub const EXIT_USAGE: u8 = 2;
/// Exit status for store or I/O failures.
pub const EXIT_STORE: u8 = 3;

/// Why a call failed. The message names the path or id involved; [`Error::code`] and
/// [`Error::exit`] say how it counts, and [`source`](std::error::Error::source) is the
/// typed error it comes of (downcast it to look closer).
#[derive(Debug)]
pub struct Error(Box<Kind>);

#[derive(Debug)]
enum Kind {
    /// An operation's own error (the engine's or the binary's), counted by its code.
    Own {
        code: Code,
        exit: u8,
        error: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A lower crate's error.
    Lower(Lower),
    /// An error a `cairn serve` answered with, as it sent it.
    Answered {
        code: String,
        message: String,
        exit: u8,
    },
}

impl Error {
    /// The typed `error`, counted as `code`: how the binary's own errors join the engine's.
    pub fn new<E>(code: Code, error: E) -> Error
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        Error::own(code, code.exit(), error)
    }

    /// Like [`Error::new`], but bad usage (exit 2) whatever the code: for `cairn serve`
    /// refusing a store another process holds (`store_busy`, which is otherwise a store
    /// failure: a lock wait that ran out).
    pub fn new_usage<E>(code: Code, error: E) -> Error
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        Error::own(code, EXIT_USAGE, error)
    }

    fn own<E>(code: Code, exit: u8, error: E) -> Error
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        Error(Box::new(Kind::Own {
            code,
            exit,
            error: Box::new(error),
        }))
    }

    fn lower(e: Lower) -> Error {
        Error(Box::new(Kind::Lower(e)))
    }

    /// The stable code `--json` prints; for an error a `cairn serve` answered with, its
    /// code as the server sent it.
    pub fn code(&self) -> &str {
        match &*self.0 {
            Kind::Answered { code, .. } => code,
            Kind::Own { code, .. } => code.as_str(),
            Kind::Lower(e) => e.code().as_str(),
        }
    }

    /// The code as a [`Code`]; `None` only for a server's answer with a code this build
    /// does not know.
    pub fn known_code(&self) -> Option<Code> {
        match &*self.0 {
            Kind::Answered { code, .. } => code.parse().ok(),
            Kind::Own { code, .. } => Some(*code),
            Kind::Lower(e) => Some(e.code()),
        }
    }

    /// The exit status: 2 bad usage or input, 3 store or I/O failure.
    pub fn exit(&self) -> u8 {
        match &*self.0 {
            Kind::Answered { exit, .. } | Kind::Own { exit, .. } => *exit,
            Kind::Lower(e) => e.code().exit(),
        }
    }

    /// For discarding every change of a task without confirmation
    /// ([`DiscardError::ConfirmationNeeded`]): the worktree.
    pub fn confirmation_root(&self) -> Option<&Utf8Path> {
        match self.typed::<DiscardError>()? {
            DiscardError::ConfirmationNeeded { root } => Some(root),
        }
    }

    /// The error this one comes of, when it is a `T`.
    pub(crate) fn typed<T: std::error::Error + 'static>(&self) -> Option<&T> {
        std::error::Error::source(self)?.downcast_ref()
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &*self.0 {
            Kind::Own { error, .. } => std::fmt::Display::fmt(error, f),
            Kind::Lower(e) => std::fmt::Display::fmt(e.error(), f),
            Kind::Answered { message, .. } => f.write_str(message),
        }
    }
}

impl std::error::Error for Error {
    /// The typed error this one comes of (its message is this one's).
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &*self.0 {
            Kind::Own { error, .. } => Some(&**error),
            Kind::Lower(e) => Some(e.error()),
            Kind::Answered { .. } => None,
        }
    }
}

impl Code {
    /// The code the engine gives the store failure `e` (for a [`GitError`] of one).
    pub fn of_store(e: &cas::StoreError) -> Code {
        lower::any_store(e)
    }
}

/// `From<$t> for Error` for each operation's error type `$t`, counted by its `code()`.
macro_rules! coded {
    ($($t:ty),* $(,)?) => {
        $(
            impl From<$t> for $crate::error::Error {
                fn from(e: $t) -> Self {
                    $crate::error::Error::new(e.code(), e)
                }
            }
        )*
    };
}
pub(crate) use coded;

coded!(ArgumentError, ConfigError, DiscardError);

/// Discarding every change of a task needs the caller's confirmation (`yes`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiscardError {
    /// Asked without `yes` where no one can be asked.
    #[error("discarding every change in {root} needs --yes when not run from a terminal")]
    ConfirmationNeeded {
        /// The worktree.
        root: Utf8PathBuf,
    },
}

impl DiscardError {
    /// Its code.
    pub fn code(&self) -> Code {
        match self {
            DiscardError::ConfirmationNeeded { .. } => Code::ConfirmationNeeded,
        }
    }
}

/// A configuration file that cannot be read as one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A deny list (`.cairnignore`, the store's).
    #[error(transparent)]
    Deny(path_policy::DenyError),
}

impl ConfigError {
    /// Its code.
    pub fn code(&self) -> Code {
        Code::InvalidConfig
    }
}

/// An I/O failure on a path; its message is `PATH: CAUSE`.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct IoError {
    path: String,
    source: std::io::Error,
}

impl IoError {
    /// The failure `source` on `path` (a path, or what was being done to one).
    pub fn new(path: impl std::fmt::Display, source: std::io::Error) -> IoError {
        IoError {
            path: path.to_string(),
            source,
        }
    }
}

impl From<IoError> for Error {
    fn from(e: IoError) -> Self {
        Error::new(Code::Io, e)
    }
}

/// The failure to create or use `path`: bad input when its name is too long for the file
/// system, else an I/O failure.
pub(crate) fn io_failure(path: &Utf8Path, e: std::io::Error) -> Error {
    let code = if e.kind() == std::io::ErrorKind::InvalidFilename {
        Code::InvalidPath
    } else {
        Code::Io
    };
    Error::new(code, IoError::new(path, e))
}

/// A git backend's failure (see [`crate::Git`]): the backend's own error as its source and
/// message, and the code the engine counts it by.
#[derive(Debug, thiserror::Error)]
#[error("{source}")]
pub struct GitError {
    code: Code,
    #[source]
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl GitError {
    /// The backend's error `source`, counted as `code` (`invalid_input`, `branch_exists`,
    /// `git`, ...; [`Code::of_store`] for a store failure).
    pub fn new(
        code: Code,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> GitError {
        GitError {
            code,
            source: source.into(),
        }
    }

    /// How it counts.
    pub fn code(&self) -> Code {
        self.code
    }
}

/// An error as the wire and `--json` carry it: `{"code", "message"}` and the exit status.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct ErrorReply {
    /// The stable code.
    #[schemars(with = "Code")]
    pub code: String,
    /// The message, naming the path or id involved.
    pub message: String,
    /// The exit status: 2 bad usage or input, 3 a store or I/O failure.
    #[schemars(range(min = 2, max = 3))]
    pub exit: u8,
    /// For [`DiscardError::ConfirmationNeeded`]: the worktree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub root: Option<Utf8PathBuf>,
}

impl From<&Error> for ErrorReply {
    fn from(e: &Error) -> Self {
        ErrorReply {
            code: e.code().to_owned(),
            message: e.to_string(),
            exit: e.exit(),
            root: e.confirmation_root().map(Utf8Path::to_owned),
        }
    }
}

impl From<ErrorReply> for Error {
    fn from(e: ErrorReply) -> Self {
        match e.root {
            Some(root) if e.code == Code::ConfirmationNeeded.as_str() => {
                DiscardError::ConfirmationNeeded { root }.into()
            }
            _ => Error(Box::new(Kind::Answered {
                code: e.code,
                message: e.message,
                exit: e.exit,
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;
    use crate::mounts::MountsError;
    use crate::policy::PolicyError;
    use crate::remotes::RemotesError;
    use crate::verbs::gc::GcError;
    use crate::verbs::run::RunError;
    use crate::verbs::show::ShowError;
    use crate::view::ViewError;

    fn too_long() -> std::io::Error {
        std::io::Error::from(std::io::ErrorKind::InvalidFilename)
    }

    #[test]
    fn each_operation_counts_by_its_code() {
        let root = Utf8PathBuf::from("/w");
        let id = cas::ObjectId::from_bytes([7; cas::ID_LEN]);
        let path = crate::path::tree_paths(None, &[crate::PathArg::from("/etc")]).unwrap_err();
        let cases: Vec<(Error, &str, u8)> = vec![
            (path, "invalid_path", EXIT_USAGE),
            (
                ArgumentError::NotAWorktree { dir: root.clone() }.into(),
                "not_a_worktree",
                EXIT_USAGE,
            ),
            (ArgumentError::NoStore.into(), "no_store", EXIT_USAGE),
            (
                PolicyError::NoSuchRequest {
                    root: root.clone(),
                    id: 3,
                }
                .into(),
                "unknown_request",
                EXIT_USAGE,
            ),
            (
                PolicyError::NotConfirmed {
                    root: root.clone(),
                    grant: "--network".into(),
                }
                .into(),
                "confirmation_needed",
                EXIT_USAGE,
            ),
            (RunError::NoCommand.into(), "usage", EXIT_USAGE),
            (
                RunError::Confine(crate::ConfineError::Unavailable).into(),
                "io",
                EXIT_STORE,
            ),
            (
                MountsError::Busy { root: root.clone() }.into(),
                "mount_busy",
                EXIT_USAGE,
            ),
            (MountsError::NeedsServer.into(), "needs_server", EXIT_USAGE),
            // `mount` starts the next server on this code.
            (MountsError::Stopping.into(), "needs_server", EXIT_USAGE),
            (
                ShowError::BlobNotTree { spec: "abc".into() }.into(),
                "invalid_path",
                EXIT_USAGE,
            ),
            (GcError::GraceWithoutRemote.into(), "usage", EXIT_USAGE),
            (RemotesError::PullOffline.into(), "offline", EXIT_USAGE),
            (ViewError::BlobMissing { id }.into(), "corrupt", EXIT_STORE),
            (
                IoError::new("/w/f", std::io::Error::other("disk")).into(),
                "io",
                EXIT_STORE,
            ),
            (io_failure(&root, too_long()), "invalid_path", EXIT_USAGE),
            (
                DiscardError::ConfirmationNeeded { root: root.clone() }.into(),
                "confirmation_needed",
                EXIT_USAGE,
            ),
            (
                cas::ReadError::NotFound {
                    kind: cas::ObjectKind::Blob,
                    id,
                }
                .into(),
                "unknown_id",
                EXIT_USAGE,
            ),
            (
                cas::OpenError::Io {
                    path: root.clone(),
                    source: std::io::Error::other("disk"),
                }
                .into(),
                "io",
                EXIT_STORE,
            ),
            // A name too long for the file system is the caller's bad path.
            (
                cas::OpenError::Io {
                    path: root.clone(),
                    source: too_long(),
                }
                .into(),
                "invalid_path",
                EXIT_USAGE,
            ),
            (
                GitError::new(Code::BranchExists, std::io::Error::other("exists")).into(),
                "branch_exists",
                EXIT_USAGE,
            ),
            (
                remote::RemoteError::Unknown { name: "o".into() }.into(),
                "unknown_remote",
                EXIT_USAGE,
            ),
        ];
        for (e, code, exit) in cases {
            assert_eq!((e.code(), e.exit()), (code, exit), "{e}");
            assert_eq!(e.known_code().map(Code::as_str), Some(code), "{e}");
            let source = e
                .source()
                .expect("every local error keeps what it comes of");
            assert_eq!(source.to_string(), e.to_string());
        }
    }

    #[test]
    fn source_reaches_the_lower_error() {
        let id = cas::ObjectId::from_bytes([1; cas::ID_LEN]);
        let e: Error = cas::ReadError::NotFound {
            kind: cas::ObjectKind::Snapshot,
            id,
        }
        .into();
        let read = e
            .source()
            .and_then(|s| s.downcast_ref::<cas::ReadError>())
            .expect("the cas error under the engine's");
        assert!(matches!(read, cas::ReadError::NotFound { id: i, .. } if *i == id));
        assert!(e.typed::<cas::ReadError>().is_some());

        // An operation's error keeps its own cause underneath.
        let e: Error = RunError::AllowWrite {
            path: "/x".into(),
            source: Box::new(ArgumentError::NoStore.into()),
        }
        .into();
        let run = e.typed::<RunError>().expect("the run error");
        assert!(
            run.source()
                .is_some_and(|s| s.to_string().contains("no store"))
        );
    }

    #[test]
    fn messages_are_those_of_before() {
        let root = Utf8PathBuf::from("/w");
        let store = std::path::PathBuf::from("/s");
        for (e, message) in [
            (
                Error::from(PolicyError::RequestAndGrant {
                    verb: "allow",
                    id: 4,
                }),
                "policy allow --request 4: grants what the request asks; name no --write or --network with it",
            ),
            (
                PolicyError::RequestAndGrant {
                    verb: "revoke",
                    id: 4,
                }
                .into(),
                "policy revoke --request 4: denies the request; name no --write or --network with it",
            ),
            (
                PolicyError::HoldsStore {
                    path: "/".into(),
                    store: store.clone(),
                    never: " (so `/` is never granted)",
                }
                .into(),
                "/: holds the store's folder /s, which a sandboxed command may never write (so `/` is never granted)",
            ),
            (
                PolicyError::InStore {
                    path: "/s/x".into(),
                    is: "inside",
                    store,
                }
                .into(),
                "/s/x: inside the store's folder /s, which a sandboxed command may never write",
            ),
            (
                RunError::GrantGone {
                    root: root.clone(),
                    grant: "/g".into(),
                    source: Box::new(ArgumentError::NoStore.into()),
                }
                .into(),
                "/w: its grant no longer holds (no store found: pass --store, or set CAIRN_STORE or HOME); revoke it with cairn policy revoke /w --write /g",
            ),
            (
                ArgumentError::CountTooLarge {
                    verb: "log",
                    name: "max_count",
                    number: 9,
                    limit: 8,
                }
                .into(),
                "log: max_count is 9, more than the limit of 8",
            ),
            (
                MountsError::WorktreeExists {
                    root,
                    kind: fs_manager::WorktreeKind::Mounted,
                }
                .into(),
                "/w is a registered Mounted worktree already",
            ),
        ] {
            assert_eq!(e.to_string(), message);
        }
    }

    #[test]
    fn a_reply_comes_back_as_the_error_it_was() {
        let e: Error = DiscardError::ConfirmationNeeded { root: "/w".into() }.into();
        let reply = ErrorReply::from(&e);
        assert_eq!(reply.root.as_deref(), Some(Utf8Path::new("/w")));
        let back = Error::from(reply.clone());
        assert_eq!(back.confirmation_root(), Some(Utf8Path::new("/w")));
        assert_eq!(ErrorReply::from(&back), reply);

        // A code this build does not know stays as the server sent it.
        let newer = Error::from(ErrorReply {
            code: "from_the_future".into(),
            message: "m".into(),
            exit: 3,
            root: None,
        });
        assert_eq!((newer.code(), newer.exit()), ("from_the_future", 3));
        assert_eq!(newer.known_code(), None);
        assert!(newer.source().is_none());
        assert_eq!(newer.to_string(), "m");
    }
}
