//! The CLI's error: an exit code, a stable code string for `--json`, and a one-line message
//! that names the path or id involved.

use cas::{
    MaintenanceError, OpenError, ReadError, RefError, RegistryError, ResolveError, WriteError,
};

/// Exit code for bad usage or bad input.
pub const EXIT_USAGE: u8 = 2;
/// Exit code for store or I/O failures.
pub const EXIT_STORE: u8 = 3;

#[derive(Debug)]
pub struct CliError {
    pub exit: u8,
    pub code: &'static str,
    pub message: String,
}

impl CliError {
    pub fn usage(code: &'static str, message: impl Into<String>) -> CliError {
        CliError {
            exit: EXIT_USAGE,
            code,
            message: message.into(),
        }
    }

    pub fn store(code: &'static str, message: impl Into<String>) -> CliError {
        CliError {
            exit: EXIT_STORE,
            code,
            message: message.into(),
        }
    }
}

impl From<OpenError> for CliError {
    fn from(e: OpenError) -> Self {
        let message = e.to_string();
        match e {
            OpenError::Missing { .. } => CliError::usage("store_missing", message),
            OpenError::LockTimeout { .. } => CliError::store("store_busy", message),
            OpenError::UnsupportedFormat { .. } => CliError::store("store_format", message),
            OpenError::Io { .. } => CliError::store("io", message),
            OpenError::Corrupt { .. } => CliError::store("corrupt", message),
            OpenError::Database { source, .. } if source.is_corruption() => {
                CliError::store("corrupt", message)
            }
            _ => CliError::store("store", message),
        }
    }
}

impl From<cas::InvalidLockTimeout> for CliError {
    fn from(e: cas::InvalidLockTimeout) -> Self {
        CliError::usage("invalid_env", e.to_string())
    }
}

impl From<ReadError> for CliError {
    fn from(e: ReadError) -> Self {
        let message = e.to_string();
        match e {
            ReadError::NotFound { .. } => CliError::usage("unknown_id", message),
            ReadError::Corrupt { .. } => CliError::store("corrupt", message),
            ReadError::Sink { .. } => CliError::store("io", message),
            ReadError::Storage(s) => s.into(),
            _ => CliError::store("store", message),
        }
    }
}

impl From<ResolveError> for CliError {
    fn from(e: ResolveError) -> Self {
        let message = e.to_string();
        match e {
            ResolveError::Unknown { .. } => CliError::usage("unknown_id", message),
            ResolveError::Ambiguous { .. } => CliError::usage("ambiguous_id", message),
            ResolveError::Storage(s) => s.into(),
            _ => CliError::store("store", message),
        }
    }
}

impl From<RefError> for CliError {
    fn from(e: RefError) -> Self {
        let message = e.to_string();
        match e {
            RefError::InvalidName { .. } => CliError::usage("invalid_name", message),
            RefError::NotFound { .. } => CliError::usage("unknown_ref", message),
            RefError::UnknownSnapshot { .. } => CliError::usage("unknown_id", message),
            RefError::Storage(s) => s.into(),
            RefError::Write(w) => (*w).into(),
            _ => CliError::store("store", message),
        }
    }
}

impl From<WriteError> for CliError {
    fn from(e: WriteError) -> Self {
        let message = e.to_string();
        match e {
            WriteError::Input { .. } => CliError::store("io", message),
            WriteError::Read(r) => r.into(),
            WriteError::Storage(s) => s.into(),
            _ => CliError::store("store", message),
        }
    }
}

impl From<RegistryError> for CliError {
    fn from(e: RegistryError) -> Self {
        let message = e.to_string();
        match e {
            RegistryError::NotRegistered { .. } => CliError::usage("not_a_worktree", message),
            RegistryError::Storage(s) => s.into(),
            _ => CliError::store("store", message),
        }
    }
}

impl From<MaintenanceError> for CliError {
    fn from(e: MaintenanceError) -> Self {
        match e {
            MaintenanceError::Storage(s) => s.into(),
            other => CliError::store("store", other.to_string()),
        }
    }
}

impl From<cas::StorageFailure> for CliError {
    fn from(e: cas::StorageFailure) -> Self {
        let code = if e.is_corruption() {
            "corrupt"
        } else if e.is_out_of_space() {
            "no_space"
        } else {
            "store"
        };
        // The store's own boundary names the store in `e`.
        CliError::store(code, e.to_string())
    }
}

impl From<cas::Error> for CliError {
    fn from(e: cas::Error) -> Self {
        match e {
            cas::Error::Open(e) => e.into(),
            cas::Error::Read(e) => e.into(),
            cas::Error::Write(e) => e.into(),
            cas::Error::Resolve(e) => e.into(),
            cas::Error::Ref(e) => e.into(),
            cas::Error::Registry(e) => e.into(),
            cas::Error::Maintenance(e) => e.into(),
            other => CliError::store("store", other.to_string()),
        }
    }
}

impl From<fs_manager::ScanError> for CliError {
    fn from(e: fs_manager::ScanError) -> Self {
        match e {
            fs_manager::ScanError::Store(e) => e.into(),
            fs_manager::ScanError::Refused { .. } => CliError::usage("invalid_path", e.to_string()),
            other => CliError::store("io", other.to_string()),
        }
    }
}

impl From<fs_manager::CaptureError> for CliError {
    fn from(e: fs_manager::CaptureError) -> Self {
        use fs_manager::CaptureError as E;
        let message = e.to_string();
        match e {
            E::Missing { .. } | E::NotADirectory { .. } | E::NotUtf8 { .. } => {
                CliError::usage("invalid_path", message)
            }
            E::NotAWorktree { .. } => CliError::usage("not_a_worktree", message),
            E::Deny(_) => CliError::usage("invalid_config", message),
            E::Interrupted(_) => CliError::store("interrupted", message),
            E::RootChanged(_) => CliError::usage("worktree_moved", message),
            E::Scan(e) => e.into(),
            E::Store(e) => e.into(),
            _ => CliError::store("io", message),
        }
    }
}

impl From<fs_manager::CheckoutError> for CliError {
    fn from(e: fs_manager::CheckoutError) -> Self {
        use fs_manager::CheckoutError as E;
        let message = e.to_string();
        match e {
            E::NotEmpty { .. } => CliError::usage("not_empty", message),
            E::Interrupted(_) => CliError::store("interrupted", message),
            E::NotADirectory { .. }
            | E::UnderAFile { .. }
            | E::InsideStore { .. }
            | E::Refused { .. } => CliError::usage("invalid_path", message),
            E::Store(e) => e.into(),
            _ => CliError::store("io", message),
        }
    }
}

impl From<fs_manager::RollbackError> for CliError {
    fn from(e: fs_manager::RollbackError) -> Self {
        use fs_manager::RollbackError as E;
        let message = e.to_string();
        match e {
            E::NotAWorktree { .. } => CliError::usage("not_a_worktree", message),
            E::NoSuchPath { .. } => CliError::usage("invalid_path", message),
            E::Blocked { .. } => CliError::usage("blocked", message),
            E::Deny(_) => CliError::usage("invalid_config", message),
            E::Capture(e) => e.into(),
            E::Store(e) => e.into(),
            E::Unfinished { .. } => CliError::store("interrupted", message),
            _ => CliError::store("io", message),
        }
    }
}

impl From<fs_manager::TaskError> for CliError {
    fn from(e: fs_manager::TaskError) -> Self {
        use fs_manager::TaskError as E;
        let message = e.to_string();
        match e {
            E::NotAWorktree { .. } => CliError::usage("not_a_worktree", message),
            E::InvalidName { .. } => CliError::usage("invalid_name", message),
            E::NoCheckpoint { .. } => CliError::usage("no_checkpoint", message),
            E::NoTask { .. } => CliError::usage("no_task", message),
            E::NoChanges { .. } => CliError::usage("invalid_path", message),
            E::Capture(e) => e.into(),
            E::Rollback(e) => e.into(),
            E::Store(e) => e.into(),
            _ => CliError::store("io", message),
        }
    }
}

impl From<fs_manager::UndoError> for CliError {
    fn from(e: fs_manager::UndoError) -> Self {
        use fs_manager::UndoError as E;
        let message = e.to_string();
        match e {
            E::NotAWorktree { .. } => CliError::usage("not_a_worktree", message),
            E::Interrupted(_) => CliError::store("interrupted", message),
            E::RootChanged(_) => CliError::usage("worktree_moved", message),
            E::Write { cause, interrupted } if !interrupted => (*cause).into(),
            E::Write { .. } => CliError::store("interrupted", message),
            E::Store(e) => e.into(),
            _ => CliError::store("io", message),
        }
    }
}

impl From<fs_manager::RecoverError> for CliError {
    fn from(e: fs_manager::RecoverError) -> Self {
        use fs_manager::RecoverError as E;
        let message = e.to_string();
        match e {
            E::Missing { .. } => CliError::usage("invalid_path", message),
            E::Blocked { .. } => CliError::usage("blocked", message),
            E::RootChanged(_) => CliError::usage("worktree_moved", message),
            E::Store(e) => e.into(),
            _ => CliError::store("io", message),
        }
    }
}

impl From<fs_manager::WorktreeError> for CliError {
    fn from(e: fs_manager::WorktreeError) -> Self {
        let message = e.to_string();
        match e {
            fs_manager::WorktreeError::NotAWorktree { .. } => {
                CliError::usage("not_a_worktree", message)
            }
            fs_manager::WorktreeError::Missing { .. } => CliError::usage("invalid_path", message),
            fs_manager::WorktreeError::RootChanged(_) => CliError::usage("worktree_moved", message),
            fs_manager::WorktreeError::Store(e) => e.into(),
            _ => CliError::store("store", message),
        }
    }
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
pub fn contain_panics<T>(run: impl FnOnce() -> Result<T, CliError>) -> Result<T, CliError> {
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
        Err(CliError::store(
            "internal",
            format!("internal error, a bug in cairn (please report it): {what}"),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_exit_3_naming_where() {
        let result: Result<(), CliError> = contain_panics(|| panic!("boom {}", 7));
        let e = result.expect_err("the panic is an error");
        assert_eq!((e.exit, e.code), (EXIT_STORE, "internal"));
        assert!(e.message.contains("boom 7"), "{}", e.message);
        assert!(e.message.contains("error.rs:"), "{}", e.message);
        assert_eq!(contain_panics(|| Ok(5)).expect("no panic"), 5);
    }
}
