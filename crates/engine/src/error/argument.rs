//! The refusals of a verb's arguments that any verb can meet.

use camino::Utf8PathBuf;

use super::Code;

/// An argument that is malformed, too large, or names nothing here.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArgumentError {
    /// A directory that is no registered worktree.
    #[error("{dir} is not a registered worktree")]
    NotAWorktree {
        /// The directory.
        dir: Utf8PathBuf,
    },
    /// A directory in no registered worktree, where a snapshot would do too.
    #[error("{dir} is not inside a registered worktree; name a snapshot or a worktree")]
    NotInAWorktree {
        /// The directory.
        dir: Utf8PathBuf,
    },
    /// No store named and no default place for one.
    #[error("no store found: pass --store, or set CAIRN_STORE or HOME")]
    NoStore,
    /// An id that is not one.
    #[error(transparent)]
    Id(#[from] cas::ParseIdError),
    /// A label that is not `KEY=VALUE`.
    #[error(transparent)]
    Label(cas::ObjectError),
    /// A count of 0 where at least one is needed.
    #[error("{name}: must be at least 1, not 0")]
    Zero {
        /// The argument.
        name: &'static str,
    },
    /// A text or list past its limit.
    #[error("{verb}: {what} has {size} {unit}, more than the limit of {limit}")]
    TooLarge {
        /// The verb.
        verb: &'static str,
        /// The argument.
        what: String,
        /// How large it is.
        size: usize,
        /// In what (`characters`, `items`).
        unit: &'static str,
        /// The limit.
        limit: u64,
    },
    /// A count past its limit.
    #[error("{verb}: {name} is {number}, more than the limit of {limit}")]
    CountTooLarge {
        /// The verb.
        verb: &'static str,
        /// The argument.
        name: &'static str,
        /// The count.
        number: u64,
        /// The limit.
        limit: u64,
    },
    /// A NUL byte, which no argument or path can hold (the text quoted).
    #[error("{text}: contains a NUL byte, which no argument or path can")]
    Nul {
        /// The argument, quoted.
        text: String,
    },
}

impl ArgumentError {
    /// Its code.
    pub fn code(&self) -> Code {
        match self {
            ArgumentError::NotAWorktree { .. } | ArgumentError::NotInAWorktree { .. } => {
                Code::NotAWorktree
            }
            ArgumentError::NoStore => Code::NoStore,
            ArgumentError::Id(_) => Code::UnknownId,
            ArgumentError::Label(_) => Code::InvalidLabel,
            ArgumentError::Zero { .. } => Code::InvalidArguments,
            ArgumentError::TooLarge { .. } | ArgumentError::CountTooLarge { .. } => Code::TooLarge,
            ArgumentError::Nul { .. } => Code::InvalidInput,
        }
    }
}
