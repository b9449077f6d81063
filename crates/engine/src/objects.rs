//! The store itself: `init`, and the refs `ref set|rm|list` share.

use camino::{Utf8Path, Utf8PathBuf};
use cas::SnapshotId;
use serde::{Deserialize, Serialize};

use crate::error::{Code, Error};

/// The store `init` made (or found).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InitOutcome {
    /// The store folder.
    pub store: Utf8PathBuf,
    /// Whether it existed already.
    #[serde(skip)]
    pub existed: bool,
}

/// Why a store folder cannot be created.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InitError {
    /// Something else is there.
    #[error("{path}: exists and is not a directory")]
    NotADirectory {
        /// The path.
        path: Utf8PathBuf,
    },
}

crate::error::coded!(InitError, RefsError);

impl InitError {
    /// Its code.
    pub fn code(&self) -> Code {
        match self {
            InitError::NotADirectory { .. } => Code::InvalidPath,
        }
    }
}

/// Why a ref call's arguments do not go together.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RefsError {
    /// `--expect` on a local ref.
    #[error("--expect is for remote refs (NAME@REMOTE), not {name}")]
    ExpectOnLocal {
        /// The ref.
        name: String,
    },
}

impl RefsError {
    /// Its code.
    pub fn code(&self) -> Code {
        Code::Usage
    }
}

/// Creates the store folder `path` (nothing happens to one that exists).
pub fn init_store(path: &Utf8Path, options: &cas::OpenOptions) -> Result<InitOutcome, Error> {
    if path.exists() && !path.is_dir() {
        return Err(InitError::NotADirectory {
            path: path.to_owned(),
        }
        .into());
    }
    let existed = path.join(cas::DATABASE_FILE).is_file();
    let options = cas::OpenOptions {
        create: true,
        ..options.clone()
    };
    let store = cas::Store::open(path, &options)?;
    Ok(InitOutcome {
        store: store.root().to_owned(),
        existed,
    })
}

/// A ref.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RefEntry {
    /// A ref, or NAME@REMOTE.
    pub name: String,
    /// The snapshot it names.
    pub snapshot: SnapshotId,
}

/// Refs set, removed or listed.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RefsOutcome {
    /// Them.
    pub refs: Vec<RefEntry>,
    /// The refusal: a remote ref that did not hold what was expected (`refs` then holds
    /// its value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
