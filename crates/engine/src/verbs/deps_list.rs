//! `deps list`: the dependency layers the store holds.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::deps::{self, DepsOutcome, LayerItem};
use crate::engine::{Call, Engine};
use crate::error::Error;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// `deps list`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DepsListOptions {}

impl Engine {
    /// `cairn deps list`.
    pub fn deps_list(&self, _call: &Call, _options: DepsListOptions) -> Result<DepsOutcome, Error> {
        let store = self.store(Access::Read)?;
        let reader = store.reader()?;
        let mut used_by: BTreeMap<String, Vec<camino::Utf8PathBuf>> = BTreeMap::new();
        for w in fs_manager::RegistryRead::worktrees(&reader)? {
            for d in &w.deps {
                used_by
                    .entry(d.key.clone())
                    .or_default()
                    .push(w.root.clone());
            }
        }
        let layers = deps::records(&reader)?
            .iter()
            .map(|r| LayerItem {
                used_by: used_by.remove(&r.key).unwrap_or_default(),
                ..LayerItem::of(r)
            })
            .collect();
        Ok(DepsOutcome { layers })
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// The dependency layers the store holds, with the worktrees they are attached to.
    DepsList(DepsListOptions) -> DepsOutcome = "deps_list" via deps_list [Route, Tool];
}

impl VerbSpec for verbs::DepsList {
    const READS_ONLY: bool = true;

    const EXAMPLE: Option<&'static str> = Some(r#"{}"#);
}
