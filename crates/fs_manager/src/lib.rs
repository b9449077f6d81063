//! `fs_manager`: worktrees on disk.
//!
//! Through a [`Worktrees`] value (one per open store) it onboards a directory in place
//! ([`Worktrees::onboard`]), snapshots a worktree ([`Worktrees::snapshot`]), hydrates a
//! snapshot into a new directory ([`Worktrees::checkout`]) and makes a worktree equal a
//! snapshot again ([`Worktrees::rollback`]). A worktree's *scope* is every path under its
//! root except what `.gitignore`/`.ignore` files inside it, `.git/info/exclude` and the global excludes
//! file ignore, `.git/` and the store's folder. Nothing outside scope is read, written or
//! deleted.
//!
//! Each worktree has a stat cache in the store (size, mtime, ctime, inode, mode and blob id
//! per file), so a snapshot reads only files whose stat changed, and a checkout fills it so
//! the next snapshot reads nothing. Files are hashed and compressed in parallel and written
//! in batches; hydration writes in parallel and never through a symlink.
//!
//! It owns the worktree registry, the stat caches, intent journals and the op log with its
//! undo links (side tables in the store, [`registry`]), and what a process keeps between operations
//! ([`Worktrees`]: per-worktree locks, watches, kept caches). It must not know git (the git
//! source of an onboard is asked of a [`GitProbe`] the caller passes in), the command line,
//! HTTP or how outcomes are printed.
//!
//! Its modules form layers; each line uses only the lines under it:
//!
//! ```text
//! operations                     the operations on `Worktrees`, public
//! task, undo
//! rollback
//! capture                        a worktree's files into a snapshot
//! checkout, held, recover        held: one worktree, locked for one operation
//! records                        finding, listing and changing worktree records
//! build, error                   trees from files; one error enum per operation
//! journal, scan                  multi-file steps that survive a crash; the walk
//! reach                          paths too long for the system, by handle
//! pending, rules, worktrees      deferred writes; what is in scope; per-store state
//! mounted                        worktrees a live mount serves (`MountedTree`)
//! dirstate, fsops, watch         stat caches; writes beneath a root; inotify
//! file_state                     one file's stat-cache record
//! lock, paths, registry, root
//! apart                          worktrees lie apart from the store's folder
//! ```
//!
//! ```no_run
//! use camino::Utf8Path;
//! use fs_manager::{CaptureOptions, WorktreeCheckoutOptions, WorktreeOnboardOptions, Worktrees};
//!
//! let store = cas::Store::open(Utf8Path::new(".cairn"), &cas::OpenOptions { create: true, ..Default::default() })?;
//! let worktrees = Worktrees::new();
//! let onboarded = worktrees.onboard(&store, Utf8Path::new("my-repo"), &WorktreeOnboardOptions::default())?;
//! let agent = worktrees.checkout(&store, onboarded.snapshot, Utf8Path::new("/tmp/agent-1"), &WorktreeCheckoutOptions::default())?;
//! // ... the agent edits files in /tmp/agent-1 ...
//! let turn = worktrees.snapshot(&store, &agent.worktree, &CaptureOptions::default())?;
//! println!("turn snapshot {} ({} files modified)", turn.snapshot, turn.modified);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(unsafe_code, clippy::unwrap_used)]
#![warn(missing_docs)]

mod apart;
mod build;
mod capture;
mod checkout;
mod dirstate;
mod error;
mod file_state;
mod fsops;
/// The record decoders for the fuzz targets in `fuzz/`; not part of the API.
#[doc(hidden)]
pub mod fuzzing;
mod held;
mod journal;
mod lock;
mod mounted;
mod operations;
mod paths;
mod pending;
mod reach;
mod records;
mod recover;
pub mod registry;
mod rollback;
mod root;
mod rules;
mod scan;
mod scope;
mod task;
mod undo;
mod watch;
mod worktrees;

pub use apart::{Overlap, StoreOverlap, check as check_apart};
pub use capture::{
    CaptureOptions, CaptureOutcome, GitProbe, LiveState, WorktreeOnboardOptions,
    WorktreeOnboardOutcome,
};
pub use cas::{Progress, Silent};
pub use checkout::{WorktreeCheckoutOptions, WorktreeCheckoutOutcome};
pub use error::{
    CaptureError, CheckoutError, RecoverError, RollbackError, ScanError, TaskError, UndoError,
    WorktreeError,
};
pub use journal::Interrupted;
pub use mounted::{MountCapture, MountedTree};
pub use paths::{SkipReason, Skipped, Special};
pub use reach::{read_live_file, read_live_link};
pub use records::{find as find_worktree, list as list_worktrees};
pub use recover::WorktreeRecoverOutcome;
pub use registry::{
    Checkpoint, DirIdentity, FORMAT_1_TABLES, GrantRequest, GrantRequests, GrantSet, OpRecord,
    Registry, RegistryError, RegistryRead, RegistryWrite, SandboxGrants, Task, UndoStacks,
    WorktreeKind, WorktreeRecord, undo_stacks,
};
pub use rollback::{WorktreeRollbackOptions, WorktreeRollbackOutcome};
pub use root::RootChanged;
pub use rules::{OnDisk, Patterns, RulesPresent, RulesSource, read_patterns};
pub use scan::FileRecord;
pub use scope::{DirRules, Leaf, Scope, ScopeSettings, Verdict};
pub use task::{
    WorktreeAcceptOutcome, WorktreeCheckpointOptions, WorktreeCheckpointOutcome,
    WorktreeDiscardOutcome,
};
pub use undo::{Refusal, WorktreeUndoOutcome};
pub use worktrees::Worktrees;

/// Files whose timestamps are this close to a snapshot are read again by the next one.
pub use file_state::RACY_MARGIN;
