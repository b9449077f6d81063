//! `cairn init [PATH]`: create a store folder.

use camino::{Utf8Path, Utf8PathBuf};
use serde::Serialize;

use crate::commands::OwnCommand;
use crate::context::{Ctx, absolute, current_dir};
use crate::error::Error;
use crate::output::Report;

/// Create a store: PATH, else the one --store or $CAIRN_STORE names, else ./.cairn.
#[derive(clap::Args, Debug)]
#[command(display_order = 3)]
pub struct Args {
    /// The store folder to create.
    path: Option<Utf8PathBuf>,
}

impl OwnCommand for Args {}

#[derive(Serialize)]
struct Initialized<'a> {
    store: &'a Utf8Path,
}

/// `cairn init [PATH]`: create the store folder PATH, else the one `--store` or
/// `$CAIRN_STORE` names, else `./.cairn`.
pub fn run(ctx: &Ctx, args: Args) -> Result<Report, Error> {
    let Args { path } = args;
    let cwd = current_dir()?;
    let named = path
        .as_deref()
        .or(ctx.named_store())
        .unwrap_or(Utf8Path::new(".cairn"));
    let path = absolute(&cwd, named);
    if path.exists() && !path.is_dir() {
        return Err(cairn_engine::InitError::NotADirectory { path }.into());
    }
    let existed = path.join(cas::DATABASE_FILE).is_file();
    // A server holds it: it exists, and opening it here would only wait for the server.
    if existed && cairn_client::Client::connect(&cairn_client::Client::socket_of(&path)).is_ok() {
        return Ok(Report::new(
            Initialized { store: &path },
            format!("cairn store already exists in {path} (served by cairn serve)\n"),
        ));
    }
    let out = cairn_engine::init_store(
        &path,
        &crate::target::with_format_1_tables(cairn_engine::OpenOptions::from_env()),
    )?;
    let human = if out.existed {
        format!("cairn store already exists in {}\n", out.store)
    } else {
        format!("Initialized empty cairn store in {}\n", out.store)
    };
    Ok(Report::new(Initialized { store: &out.store }, human))
}
