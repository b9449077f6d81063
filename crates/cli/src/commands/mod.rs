//! One file per command: its arguments (an `Args` deriving [`clap::Args`], whose doc
//! comments are the command's help) and what they become, an engine request (through
//! `From<Args>` for the engine's options) or, for the commands that are the CLI's own
//! (`init`, `run`, `serve`, `mcp`, `completions`, `man`), the work itself.

pub mod accept;
pub mod checkout;
pub mod checkpoint;
pub mod completions;
pub mod diff;
pub mod discard;
pub mod fsck;
pub mod gc;
pub mod init;
pub mod log;
pub mod man;
pub mod materialize_copy;
pub mod mcp;
pub mod mcp_grant;
mod mcp_stdio;
pub mod merge;
pub mod mount;
pub mod onboard;
pub mod op;
#[cfg(test)]
mod openapi;
pub mod picker;
pub mod policy;
pub mod pull;
pub mod push;
pub mod recover;
pub mod redo;
pub mod refs;
pub mod remote;
pub mod review;
pub mod rewind;
pub mod rollback;
pub mod run;
pub mod serve;
pub mod show;
pub mod snapshot;
pub mod status;
pub mod undo;
pub mod unmount;
pub mod verbs;
pub mod worktree;

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use cairn_engine::PathArg;

/// Paths given after `--`, any bytes, as the engine takes them.
fn tree_paths(paths: Vec<OsString>) -> Vec<PathArg> {
    paths
        .into_iter()
        .map(|p| PathArg::from(p.into_vec()))
        .collect()
}
