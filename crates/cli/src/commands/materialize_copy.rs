//! The hidden command `unmount --materialize` runs to copy a mount's files out from under
//! it (see [`cairn_engine::materialize_copy`]).

use std::path::PathBuf;

use crate::commands::OwnCommand;
use crate::error::Error;

// Copies FROM to TO; hidden, so it has no help text.
#[derive(clap::Args, Debug)]
#[command(name = cairn_engine::MATERIALIZE_COPY, hide = true, display_order = 16)]
pub struct Args {
    from: PathBuf,
    to: PathBuf,
}

impl OwnCommand for Args {}

pub fn run(args: &Args) -> Result<(), Error> {
    cairn_engine::materialize_copy(&args.from, &args.to)?;
    Ok(())
}
