//! `sandbox`: the engine's [`cairn_engine::Sandbox`] on Linux: confining the command `run`
//! starts, and cleaning up after it.
//!
//! It owns four things, all of them about one sandboxed command:
//!
//! - [`Landlock`]: the engine's sandbox. It starts each command through a helper process
//!   (`cairn __sandbox-exec`, [`exec`]) that confines itself and then becomes the command,
//!   and captures or passes on the command's output.
//! - [`enforce`]: what the command may do ([`cairn_engine::SandboxPolicy`]: read everywhere,
//!   write beneath the writable roots, no network unless allowed, hidden directories out of
//!   sight), enforced with Landlock on the helper process before it execs the command.
//! - [`audit`]: what Landlock denied the command, read from the kernel's audit records.
//! - [`SecretCopy`]: private copies of a worktree's denied paths, taken before the command
//!   runs and put back afterwards ([`cairn_engine::PutBack`] says what the command did to
//!   each).
//!
//! Which paths are secrets, what a grant may name and how a path is resolved beneath a root
//! without following a symlink are `path_policy`'s rules; this crate applies them. It knows
//! nothing of stores, snapshots, worktree records, git or the command line: the engine's
//! `run` decides the policy and reports the outcome; of the engine it uses only the trait
//! it implements and the values that trait passes.
#![deny(unsafe_code, clippy::unwrap_used)]
#![warn(missing_docs)]

pub mod audit;
mod helper;
mod policy;
mod putback;

pub use helper::{Landlock, SANDBOX_UNAVAILABLE, exec, exec_args, reap};
pub use policy::{Enforced, SandboxError, enforce};
pub use putback::SecretCopy;
