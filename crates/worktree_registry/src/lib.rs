//! `worktree_registry`: what the store records about worktrees, in side tables (`cas` keeps
//! their bytes and commits them with the objects they name).
//!
//! It owns the worktree registry ([`WorktreeRecord`]), the op log ([`OpRecord`], with the
//! undo stacks it implies), the stat-cache table's name ([`FILE_STATES`]; its records are
//! `worktree_scope`'s), what `gc` and `fsck` keep alive through them ([`Registry`]), and the
//! rule that a worktree lies apart from the store's folder ([`apart`]). It is the lowest of
//! the worktree crates (`worktree_registry` ← `worktree_scope` ← `worktree_state` ←
//! `fs_manager`): it must not know how a worktree is walked, captured or written, git, or
//! anything of the faces above.
//!
//! Its modules form layers; each line uses only the lines under it:
//!
//! ```text
//! registry        the side tables, their records, and what gc and fsck keep
//! apart           worktrees lie apart from the store's folder
//! ```
#![deny(unsafe_code, clippy::unwrap_used)]
#![warn(missing_docs)]

pub mod apart;
mod registry;

pub use registry::{
    AttachedLayer, Checkpoint, DirIdentity, FILE_STATES, FORMAT_1_TABLES, GrantRequest,
    GrantRequests, GrantSet, OPLOG, OpRecord, Registry, RegistryError, RegistryRead, RegistryWrite,
    SandboxGrants, Task, UndoStacks, WORKTREES, WorktreeKind, WorktreeRecord, decode_op,
    decode_worktree, undo_stacks,
};

/// `From` every `cas` error for error enums with a `Store(cas::StoreError)` variant (each
/// crate implements it for its own enums).
#[doc(hidden)]
#[macro_export]
macro_rules! store_errors {
    ($($ty:ty),*) => {$(
        impl From<cas::ReadError> for $ty { fn from(e: cas::ReadError) -> Self { cas::StoreError::from(e).into() } }
        impl From<cas::WriteError> for $ty { fn from(e: cas::WriteError) -> Self { cas::StoreError::from(e).into() } }
        impl From<cas::StorageFailure> for $ty { fn from(e: cas::StorageFailure) -> Self { cas::StoreError::from(cas::ReadError::from(e)).into() } }
        impl From<cas::ObjectError> for $ty { fn from(e: cas::ObjectError) -> Self { cas::StoreError::from(e).into() } }
    )*};
}
