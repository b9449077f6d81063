//! `worktree_state`: worktrees on disk, written safely.
//!
//! It owns the operations that read or write a worktree's files: capture (onboard,
//! snapshot, a live state), checkout (hydrating a snapshot into a directory), rollback, and
//! recover, with what makes them safe: one operation per worktree at a time ([`Kept`],
//! [`held`]), the root still the directory registered ([`root`]), intent journals so a step
//! cut short is finished or undone ([`journal`]), and the only code that writes into a
//! worktree, beneath its root and never through a symlink ([`fsops`]).
//!
//! It must not know the op log's undo and redo, checkpoints and tasks (`fs_manager`, above
//! it), git (an onboard's git source is asked of a [`GitProbe`] the caller passes in), the
//! command line, HTTP or how outcomes are printed. What is in scope and how a worktree is
//! walked is `worktree_scope`'s; the records it keeps are `worktree_registry`'s.
//!
//! Its modules form layers; each line uses only the lines under it:
//!
//! ```text
//! fuzzing, rollback              the record decoders for `fuzz/`; capture, then write what differs
//! capture                        a worktree's files into a snapshot
//! checkout, held, recover        held: one worktree, locked for one operation
//! layer_copies                   the store's unpacked layers, cloned into checkouts
//! records                        finding, listing and changing worktree records
//! error                          one error enum per operation
//! journal                        multi-file steps that survive a crash
//! kept                           what a process keeps between operations
//! fsops, lock, pending, root     writes beneath a root; per-worktree locks; deferred writes
//! ```
#![deny(unsafe_code, clippy::unwrap_used)]
#![warn(missing_docs)]

pub mod capture;
pub mod checkout;
pub mod error;
pub mod fsops;
/// The record decoders for the fuzz targets in `fuzz/`; not part of the API.
#[doc(hidden)]
pub mod fuzzing;
pub mod held;
pub mod journal;
mod kept;
pub mod layer_copies;
mod lock;
pub mod pending;
pub mod records;
pub mod recover;
pub mod rollback;
pub mod root;

pub use capture::{
    CaptureOptions, CaptureOutcome, DirCaptured, GitProbe, LiveState, WorktreeOnboardOptions,
    WorktreeOnboardOutcome, capture_dir,
};
pub use checkout::{LayerToWrite, LayerWritten, WorktreeCheckoutOptions, WorktreeCheckoutOutcome};
pub use error::{CaptureError, CheckoutError, RecoverError, RollbackError, WorktreeError};
pub use journal::Interrupted;
pub use kept::Kept;
pub use records::{find as find_worktree, list as list_worktrees};
pub use recover::WorktreeRecoverOutcome;
pub use rollback::{LiveCapture, MakeTarget, WorktreeRollbackOptions, WorktreeRollbackOutcome};
pub use root::RootChanged;
