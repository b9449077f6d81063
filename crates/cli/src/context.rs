//! What every command needs: output mode, this process's directory, and the store, found
//! as SPEC.md says.

use camino::{Utf8Path, Utf8PathBuf};

use crate::error::{CliError, Error, io_error};

pub use cairn_engine::path::absolute;

pub struct Ctx {
    pub json: bool,
    /// Never fetch from a remote.
    pub offline: bool,
    store_flag: Option<Utf8PathBuf>,
}

impl Ctx {
    pub fn new(json: bool, store_flag: Option<Utf8PathBuf>) -> Ctx {
        Ctx {
            json,
            offline: false,
            store_flag,
        }
    }

    /// The store `--store` or `$CAIRN_STORE` names, as given.
    pub fn named_store(&self) -> Option<&Utf8Path> {
        self.store_flag.as_deref()
    }

    /// The store a command run from `cwd` means.
    pub fn store_path(&self, cwd: &Utf8Path) -> Result<Utf8PathBuf, Error> {
        cairn_engine::discover_store(self.named_store(), cwd)
    }
}

/// This process's current directory.
pub fn current_dir() -> Result<Utf8PathBuf, Error> {
    let cwd = std::env::current_dir().map_err(|e| io_error("current directory", e))?;
    Utf8PathBuf::from_path_buf(cwd).map_err(|p| {
        CliError::DirectoryNotUtf8 {
            path: crate::output::quote_path(std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str())),
        }
        .into()
    })
}

/// Colour for output on this process's stdout.
pub fn colour() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stdout())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Writes `question` to stderr and reads one line from stdin, trimmed.
pub fn prompt(question: &str) -> Result<String, Error> {
    use std::io::{BufRead, Write};
    eprint!("{question}");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| io_error("reading the answer", e))?;
    Ok(answer.trim().to_owned())
}
