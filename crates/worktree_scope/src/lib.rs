//! `worktree_scope`: what a worktree holds, and how it is read.
//!
//! A worktree's *scope* is every path under its root except what `.gitignore`/`.ignore`
//! files inside it, `.git/info/exclude` and the global excludes file ignore, `.git/`, the
//! store's folder, secrets (the deny list) and files over the size cap. It owns those rules
//! ([`Scope`], decided in one place for a capture on disk and a mount's capture alike), the
//! walk and hashing of a directory's scope ([`scan`]), the per-directory stat caches that let
//! a walk skip what did not change ([`dirstate`]), the inotify watcher that tells a long-lived
//! process which directories changed ([`watch`]), trees built from what a walk found
//! ([`build`]), and what a live mount answers for its worktree ([`MountedTree`]).
//!
//! It reads; it writes no worktree file. It must not know worktree operations (capture,
//! checkout, rollback, journals: `worktree_state`), op logs or undo (`fs_manager`), git, or the
//! faces above; of the registry (`worktree_registry`) it uses the worktree record and the
//! stat-cache table.
//!
//! Its modules form layers; each line uses only the lines under it:
//!
//! ```text
//! build, mounted                 trees from a scan's directories; worktrees a mount serves
//! scan                           the walk: what is in scope, what changed, hashed
//! reach                          paths too long for the system, by handle
//! scope                          what is in scope, for disk and mount captures alike
//! rules, watch                   pattern files; inotify
//! dirstate                       stat caches (records in `worktree_registry`'s table)
//! file_state                     one file's stat-cache record
//! paths                          paths from a worktree's root: order, joins, skips
//! ```
#![deny(unsafe_code, clippy::unwrap_used)]
#![warn(missing_docs)]

pub mod build;
pub mod dirstate;
pub mod file_state;
pub mod mounted;
pub mod paths;
pub mod reach;
pub mod rules;
pub mod scan;
pub mod scope;
pub mod watch;

pub use mounted::{MountCapture, MountedTree};
pub use paths::{SkipReason, Skipped, Special};
pub use reach::{read_live_file, read_live_link};
pub use rules::{OnDisk, Patterns, RulesPresent, RulesSource, read_patterns};
pub use scan::{FileRecord, ScanError};
pub use scope::{DirRules, Leaf, Scope, ScopeSettings, Verdict};

/// Files whose timestamps are this close to a snapshot are read again by the next one.
pub use file_state::RACY_MARGIN;
