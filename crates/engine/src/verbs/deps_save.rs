//! `deps save [WORKTREE]`: a worktree's dependency directories stored as layers.

use camino::Utf8PathBuf;
use serde::{Deserialize, Serialize};

use crate::deps::{self, DepsError, DepsOutcome, LayerItem};
use crate::engine::{Call, Engine};
use crate::error::Error;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// `deps save [WORKTREE]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DepsSaveOptions {
    /// The worktree (default: the one holding the current directory).
    #[serde(default)]
    #[schemars(with = "Option<String>", extend("x-default-cwd" = true))]
    pub worktree: Option<Utf8PathBuf>,
}

impl Engine {
    /// `cairn deps save [WORKTREE]`.
    pub fn deps_save(&self, call: &Call, options: DepsSaveOptions) -> Result<DepsOutcome, Error> {
        let store = self.store(Access::Write)?;
        let path = call.dir(options.worktree.as_deref());
        let record = fs_manager::find_worktree(&store.reader()?, &path)?
            .ok_or(DepsError::NotAWorktree { path })?;
        let saved = deps::save(&store, &record, call.progress)?;
        let layers = saved
            .iter()
            .map(|s| LayerItem {
                new: Some(s.new),
                ..LayerItem::of(&s.record)
            })
            .collect();
        Ok(DepsOutcome { layers })
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Store each dependency directory of a worktree (node_modules, .venv, ...) as a layer keyed by its lockfiles; a layer stored already is not stored again.
    DepsSave(DepsSaveOptions) -> DepsOutcome = "deps_save" via deps_save [Route, Tool];
}

impl VerbSpec for verbs::DepsSave {
    const EXAMPLE: Option<&'static str> = Some(r#"{"worktree": "/home/agent/wt-1"}"#);
}
