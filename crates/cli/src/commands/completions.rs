//! `cairn completions SHELL`: a completion script made from the command line's own
//! definition, so it names every command and option there is.

use crate::commands::OwnCommand;
use clap::CommandFactory;

/// Print a completion script for SHELL (`source <(cairn completions bash)`, or save it
/// where your shell reads completions).
#[derive(clap::Args, Debug)]
#[command(display_order = 37)]
pub struct Args {
    /// The shell.
    shell: clap_complete::Shell,
}

impl OwnCommand for Args {}

/// Writes the completion script for the shell asked for to stdout (a reader that goes
/// away is no error).
pub fn completions<C: CommandFactory>(args: &Args) {
    let mut command = C::command();
    let name = command.get_name().to_owned();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, name, &mut script);
    crate::output::write_stdout(&script);
}
