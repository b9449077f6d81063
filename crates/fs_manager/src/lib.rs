//! `fs_manager`: worktrees on disk.
//!
//! It onboards a directory in place ([`onboard`]), snapshots a worktree ([`snapshot`]),
//! hydrates a snapshot into a new directory ([`checkout`]) and makes a worktree equal a
//! snapshot again ([`rollback`]). A worktree's *scope* is every path under its root except
//! what `.gitignore`/`.ignore` files inside it, `.git/info/exclude` and the global excludes
//! file ignore, `.git/` and the store's folder. Nothing outside scope is read, written or
//! deleted.
//!
//! Each worktree has a stat cache in the store (size, mtime, ctime, inode, mode and blob id
//! per file), so a snapshot reads only files whose stat changed, and a checkout fills it so
//! the next snapshot reads nothing. Files are hashed and compressed in parallel and written
//! in batches; hydration writes in parallel and never through a symlink.
//!
//! ```no_run
//! use camino::Utf8Path;
//! use fs_manager::{CaptureOptions, CheckoutOptions, OnboardOptions};
//!
//! let store = cas::Store::open(Utf8Path::new(".cairn"), &cas::OpenOptions { create: true, ..Default::default() })?;
//! let onboarded = fs_manager::onboard(&store, Utf8Path::new("my-repo"), &OnboardOptions::default())?;
//! let agent = fs_manager::checkout(&store, onboarded.snapshot, Utf8Path::new("/tmp/agent-1"), &CheckoutOptions::default())?;
//! // ... the agent edits files in /tmp/agent-1 ...
//! let turn = fs_manager::snapshot(&store, &agent.worktree, &CaptureOptions::default())?;
//! println!("turn snapshot {} ({} files modified)", turn.snapshot, turn.modified);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(unsafe_code, clippy::unwrap_used)]
#![warn(missing_docs)]

mod build;
mod capture;
mod checkout;
mod dirstate;
mod error;
mod fsops;
/// The record decoders for the fuzz targets in `fuzz/`; not part of the API.
#[doc(hidden)]
pub mod fuzzing;
mod journal;
mod lock;
mod progress;
mod rollback;
mod rules;
mod scan;
mod state;
mod task;
mod undo;
mod watch;
mod worktree;

pub use capture::{
    CaptureOptions, LiveState, OnboardOptions, OnboardOutcome, SnapshotOutcome, live_state,
    onboard, record_change, snapshot,
};
pub use checkout::{CheckoutOptions, CheckoutOutcome, checkout};
pub use error::{
    CaptureError, CheckoutError, RecoverError, RollbackError, ScanError, TaskError, UndoError,
    WorktreeError,
};
pub use journal::{Interrupted, RecoverOutcome, recover};
pub use progress::{Progress, Silent};
pub use rollback::{RollbackOptions, RollbackOutcome, rollback};
pub use scan::{FileRecord, Skipped};
pub use task::{
    AcceptOutcome, CheckpointOptions, CheckpointOutcome, DiscardOutcome, accept, checkpoint,
    discard, rewind,
};
pub use undo::{Refusal, UndoOutcome, UndoStacks, redo, undo, undo_stacks};
pub use watch::enable as enable_watching;
pub use worktree::{
    RootChanged, find as find_worktree, list as list_worktrees, rebind as rebind_worktree,
    remove as remove_worktree,
};

/// Files whose timestamps are this close to a snapshot are read again by the next one.
pub use state::RACY_MARGIN;
