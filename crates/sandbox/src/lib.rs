//! `sandbox`: confining the command `cairn run` starts, and cleaning up after it.
//!
//! It owns three things, all of them about one sandboxed command:
//!
//! - [`SandboxPolicy`] and [`enforce`]: what the command may do (read everywhere, write
//!   beneath the writable roots, no network unless allowed, hidden directories out of
//!   sight), enforced with Landlock on the helper process before it execs the command.
//! - [`audit`]: what Landlock denied the command, read from the kernel's audit records.
//! - [`SecretCopy`]: private copies of a worktree's denied paths, taken before the command
//!   runs and put back afterwards ([`PutBack`] says what the command did to each).
//!
//! Which paths are secrets, what a grant may name and how a path is resolved beneath a root
//! without following a symlink are `path_policy`'s rules; this crate applies them. It knows
//! nothing of stores, snapshots, worktree records, git or the command line: the caller
//! (`cairn run`) decides the policy and reports the outcome.
#![deny(unsafe_code, clippy::unwrap_used)]
#![warn(missing_docs)]

pub mod audit;
mod policy;
mod putback;

pub use policy::{Enforced, SandboxError, SandboxPolicy, enforce};
pub use putback::{Change, PutBack, SecretCopy};
