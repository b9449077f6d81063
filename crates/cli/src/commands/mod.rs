//! The commands that are the CLI's own (`init`, `run`, `serve`, `mcp`, `completions`,
//! `man`), and the subcommand
//! groups of the rest (which are engine requests).

pub mod docs;
pub mod init;
pub mod mcp;
pub mod mcp_grant;
mod mcp_stdio;
#[cfg(test)]
mod openapi;
pub mod picker;
pub mod policy;
pub mod refs;
pub mod remotes;
pub mod reversible;
pub mod run;
pub mod serve;
pub mod verbs;
pub mod worktrees;
