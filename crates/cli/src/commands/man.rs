//! `cairn man DIR`: man pages made from the command line's own definition, so they name
//! every command and option there is.

use std::io::Write;

use camino::{Utf8Path, Utf8PathBuf};
use clap::CommandFactory;

use crate::commands::OwnCommand;
use crate::error::{CliError, Error, io_error};

/// Write man pages for cairn and every command into DIR (`cairn.1`,
/// `cairn-snapshot.1`, ...); prints each path.
#[derive(clap::Args, Debug)]
#[command(display_order = 38)]
pub struct Args {
    /// An existing directory (for `man` to find them, one in its path, e.g.
    /// `~/.local/share/man/man1`).
    pub dir: Utf8PathBuf,
}

impl OwnCommand for Args {}

/// Writes `cairn.1` and a page for every command below it (`cairn-worktree-list.1`, ...)
/// into `dir`, which must exist; the paths written.
pub fn man_pages<C: CommandFactory>(dir: &Utf8Path) -> Result<Vec<String>, Error> {
    if !dir.is_dir() {
        return Err(CliError::NoManDirectory {
            dir: dir.to_owned(),
        }
        .into());
    }
    let mut command = C::command();
    command.build();
    let mut written = Vec::new();
    write_pages(&command, command.get_name(), dir, &mut written)?;
    Ok(written)
}

fn write_pages(
    command: &clap::Command,
    name: &str,
    dir: &Utf8Path,
    written: &mut Vec<String>,
) -> Result<(), Error> {
    let path = dir.join(format!("{name}.1"));
    let failed = |e: std::io::Error| io_error(&path, e);
    let page = command.clone().name(name.to_owned());
    let mut bytes = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut bytes)
        .map_err(failed)?;
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(&bytes))
        .map_err(failed)?;
    written.push(path.to_string());
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, &format!("{name}-{}", sub.get_name()), dir, written)?;
    }
    Ok(())
}
