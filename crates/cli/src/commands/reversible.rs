//! `op log`'s subcommand, and `discard`'s question on the terminal.

use std::io::{BufRead, IsTerminal, Write};

use camino::{Utf8Path, Utf8PathBuf};
use clap::Subcommand;

use crate::error::Error;

#[derive(Subcommand, Debug)]
pub enum OpAction {
    /// The worktree's operation log, newest first.
    Log {
        /// The worktree (default: the one holding the current directory).
        dir: Option<Utf8PathBuf>,
    },
}

/// Asks on this terminal before throwing away every change of the task in `root`; `Ok(false)`
/// without a terminal to ask on.
pub fn confirm(root: &Utf8Path) -> Result<bool, Error> {
    if !std::io::stdin().is_terminal() {
        return Ok(false);
    }
    eprint!("Discard every change of the task in {root}? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Error::failure("io", format!("reading the answer: {e}")))?;
    if matches!(answer.trim(), "y" | "Y" | "yes") {
        Ok(true)
    } else {
        Err(Error::usage(
            "not_confirmed",
            format!("nothing discarded in {root}"),
        ))
    }
}
