//! The engine's error: the failure as the lower layers reported it (sources kept), with a
//! stable code for `--json` and an exit status (2 bad usage or input, 3 store or I/O).

use cas::{MaintenanceError, OpenError, ReadError, RefError, ResolveError, WriteError};

/// Exit status for bad usage or bad input.
pub const EXIT_USAGE: u8 = 2;
/// Exit status for store or I/O failures.
pub const EXIT_STORE: u8 = 3;

/// Why a call failed. The message names the path or id involved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Bad usage or input found by the engine itself.
    #[error("{message}")]
    Usage {
        /// Stable code (`invalid_path`, `not_a_worktree`, ...).
        code: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A store or I/O failure found by the engine itself.
    #[error("{message}")]
    Failure {
        /// Stable code (`io`, `corrupt`, ...).
        code: &'static str,
        /// What failed.
        message: String,
    },
    /// Discarding every change of a task needs the caller's confirmation (`yes`).
    #[error("discarding every change in {root} needs --yes when not run from a terminal")]
    ConfirmationNeeded {
        /// The worktree.
        root: camino::Utf8PathBuf,
    },
    /// An error a `cairn serve` answered with, as it sent it.
    #[error("{message}")]
    Remote {
        /// Its code.
        code: String,
        /// Its message.
        message: String,
        /// Its exit status.
        exit: u8,
    },
    #[error(transparent)]
    #[allow(missing_docs)]
    Open(#[from] OpenError),
    #[error(transparent)]
    #[allow(missing_docs)]
    LockTimeout(#[from] cas::InvalidLockTimeout),
    #[error(transparent)]
    #[allow(missing_docs)]
    Read(#[from] ReadError),
    #[error(transparent)]
    #[allow(missing_docs)]
    Resolve(#[from] ResolveError),
    #[error(transparent)]
    #[allow(missing_docs)]
    Ref(#[from] RefError),
    #[error(transparent)]
    #[allow(missing_docs)]
    Write(#[from] WriteError),
    #[error(transparent)]
    #[allow(missing_docs)]
    Registry(#[from] fs_manager::RegistryError),
    #[error(transparent)]
    #[allow(missing_docs)]
    Maintenance(#[from] MaintenanceError),
    #[error(transparent)]
    #[allow(missing_docs)]
    Storage(#[from] cas::StorageFailure),
    #[error(transparent)]
    #[allow(missing_docs)]
    Store(#[from] cas::StoreError),
    #[error(transparent)]
    #[allow(missing_docs)]
    Scan(#[from] fs_manager::ScanError),
    #[error(transparent)]
    #[allow(missing_docs)]
    Capture(#[from] fs_manager::CaptureError),
    #[error(transparent)]
    #[allow(missing_docs)]
    Checkout(#[from] fs_manager::CheckoutError),
    #[error(transparent)]
    #[allow(missing_docs)]
    Rollback(#[from] fs_manager::RollbackError),
    #[error(transparent)]
    #[allow(missing_docs)]
    Task(#[from] fs_manager::TaskError),
    #[error(transparent)]
    #[allow(missing_docs)]
    Undo(#[from] fs_manager::UndoError),
    #[error(transparent)]
    #[allow(missing_docs)]
    Recover(#[from] fs_manager::RecoverError),
    #[error(transparent)]
    #[allow(missing_docs)]
    Worktree(#[from] fs_manager::WorktreeError),
    #[error(transparent)]
    #[allow(missing_docs)]
    Apart(#[from] fs_manager::StoreOverlap),
    #[error(transparent)]
    #[allow(missing_docs)]
    Git(#[from] GitError),
    #[error(transparent)]
    #[allow(missing_docs)]
    RemoteStore(Box<remote::RemoteError>),
}

impl From<remote::RemoteError> for Error {
    fn from(e: remote::RemoteError) -> Self {
        Error::RemoteStore(Box::new(e))
    }
}

/// A git backend's failure (see [`crate::Git`]): the backend's own error as its source and
/// message, and how the engine counts it.
#[derive(Debug, thiserror::Error)]
#[error("{source}")]
pub struct GitError {
    class: GitErrorClass,
    #[source]
    source: Box<dyn std::error::Error + Send + Sync>,
}

/// How a [`GitError`] counts: its exit status and stable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GitErrorClass {
    /// Bad usage or input (exit 2): `invalid_input`, `branch_exists`, `no_base`, ...
    Usage(&'static str),
    /// A store or git failure (exit 3): `git`, `interrupted`, `corrupt`, ...
    Failure(&'static str),
}

impl GitErrorClass {
    /// The class the engine gives the store failure `e`.
    pub fn of_store(e: &cas::StoreError) -> GitErrorClass {
        match any_store(e) {
            (EXIT_USAGE, code) => GitErrorClass::Usage(code),
            (_, code) => GitErrorClass::Failure(code),
        }
    }
}

impl GitError {
    /// The backend's error `source`, counted as `class`.
    pub fn new(
        class: GitErrorClass,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> GitError {
        GitError {
            class,
            source: source.into(),
        }
    }

    /// How it counts.
    pub fn class(&self) -> GitErrorClass {
        self.class
    }
}

/// An exit status and a code.
type Class = (u8, &'static str);

const fn usage(code: &'static str) -> Class {
    (EXIT_USAGE, code)
}

const fn store(code: &'static str) -> Class {
    (EXIT_STORE, code)
}

impl Error {
    /// Bad usage or input.
    pub fn usage(code: &'static str, message: impl Into<String>) -> Error {
        Error::Usage {
            code,
            message: message.into(),
        }
    }

    /// A store or I/O failure.
    pub fn failure(code: &'static str, message: impl Into<String>) -> Error {
        Error::Failure {
            code,
            message: message.into(),
        }
    }

    /// The stable code `--json` prints.
    pub fn code(&self) -> &str {
        match self {
            Error::Remote { code, .. } => code,
            other => other.class().1,
        }
    }

    /// The exit status: 2 bad usage or input, 3 store or I/O failure.
    pub fn exit(&self) -> u8 {
        match self {
            Error::Remote { exit, .. } => *exit,
            other => other.class().0,
        }
    }

    fn class(&self) -> Class {
        match self.cause_class() {
            // A name longer than the file system takes is the caller's bad path, whichever
            // step tried it.
            class if class == store("io") && names_too_long(self) => usage("invalid_path"),
            class => class,
        }
    }

    fn cause_class(&self) -> Class {
        match self {
            Error::Usage { code, .. } => usage(code),
            Error::Failure { code, .. } => store(code),
            Error::ConfirmationNeeded { .. } => usage("confirmation_needed"),
            Error::Remote { .. } => store("server"),
            Error::Open(e) => open(e),
            Error::LockTimeout(_) => usage("invalid_env"),
            Error::Read(e) => read(e),
            Error::Resolve(e) => resolve(e),
            Error::Ref(e) => reference(e),
            Error::Write(e) => write(e),
            Error::Registry(e) => registry(e),
            Error::Maintenance(e) => maintenance(e),
            Error::Storage(e) => storage(e),
            Error::Store(e) => any_store(e),
            Error::Scan(e) => scan(e),
            Error::Capture(e) => capture(e),
            Error::Checkout(e) => checkout(e),
            Error::Rollback(e) => rollback(e),
            Error::Task(e) => task(e),
            Error::Undo(e) => undo(e),
            Error::Recover(e) => recover(e),
            Error::Worktree(e) => worktree(e),
            Error::Apart(_) => usage("invalid_path"),
            Error::Git(e) => match e.class {
                GitErrorClass::Usage(code) => usage(code),
                GitErrorClass::Failure(code) => store(code),
            },
            Error::RemoteStore(e) => match &**e {
                remote::RemoteError::Store(_) => store("store"),
                e if e.is_usage() => usage(e.code()),
                e => store(e.code()),
            },
        }
    }
}

/// Whether `e` comes of a file name longer than the file system takes (`ENAMETOOLONG`).
fn names_too_long(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(e) = cause {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::InvalidFilename)
        {
            return true;
        }
        cause = e.source();
    }
    false
}

/// The failure to create or use `path`: bad input when its name is too long for the file
/// system, else an I/O failure.
pub(crate) fn io_failure(path: &camino::Utf8Path, e: &std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::InvalidFilename {
        Error::usage("invalid_path", format!("{path}: {e}"))
    } else {
        Error::failure("io", format!("{path}: {e}"))
    }
}

fn open(e: &OpenError) -> Class {
    match e {
        OpenError::Missing { .. } => usage("store_missing"),
        OpenError::LockTimeout { .. } => store("store_busy"),
        OpenError::UnsupportedFormat { .. } | OpenError::Format1Unclaimed { .. } => {
            store("store_format")
        }
        OpenError::Io { .. } => store("io"),
        OpenError::Corrupt { .. } => store("corrupt"),
        OpenError::Database { source, .. } if source.is_corruption() => store("corrupt"),
        _ => store("store"),
    }
}

fn read(e: &ReadError) -> Class {
    match e {
        ReadError::NotFound { .. } => usage("unknown_id"),
        ReadError::Corrupt { .. } => store("corrupt"),
        ReadError::Sink { .. } => store("io"),
        ReadError::Storage(s) => storage(s),
        _ => store("store"),
    }
}

fn resolve(e: &ResolveError) -> Class {
    match e {
        ResolveError::Unknown { .. } => usage("unknown_id"),
        ResolveError::Ambiguous { .. } => usage("ambiguous_id"),
        ResolveError::Storage(s) => storage(s),
        _ => store("store"),
    }
}

fn reference(e: &RefError) -> Class {
    match e {
        RefError::InvalidName { .. } => usage("invalid_name"),
        RefError::NotFound { .. } => usage("unknown_ref"),
        RefError::UnknownSnapshot { .. } => usage("unknown_id"),
        RefError::Storage(s) => storage(s),
        RefError::Write(w) => write(w),
        _ => store("store"),
    }
}

fn write(e: &WriteError) -> Class {
    match e {
        WriteError::Input { .. } => store("io"),
        WriteError::Read(r) => read(r),
        WriteError::Storage(s) => storage(s),
        _ => store("store"),
    }
}

fn registry(e: &fs_manager::RegistryError) -> Class {
    match e {
        fs_manager::RegistryError::Storage(s) => storage(s),
        _ => store("store"),
    }
}

fn maintenance(e: &MaintenanceError) -> Class {
    match e {
        MaintenanceError::Storage(s) => storage(s),
        _ => store("store"),
    }
}

fn storage(e: &cas::StorageFailure) -> Class {
    if e.is_corruption() {
        store("corrupt")
    } else if e.is_out_of_space() {
        store("no_space")
    } else {
        store("store")
    }
}

fn any_store(e: &cas::StoreError) -> Class {
    match e {
        cas::StoreError::Open(e) => open(e),
        cas::StoreError::Read(e) => read(e),
        cas::StoreError::Write(e) => write(e),
        cas::StoreError::Resolve(e) => resolve(e),
        cas::StoreError::Ref(e) => reference(e),
        cas::StoreError::Maintenance(e) => maintenance(e),
        _ => store("store"),
    }
}

fn scan(e: &fs_manager::ScanError) -> Class {
    match e {
        fs_manager::ScanError::Store(e) => any_store(e),
        fs_manager::ScanError::Refused { .. } => usage("invalid_path"),
        _ => store("io"),
    }
}

fn capture(e: &fs_manager::CaptureError) -> Class {
    use fs_manager::CaptureError as E;
    match e {
        E::Missing { .. } | E::NotADirectory { .. } | E::NotUtf8 { .. } => usage("invalid_path"),
        E::NotAWorktree { .. } => usage("not_a_worktree"),
        E::Deny(_) => usage("invalid_config"),
        E::Interrupted(_) => store("interrupted"),
        E::RootChanged(_) => usage("worktree_moved"),
        E::StoreOverlap(_) => usage("invalid_path"),
        E::NotMounted { .. } => usage("not_mounted"),
        E::Mount { .. } => store("mount"),
        E::Scan(e) => scan(e),
        E::Store(e) => any_store(e),
        E::Registry(e) => registry(e),
        _ => store("io"),
    }
}

fn checkout(e: &fs_manager::CheckoutError) -> Class {
    use fs_manager::CheckoutError as E;
    match e {
        E::NotEmpty { .. } => usage("not_empty"),
        E::Interrupted(_) => store("interrupted"),
        E::NotADirectory { .. } | E::UnderAFile { .. } | E::StoreOverlap(_) | E::Refused { .. } => {
            usage("invalid_path")
        }
        E::Store(e) => any_store(e),
        E::Registry(e) => registry(e),
        _ => store("io"),
    }
}

fn rollback(e: &fs_manager::RollbackError) -> Class {
    use fs_manager::RollbackError as E;
    match e {
        E::NotAWorktree { .. } => usage("not_a_worktree"),
        E::NoSuchPath { .. } => usage("invalid_path"),
        E::Blocked { .. } => usage("blocked"),
        E::Deny(_) => usage("invalid_config"),
        E::Capture(e) => capture(e),
        E::Store(e) => any_store(e),
        E::Registry(e) => registry(e),
        E::Unfinished { .. } => store("interrupted"),
        _ => store("io"),
    }
}

fn task(e: &fs_manager::TaskError) -> Class {
    use fs_manager::TaskError as E;
    match e {
        E::NotAWorktree { .. } => usage("not_a_worktree"),
        E::InvalidName { .. } => usage("invalid_name"),
        E::NoCheckpoint { .. } => usage("no_checkpoint"),
        E::NoTask { .. } => usage("no_task"),
        E::NoChanges { .. } => usage("invalid_path"),
        E::Capture(e) => capture(e),
        E::Rollback(e) => rollback(e),
        E::Store(e) => any_store(e),
        E::Registry(e) => registry(e),
        _ => store("io"),
    }
}

fn undo(e: &fs_manager::UndoError) -> Class {
    use fs_manager::UndoError as E;
    match e {
        E::NotAWorktree { .. } => usage("not_a_worktree"),
        E::Interrupted(_) => store("interrupted"),
        E::RootChanged(_) => usage("worktree_moved"),
        E::StoreOverlap(_) => usage("invalid_path"),
        E::Write {
            cause,
            interrupted: false,
        } => rollback(cause),
        E::Write { .. } => store("interrupted"),
        E::Store(e) => any_store(e),
        E::Registry(e) => registry(e),
        _ => store("io"),
    }
}

fn recover(e: &fs_manager::RecoverError) -> Class {
    use fs_manager::RecoverError as E;
    match e {
        E::Missing { .. } => usage("invalid_path"),
        E::Blocked { .. } => usage("blocked"),
        E::RootChanged(_) => usage("worktree_moved"),
        E::StoreOverlap(_) => usage("invalid_path"),
        E::Store(e) => any_store(e),
        E::Registry(e) => registry(e),
        _ => store("io"),
    }
}

fn worktree(e: &fs_manager::WorktreeError) -> Class {
    use fs_manager::WorktreeError as E;
    match e {
        E::NotAWorktree { .. } => usage("not_a_worktree"),
        E::Missing { .. } => usage("invalid_path"),
        E::RootChanged(_) => usage("worktree_moved"),
        E::StoreOverlap(_) => usage("invalid_path"),
        E::Store(e) => any_store(e),
        E::Registry(e) => registry(e),
        _ => store("store"),
    }
}

/// An error as the wire and `--json` carry it: `{"code", "message"}` and the exit status.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ErrorReply {
    /// The stable code.
    pub code: String,
    /// The message.
    pub message: String,
    /// The exit status.
    pub exit: u8,
    /// For [`Error::ConfirmationNeeded`]: the worktree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<camino::Utf8PathBuf>,
}

impl From<&Error> for ErrorReply {
    fn from(e: &Error) -> Self {
        ErrorReply {
            code: e.code().to_owned(),
            message: e.to_string(),
            exit: e.exit(),
            root: match e {
                Error::ConfirmationNeeded { root } => Some(root.clone()),
                _ => None,
            },
        }
    }
}

impl From<ErrorReply> for Error {
    fn from(e: ErrorReply) -> Self {
        match e.root {
            Some(root) if e.code == "confirmation_needed" => Error::ConfirmationNeeded { root },
            _ => Error::Remote {
                code: e.code,
                message: e.message,
                exit: e.exit,
            },
        }
    }
}
