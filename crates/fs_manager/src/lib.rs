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
//! It owns the public face of worktrees ([`Worktrees`], with what a process keeps between
//! operations: per-worktree locks, watches, kept caches), checkpoints and tasks, and undo and
//! redo along the op log; the crates under it own the rest (the registry, op log and stat
//! caches are side tables in the store, [`registry`]). It must not know git (the git
//! source of an onboard is asked of a [`GitProbe`] the caller passes in), the command line,
//! HTTP or how outcomes are printed.
//!
//! It is the top of four crates, each using only those under it:
//!
//! ```text
//! fs_manager           the operations on `Worktrees`; checkpoints, tasks, undo and redo
//! worktree_state       capture, checkout, rollback, recover; journals, locks, safe writes
//! worktree_scope       scope rules, the walk, stat caches, the watcher; mount captures' scope
//! worktree_registry    the side tables: worktree records, op log, stat-cache table
//! ```
//!
//! and re-exports what the crates under it make public. Its own modules form layers; each
//! line uses only the lines under it:
//!
//! ```text
//! operations                     the operations on `Worktrees`, public
//! task, undo                     checkpoints and tasks; undo and redo from the op log
//! error, worktrees               their error enums; what `Worktrees` keeps
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

mod error;
/// The record decoders for the fuzz targets in `fuzz/`; not part of the API.
#[doc(hidden)]
pub use worktree_state::fuzzing;
mod operations;
/// The worktree registry, op logs and stat-cache table (the `worktree_registry` crate).
pub use worktree_registry as registry;
mod task;
mod undo;
mod worktrees;

pub use cas::{Progress, Silent};
pub use error::{TaskError, UndoError};
pub use task::{
    WorktreeAcceptOutcome, WorktreeCheckpointOptions, WorktreeCheckpointOutcome,
    WorktreeDiscardOutcome,
};
pub use undo::{Refusal, WorktreeUndoOutcome};
pub use worktree_registry::apart::{Overlap, StoreOverlap, check as check_apart};
pub use worktree_registry::{
    AttachedLayer, Checkpoint, DirIdentity, FORMAT_1_TABLES, GrantRequest, GrantRequests, GrantSet,
    OpRecord, Registry, RegistryError, RegistryRead, RegistryWrite, SandboxGrants, Task,
    UndoStacks, WorktreeKind, WorktreeRecord, undo_stacks,
};
pub use worktree_scope::{
    DirRules, FileRecord, Leaf, MountCapture, MountedTree, OnDisk, Patterns, RACY_MARGIN,
    RulesPresent, RulesSource, ScanError, Scope, ScopeSettings, SkipReason, Skipped, Special,
    Verdict, read_live_file, read_live_link, read_patterns,
};
pub use worktree_state::checkout::{write_layers, write_tree};
/// The store's unpacked copies of dependency layers (the `worktree_state` module).
pub use worktree_state::layer_copies;
pub use worktree_state::{
    CaptureError, CaptureOptions, CaptureOutcome, CheckoutError, DirCaptured, GitProbe,
    Interrupted, LayerToWrite, LayerWritten, LiveCapture, LiveState, MakeTarget, RecoverError,
    RollbackError, RootChanged, WorktreeCheckoutOptions, WorktreeCheckoutOutcome, WorktreeError,
    WorktreeOnboardOptions, WorktreeOnboardOutcome, WorktreeRecoverOutcome,
    WorktreeRollbackOptions, WorktreeRollbackOutcome, capture_dir, find_worktree, list_worktrees,
};
pub use worktrees::Worktrees;
