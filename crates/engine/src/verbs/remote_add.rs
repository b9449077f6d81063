//! `remote add`: a remote added, checked reachable and for what it enforces.

use cas::WriteBatch;
use remote::{RemoteConfig, RemoteError};
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine};
use crate::error::Error;
use crate::remotes::{RemotesOutcome, entry};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// `remote add NAME URL [--endpoint URL] [--region R]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoteAddOptions {
    /// Its name here.
    pub name: String,
    /// s3://BUCKET[/PREFIX] or file:///PATH.
    pub url: String,
    /// The S3 endpoint (engines other than AWS).
    #[serde(default)]
    pub endpoint: Option<String>,
    /// The S3 region.
    #[serde(default)]
    pub region: Option<String>,
}

impl Engine {
    /// `cairn remote add NAME URL`: checks the remote is reachable and what it enforces.
    pub fn remote_add(
        &self,
        _call: &Call,
        options: RemoteAddOptions,
    ) -> Result<RemotesOutcome, Error> {
        remote::validate_remote_name(&options.name)?;
        remote::RemoteUrl::parse(&options.url).map_err(RemoteError::from)?;
        let store = self.store(Access::Create)?;
        if let Ok(existing) = remote::remote_config(&store.reader()?, &options.name) {
            return Err(RemoteError::Exists {
                name: options.name,
                url: existing.url,
            }
            .into());
        }
        let config = remote::probe(&RemoteConfig {
            name: options.name,
            url: options.url,
            endpoint: options.endpoint,
            region: options.region,
            conditional: remote::Conditional {
                create: false,
                stale_update: remote::Probe::Unsupported,
            },
            ranged_reads: true,
        })?;
        let mut batch = WriteBatch::new();
        remote::add_remote(&mut batch, &config);
        store.write(&batch)?;
        Ok(RemotesOutcome {
            remotes: vec![entry(&config)],
        })
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Add a remote (s3://BUCKET[/PREFIX] or file:///PATH), checking it is reachable and whether it enforces conditional writes.
    RemoteAdd(RemoteAddOptions) -> RemotesOutcome = "remote_add" via remote_add [Route];
}

impl VerbSpec for verbs::RemoteAdd {
    const EXAMPLE: Option<&'static str> = Some(
        r#"{"name": "origin", "url": "s3://team-bucket/agents", "endpoint": "http://10.0.0.5:8333"}"#,
    );
}
