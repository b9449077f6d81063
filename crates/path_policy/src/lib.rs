//! `path_policy`: the boundary of a worktree.
//!
//! Two questions, answered the same way everywhere cairn reads or writes a tree:
//!
//! - [`check_name`] (the tree format's rule, `cas`'s, re-exported): may a tree hold an entry
//!   with this name? Not empty, `.`, `..`, a name
//!   with `/`, NUL or another control byte, longer than 255 bytes, or any spelling of `.git`
//!   that some file system would resolve to `.git` (case, trailing dots and spaces, the 8.3
//!   short name `git~1`, HFS+ ignorable code points, NTFS streams). Windows device names and
//!   `\ < > : " | ? *` are fine on Linux and accepted. [`check_path`] adds the limits of a
//!   whole path (4096 bytes, 2048 levels). [`RepoPath`] and [`RepoPathBuf`] are paths
//!   inside a tree that hold only such names: checked once where bytes come in, then
//!   carried, ordered (tree order), joined, split and shown ([`path_text`]) without
//!   checking again.
//! - [`DenyList`]: which paths are secrets, outside every scope unless a worktree opts in:
//!   gitignore-syntax patterns, by default `.ssh/`, `.env`, `.env.*`, `*.pem`, `*.key`,
//!   `id_rsa*`, `id_ed25519*`, `.git/`.
//!
//! It owns what may be named and where cairn may write: names, repo paths and their text
//! form (git-quoted when not UTF-8), deny lists, ignore-file reading limits, file handles
//! beneath a worktree root that never follow a symlink ([`beneath`]), and what a sandbox
//! grant may name (never a pseudo file system; system directories and credentials only when
//! a person names them). Enforcing a sandbox (Landlock, its audit records, the secrets
//! put-back of `cairn run`) is the `sandbox` crate's, built on these rules. It knows
//! nothing of stores, snapshots, git, sandboxes or the command line.
//!
//! ```
//! use path_policy::{check_name, DenyList};
//!
//! assert!(check_name(b"aux.c").is_ok());
//! assert!(check_name(b".GIT").is_err());
//! assert!(check_name(b"git~1").is_err());
//!
//! let deny = DenyList::new(&[], &[]).unwrap();
//! assert_eq!(deny.denied(b"config/.env", false), Some(".env"));
//! assert_eq!(deny.denied(b"src/main.rs", false), None);
//! ```
#![deny(unsafe_code, clippy::unwrap_used)]
#![warn(missing_docs)]

pub mod beneath;
mod deny;
mod grant;
mod path_text;
mod repo_path;
mod rules_file;

pub use beneath::{BeneathError, Root, is_path_safe};
pub use deny::{DEFAULT_DENY, DenyError, DenyList, STORE_FILE, WORKTREE_FILE};
pub use grant::{
    CREDENTIALS, GrantError, OpenGrant, SYSTEM_DIRS, Sensitive, open_grant, pseudo_filesystem,
    pseudo_filesystem_of, sensitive,
};
// The name rule is the tree format's (`cas`); paths here are built on it.
pub use cas::{MAX_DEPTH, MAX_NAME_LEN, MAX_PATH_LEN, NameError, check_name, check_path};
pub use path_text::{from_path_text, path_text, quote_path};
pub use repo_path::{RepoPath, RepoPathBuf, RepoPathError, bytes as raw_path};
pub use rules_file::{
    MAX_RULES_FILE, RulesFile, RulesRefusal, read_rules_file, read_rules_file_at,
};
