//! One file per command: its arguments (an `Args` deriving [`clap::Args`], whose doc
//! comments are the command's help, and whose `#[command(display_order = N)]` is its place
//! in `cairn --help`) and what they become: an engine request ([`IntoRequest`], mostly
//! through `From<Args>` for the engine's options) or, for the commands that are the CLI's
//! own (`init`, `run`, `serve`, `mcp`, `completions`, `man` and the hidden helpers;
//! [`OwnCommand`], dispatched in `main.rs`), the work itself.
//!
//! The command files are listed nowhere by hand: `build.rs` finds each file's commands (the
//! structs it implements [`IntoRequest`] or [`OwnCommand`] for) and writes their `mod`
//! lines, the [`Command`] enum in their `display_order` and [`Command::request`]. Only the
//! files that hold no command are declared here.

pub mod mcp_grant;
mod mcp_stdio;
#[cfg(test)]
mod openapi;
pub mod picker;
pub mod verbs;

// The command files' modules, `Command` and `Command::request`, written by `build.rs`.
include!(concat!(env!("OUT_DIR"), "/commands.rs"));

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use cairn_engine::{PathArg, Request};

use crate::error::{CliError, Error};
use crate::render::View;

/// What a command asks of the engine: the request, and how to show its outcome.
pub type Requested = Result<(Request, View), Error>;

/// A command that is an engine request: its file's `Args` says which.
pub trait IntoRequest {
    /// The request, and how to show its outcome (`json`: the outcome is printed as JSON).
    fn request(self, json: bool) -> Requested;
}

/// A command the binary runs itself (`main.rs` dispatches it), never a request.
pub trait OwnCommand {}

/// `request`, its outcome shown as every verb's is unless the command says otherwise.
fn with_default_view(request: Request) -> Requested {
    Ok((request, View::default()))
}

/// What [`Command::request`] answers for an [`OwnCommand`].
fn own(_: impl OwnCommand) -> Requested {
    Err(CliError::OwnProcessOnly.into())
}

/// Paths given after `--`, any bytes, as the engine takes them.
fn tree_paths(paths: Vec<OsString>) -> Vec<PathArg> {
    paths
        .into_iter()
        .map(|p| PathArg::from(p.into_vec()))
        .collect()
}
