//! `remote list`: the remotes this store knows.

use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine};
use crate::error::Error;
use crate::remotes::{RemotesOutcome, entry};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// `remote list`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoteListOptions {}

impl Engine {
    /// `cairn remote list`.
    pub fn remote_list(
        &self,
        _call: &Call,
        _options: RemoteListOptions,
    ) -> Result<RemotesOutcome, Error> {
        let store = self.store(Access::Read)?;
        let remotes = remote::remotes(&store.reader()?)?;
        Ok(RemotesOutcome {
            remotes: remotes.iter().map(entry).collect(),
        })
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// The remotes this store knows, and whether refs can be updated on each.
    RemoteList(RemoteListOptions) -> RemotesOutcome = "remote_list" via remote_list [Route, Tool];
}

impl VerbSpec for verbs::RemoteList {
    const READS_ONLY: bool = true;

    const EXAMPLE: Option<&'static str> = Some(r#"{}"#);
}
