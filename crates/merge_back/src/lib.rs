//! `merge_back`: the one crate that knows git, through gitoxide.
//!
//! It owns everything git in cairn: reading a repository (where `HEAD` stands and whether
//! tracked files differ from it, [`git_state`]), importing a commit's tree as a snapshot
//! ([`import`]), exporting a snapshot's tree into a repository's object database
//! ([`export`]), the three-way merge of trees with git's rules ([`merge_trees`]), several
//! snapshots' changes merged into one tree inside the store ([`combine_trees`]), bringing a
//! snapshot back as a commit on a branch or onto `HEAD` ([`merge_snapshot`]) and the intent
//! journal that makes `merge --checkout` one step ([`recover_checkout`] finishes it after a
//! kill). No gix type appears in its API: ids are hex, and gitoxide's errors are kept whole,
//! boxed, as the `source()` of this crate's own ([`BoxError`]).
//!
//! It must not know the CLI, HTTP or printing: callers get outcomes and typed errors whose
//! `Display` is the message, and decide how to show them and what exit code they mean.
//!
//! Its modules form layers; each uses only modules in rows below it:
//!
//! ```text
//! merge_snapshot   recover   combine move HEAD: the merge; finishing a killed --checkout;
//!                                    the merge of snapshots with each other
//! journal   snapshot_error           the --checkout intent record; the error both report
//! export  import  merge  state  worktree   one concern each, each with its own error
//! git                                what all share: the boxed error, the commit signature
//! ```
//!
//! ```no_run
//! let state = merge_back::git_state(camino::Utf8Path::new("/path/to/repo"))?;
//! if let Some(state) = state {
//!     println!("HEAD {:?}, dirty: {}", state.commit, state.dirty);
//! }
//! # Ok::<(), merge_back::GitStateError>(())
//! ```
#![deny(unsafe_code, clippy::unwrap_used)]
#![warn(missing_docs)]

mod combine;
mod export;
mod git;
mod import;
mod journal;
mod merge;
mod merge_snapshot;
mod recover;
mod snapshot_error;
mod state;
mod worktree;

pub use combine::{CombineTreesError, CombinedTrees, InputConflict, combine_trees};
pub use export::{ExportError, ExportOutcome, FORMAT_1_TABLES, GIT_OIDS, export};
pub use git::BoxError;
pub use import::{ImportError, ImportedCommit, import};
pub use merge::{ConflictKind, MergeConflict, MergeError, TreeMerge, merge_trees};
pub use merge_snapshot::{MergeSnapshotOptions, MergeSnapshotOutcome, merge_snapshot};
pub use recover::{RecoveredCheckout, recover_checkout};
pub use snapshot_error::MergeSnapshotError;
pub use state::{GitStateError, HeadState, git_source, git_state};
