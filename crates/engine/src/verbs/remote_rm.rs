//! `remote rm`: a remote forgotten here (nothing on it changes).

use cas::WriteBatch;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine};
use crate::error::Error;
use crate::remotes::{RemotesOutcome, entry};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// `remote rm NAME`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoteRmOptions {
    /// Its name.
    pub name: String,
}

impl Engine {
    /// `cairn remote rm NAME`: forgets it here (nothing on the remote changes).
    pub fn remote_rm(
        &self,
        _call: &Call,
        options: RemoteRmOptions,
    ) -> Result<RemotesOutcome, Error> {
        let store = self.store(Access::Write)?;
        let config = remote::remote_config(&store.reader()?, &options.name)?;
        let mut batch = WriteBatch::new();
        remote::remove_remote(&mut batch, &options.name);
        store.write(&batch)?;
        Ok(RemotesOutcome {
            remotes: vec![entry(&config)],
        })
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Forget a remote (nothing on it changes).
    RemoteRm(RemoteRmOptions) -> RemotesOutcome = "remote_rm" via remote_rm [Route];
}

impl VerbSpec for verbs::RemoteRm {
    const EXAMPLE: Option<&'static str> = Some(r#"{"name": "origin"}"#);
}
