//! One module per command group.

pub mod diff;
pub mod init;
pub mod log;
pub mod maintenance;
pub mod mcp;
pub mod merge;
pub mod refs;
pub mod reversible;
pub mod run;
pub mod serve;
pub mod show;
pub mod verbs;
pub mod worktrees;
