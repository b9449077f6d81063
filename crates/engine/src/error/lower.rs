//! How the engine counts the errors of the crates below it: each kind a [`Code`].

use cas::{MaintenanceError, OpenError, ReadError, RefError, ResolveError, WriteError};

use super::Code;

macro_rules! lower_from {
    ($($variant:ident($t:ty)),* $(,)?) => {
        /// A lower crate's error, kept whole.
        #[derive(Debug)]
        pub(super) enum Lower {
            $( $variant($t), )*
        }

        $(
            impl From<$t> for super::Error {
                fn from(e: $t) -> Self {
                    super::Error::lower(Lower::$variant(e))
                }
            }
        )*

        impl Lower {
            /// The error itself.
            pub(super) fn error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
                match self {
                    $( Lower::$variant(e) => e, )*
                }
            }
        }
    };
}

lower_from!(
    Open(OpenError),
    LockTimeout(cas::InvalidLockTimeout),
    Read(ReadError),
    Resolve(ResolveError),
    Ref(RefError),
    Write(WriteError),
    Registry(fs_manager::RegistryError),
    Maintenance(MaintenanceError),
    Storage(cas::StorageFailure),
    Store(cas::StoreError),
    Scan(fs_manager::ScanError),
    Capture(fs_manager::CaptureError),
    Checkout(fs_manager::CheckoutError),
    Rollback(fs_manager::RollbackError),
    Task(fs_manager::TaskError),
    Undo(fs_manager::UndoError),
    Recover(fs_manager::RecoverError),
    Worktree(fs_manager::WorktreeError),
    Apart(fs_manager::StoreOverlap),
    Git(super::GitError),
    Remote(remote::RemoteError),
);

impl Lower {
    /// Its code. A name longer than the file system takes is the caller's bad path,
    /// whichever step tried it.
    pub(super) fn code(&self) -> Code {
        match self.cause_code() {
            Code::Io if names_too_long(self.error()) => Code::InvalidPath,
            code => code,
        }
    }

    fn cause_code(&self) -> Code {
        match self {
            Lower::Open(e) => open(e),
            Lower::LockTimeout(_) => Code::InvalidEnv,
            Lower::Read(e) => read(e),
            Lower::Resolve(e) => resolve(e),
            Lower::Ref(e) => reference(e),
            Lower::Write(e) => write(e),
            Lower::Registry(e) => registry(e),
            Lower::Maintenance(e) => maintenance(e),
            Lower::Storage(e) => storage(e),
            Lower::Store(e) => any_store(e),
            Lower::Scan(e) => scan(e),
            Lower::Capture(e) => capture(e),
            Lower::Checkout(e) => checkout(e),
            Lower::Rollback(e) => rollback(e),
            Lower::Task(e) => task(e),
            Lower::Undo(e) => undo(e),
            Lower::Recover(e) => recover(e),
            Lower::Worktree(e) => worktree(e),
            Lower::Apart(_) => Code::InvalidPath,
            Lower::Git(e) => e.code(),
            Lower::Remote(e) => remote_code(e),
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

/// The remote crate names its own codes; each is one of [`Code`]'s.
fn remote_code(e: &remote::RemoteError) -> Code {
    match e {
        remote::RemoteError::Store(_) => Code::Store,
        // Every code the remote crate gives is in the list (a test checks it).
        e => e.code().parse().unwrap_or(Code::RemoteFailed),
    }
}

fn open(e: &OpenError) -> Code {
    match e {
        OpenError::Missing { .. } => Code::StoreMissing,
        OpenError::LockTimeout { .. } => Code::StoreBusy,
        OpenError::UnsupportedFormat { .. } | OpenError::Format1Unclaimed { .. } => {
            Code::StoreFormat
        }
        OpenError::Io { .. } => Code::Io,
        OpenError::Corrupt { .. } => Code::Corrupt,
        OpenError::Database { source, .. } if source.is_corruption() => Code::Corrupt,
        _ => Code::Store,
    }
}

fn read(e: &ReadError) -> Code {
    match e {
        ReadError::NotFound { .. } => Code::UnknownId,
        ReadError::Corrupt { .. } => Code::Corrupt,
        ReadError::Sink { .. } => Code::Io,
        ReadError::Storage(s) => storage(s),
        _ => Code::Store,
    }
}

fn resolve(e: &ResolveError) -> Code {
    match e {
        ResolveError::Unknown { .. } => Code::UnknownId,
        ResolveError::Ambiguous { .. } => Code::AmbiguousId,
        ResolveError::Storage(s) => storage(s),
        _ => Code::Store,
    }
}

fn reference(e: &RefError) -> Code {
    match e {
        RefError::InvalidName { .. } => Code::InvalidName,
        RefError::NotFound { .. } => Code::UnknownRef,
        RefError::UnknownSnapshot { .. } => Code::UnknownId,
        RefError::Storage(s) => storage(s),
        RefError::Write(w) => write(w),
        _ => Code::Store,
    }
}

fn write(e: &WriteError) -> Code {
    match e {
        WriteError::Input { .. } => Code::Io,
        WriteError::Read(r) => read(r),
        WriteError::Storage(s) => storage(s),
        _ => Code::Store,
    }
}

fn registry(e: &fs_manager::RegistryError) -> Code {
    match e {
        fs_manager::RegistryError::Storage(s) => storage(s),
        _ => Code::Store,
    }
}

fn maintenance(e: &MaintenanceError) -> Code {
    match e {
        MaintenanceError::Storage(s) => storage(s),
        _ => Code::Store,
    }
}

fn storage(e: &cas::StorageFailure) -> Code {
    if e.is_corruption() {
        Code::Corrupt
    } else if e.is_out_of_space() {
        Code::NoSpace
    } else {
        Code::Store
    }
}

pub(super) fn any_store(e: &cas::StoreError) -> Code {
    match e {
        cas::StoreError::Open(e) => open(e),
        cas::StoreError::Read(e) => read(e),
        cas::StoreError::Write(e) => write(e),
        cas::StoreError::Resolve(e) => resolve(e),
        cas::StoreError::Ref(e) => reference(e),
        cas::StoreError::Maintenance(e) => maintenance(e),
        _ => Code::Store,
    }
}

fn scan(e: &fs_manager::ScanError) -> Code {
    match e {
        fs_manager::ScanError::Store(e) => any_store(e),
        fs_manager::ScanError::Refused { .. } => Code::InvalidPath,
        _ => Code::Io,
    }
}

fn capture(e: &fs_manager::CaptureError) -> Code {
    use fs_manager::CaptureError as E;
    match e {
        E::Missing { .. } | E::NotADirectory { .. } | E::NotUtf8 { .. } => Code::InvalidPath,
        E::NotAWorktree { .. } => Code::NotAWorktree,
        E::Deny(_) => Code::InvalidConfig,
        E::Interrupted(_) => Code::Interrupted,
        E::RootChanged(_) => Code::WorktreeMoved,
        E::StoreOverlap(_) => Code::InvalidPath,
        E::NotMounted { .. } => Code::NotMounted,
        E::Mount { .. } => Code::Mount,
        E::Scan(e) => scan(e),
        E::Store(e) => any_store(e),
        E::Registry(e) => registry(e),
        _ => Code::Io,
    }
}

fn checkout(e: &fs_manager::CheckoutError) -> Code {
    use fs_manager::CheckoutError as E;
    match e {
        E::NotEmpty { .. } => Code::NotEmpty,
        E::NotAWorktree { .. } => Code::NotAWorktree,
        E::Interrupted(_) => Code::Interrupted,
        E::NotADirectory { .. } | E::UnderAFile { .. } | E::StoreOverlap(_) | E::Refused { .. } => {
            Code::InvalidPath
        }
        E::Store(e) => any_store(e),
        E::Registry(e) => registry(e),
        _ => Code::Io,
    }
}

fn rollback(e: &fs_manager::RollbackError) -> Code {
    use fs_manager::RollbackError as E;
    match e {
        E::NotAWorktree { .. } => Code::NotAWorktree,
        E::NoSuchPath { .. } => Code::InvalidPath,
        E::Blocked { .. } => Code::Blocked,
        E::Deny(_) => Code::InvalidConfig,
        E::Capture(e) => capture(e),
        E::Store(e) => any_store(e),
        E::Registry(e) => registry(e),
        E::Unfinished { .. } => Code::Interrupted,
        _ => Code::Io,
    }
}

fn task(e: &fs_manager::TaskError) -> Code {
    use fs_manager::TaskError as E;
    match e {
        E::NotAWorktree { .. } => Code::NotAWorktree,
        E::InvalidName { .. } => Code::InvalidName,
        E::NoCheckpoint { .. } => Code::NoCheckpoint,
        E::NoTask { .. } => Code::NoTask,
        E::NoChanges { .. } => Code::InvalidPath,
        E::Capture(e) => capture(e),
        E::Rollback(e) => rollback(e),
        E::Store(e) => any_store(e),
        E::Registry(e) => registry(e),
        _ => Code::Io,
    }
}

fn undo(e: &fs_manager::UndoError) -> Code {
    use fs_manager::UndoError as E;
    match e {
        E::NotAWorktree { .. } => Code::NotAWorktree,
        E::Interrupted(_) => Code::Interrupted,
        E::RootChanged(_) => Code::WorktreeMoved,
        E::StoreOverlap(_) => Code::InvalidPath,
        E::Write {
            cause,
            interrupted: false,
        } => rollback(cause),
        E::Write { .. } => Code::Interrupted,
        E::Store(e) => any_store(e),
        E::Registry(e) => registry(e),
        _ => Code::Io,
    }
}

fn recover(e: &fs_manager::RecoverError) -> Code {
    use fs_manager::RecoverError as E;
    match e {
        E::Missing { .. } => Code::InvalidPath,
        E::Blocked { .. } => Code::Blocked,
        E::RootChanged(_) => Code::WorktreeMoved,
        E::StoreOverlap(_) => Code::InvalidPath,
        E::Store(e) => any_store(e),
        E::Registry(e) => registry(e),
        _ => Code::Io,
    }
}

fn worktree(e: &fs_manager::WorktreeError) -> Code {
    use fs_manager::WorktreeError as E;
    match e {
        E::NotAWorktree { .. } => Code::NotAWorktree,
        E::Missing { .. } => Code::InvalidPath,
        E::RootChanged(_) => Code::WorktreeMoved,
        E::StoreOverlap(_) => Code::InvalidPath,
        E::Store(e) => any_store(e),
        E::Registry(e) => registry(e),
        _ => Code::Store,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code `remote::RemoteError::code` gives (but `store_failed`, counted as
    /// `store`), with whether it is bad usage, as the remote crate says.
    #[test]
    fn remote_codes_are_codes_with_the_same_exit() {
        let usage = |e: remote::RemoteError| {
            let code = remote_code(&e);
            assert_eq!(code.as_str(), e.code(), "{e}");
            assert_eq!(code.exit() == super::super::EXIT_USAGE, e.is_usage(), "{e}");
        };
        usage(remote::RemoteError::Unknown { name: "o".into() });
        usage(remote::RemoteError::Exists {
            name: "o".into(),
            url: "u".into(),
        });
        for text in [
            "unknown_remote",
            "remote_exists",
            "invalid_remote",
            "remote_timeout",
            "remote_failed",
            "remote_credentials",
            "remote_corrupt",
            "not_on_remote",
            "unknown_ref",
            "no_conditional_writes",
            "ref_moved",
            "cannot_push",
            "remote_format",
        ] {
            assert!(text.parse::<Code>().is_ok(), "{text}");
        }
    }
}
