use camino::{Utf8Path, Utf8PathBuf};
use cas::{OpenOptions, Store};

use crate::context::{Ctx, absolute, current_dir};
use crate::error::CliError;
use crate::output::Report;

/// `cairn init [PATH]`: create the store folder PATH, else the one `--store` or
/// `$CAIRN_STORE` names, else `./.cairn`.
pub fn run(ctx: &Ctx, path: Option<Utf8PathBuf>) -> Result<Report, CliError> {
    let cwd = current_dir()?;
    let named = path
        .as_deref()
        .or(ctx.named_store())
        .unwrap_or(Utf8Path::new(".cairn"));
    let path = absolute(&cwd, named);
    if path.exists() && !path.is_dir() {
        return Err(CliError::usage(
            "invalid_path",
            format!("{path}: exists and is not a directory"),
        ));
    }
    let existed = path.join(cas::DATABASE_FILE).is_file();
    // A server holds it: it exists, and opening it here would only wait for the server.
    if existed && cairn_client::Client::connect(&cairn_client::Client::socket_of(&path)).is_ok() {
        return Ok(Report::new(
            serde_json::json!({ "store": path }),
            format!("cairn store already exists in {path} (served by cairn serve)\n"),
        ));
    }
    let options = OpenOptions {
        create: true,
        ..OpenOptions::from_env()
    };
    let store = Store::open(&path, &options)?;
    let human = if existed {
        format!("cairn store already exists in {}\n", store.root())
    } else {
        format!("Initialized empty cairn store in {}\n", store.root())
    };
    Ok(Report::new(
        serde_json::json!({ "store": store.root() }),
        human,
    ))
}
