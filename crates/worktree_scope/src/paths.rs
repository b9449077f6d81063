//! Paths inside a worktree (`/`-separated bytes from its root) and how they are ordered,
//! joined and shown.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A path left out of a snapshot, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Path from the worktree root, raw bytes: not a `RepoPath`, as a name a tree cannot
    /// hold is among the reasons to skip one.
    pub path: Vec<u8>,
    /// Why it was left out.
    pub reason: SkipReason,
}

/// Why a path is left out of a capture (or of what a rollback writes). Its `Display` is the
/// `reason` of SPEC's `skipped` lists.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// Matches a deny pattern (a secret such as `.env`).
    Denied {
        /// The pattern.
        pattern: String,
    },
    /// Not a name a tree can hold (a spelling of `.git`, a control character, …).
    InvalidName(path_policy::NameError),
    /// Longer than the system lets a path be from the worktree root.
    PathTooLong,
    /// A pseudo file system (`/proc`, `sysfs`, …) mounted inside the tree.
    PseudoFilesystem,
    /// Larger than the worktree's size cap.
    OverSizeCap {
        /// The file's size.
        size: u64,
        /// The cap.
        cap: u64,
    },
    /// A FIFO, socket or device.
    Special(Special),
    /// An ignore file that is not a regular file.
    IgnoreFileNotRegular,
    /// An ignore file over [`path_policy::MAX_RULES_FILE`] bytes.
    IgnoreFileTooLarge,
    /// Rollback: the path is out of the worktree's scope for this reason.
    OutOfScope(Box<SkipReason>),
}

/// A file that is neither a regular file, a directory nor a symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    /// A named pipe.
    Fifo,
    /// A Unix socket.
    Socket,
    /// A block device.
    BlockDevice,
    /// A character device.
    CharacterDevice,
    /// Anything else.
    Other,
}

impl Special {
    /// What a file of `meta`'s type is called.
    pub(crate) fn of(meta: &std::fs::Metadata) -> Special {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_fifo() {
            Special::Fifo
        } else if t.is_socket() {
            Special::Socket
        } else if t.is_block_device() {
            Special::BlockDevice
        } else if t.is_char_device() {
            Special::CharacterDevice
        } else {
            Special::Other
        }
    }

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Special::Fifo => "fifo",
            Special::Socket => "socket",
            Special::BlockDevice => "block device",
            Special::CharacterDevice => "character device",
            Special::Other => "special file",
        }
    }
}

impl SkipReason {
    /// The reason an ignore file was not read.
    pub(crate) fn of_rules_file(refusal: path_policy::RulesRefusal) -> SkipReason {
        match refusal {
            path_policy::RulesRefusal::NotRegular(_) => SkipReason::IgnoreFileNotRegular,
            path_policy::RulesRefusal::TooLarge(_) => SkipReason::IgnoreFileTooLarge,
        }
    }
}

/// As its text, the `reason` of SPEC's `skipped` lists.
impl serde::Serialize for SkipReason {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipReason::Denied { pattern } => write!(f, "denied by pattern {pattern}"),
            SkipReason::InvalidName(e) => write!(f, "invalid name: {}", e.reason()),
            SkipReason::PathTooLong => f.write_str("path-too-long"),
            SkipReason::PseudoFilesystem => f.write_str("pseudo-filesystem"),
            SkipReason::OverSizeCap { size, cap } => {
                write!(f, "larger than the size cap ({size} bytes > {cap} bytes)")
            }
            SkipReason::Special(kind) => {
                write!(f, "{} (not a file, directory or symlink)", kind.name())
            }
            SkipReason::IgnoreFileNotRegular => f.write_str("ignore-file-not-regular"),
            SkipReason::IgnoreFileTooLarge => f.write_str("ignore-file-too-large"),
            SkipReason::OutOfScope(reason) => write!(f, "out of scope: {reason}"),
        }
    }
}

// Raw-byte forms of `RepoPath`'s operations, for paths held as bytes inside the scan, the
// stat cache and the journal (some of which, like skipped names, are not repo paths).
pub use path_policy::raw_path::{split_parent, to_fs_path as join, tree_order};

/// A path for a message: as it is when it is UTF-8, else quoted as git quotes paths
/// (`"caf\351"`), never with replacement characters.
pub fn shown(path: &Path) -> String {
    diff::path_text(path.as_os_str().as_bytes())
}
