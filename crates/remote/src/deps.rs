//! Dependency layer records on a remote: `deps/<key>` (the layer's key, 64 hex digits),
//! written by `push --deps` after the layer's snapshot is there and pinned, read by
//! `pull --deps`. The remote does not read them: what a layer is, the engine says.

use bytes::Bytes;
use object_store::PutMode;

use crate::catalog::is_hex_id;
use crate::error::{InvalidRemote, RemoteError};
use crate::layout::MAX_RECORD;
use crate::transport::Remote;

fn record_key(remote: &Remote, key: &str) -> Result<String, RemoteError> {
    if !is_hex_id(key) {
        return Err(InvalidRemote::LayerKey {
            remote: remote.name().to_owned(),
            key: key.to_owned(),
        }
        .into());
    }
    Ok(format!("deps/{key}"))
}

/// Writes the record of the layer `key` (replacing what was there).
pub fn put_layer_record(remote: &Remote, key: &str, record: &[u8]) -> Result<(), RemoteError> {
    let at = record_key(remote, key)?;
    let body = Bytes::copy_from_slice(record);
    remote.block_on(async {
        remote
            .put(&at, body, PutMode::Overwrite)
            .await
            .map(|_| ())
            .map_err(|e| remote.fail(e))
    })
}

/// The record of the layer `key`, if the remote has one.
pub fn layer_record(remote: &Remote, key: &str) -> Result<Option<Vec<u8>>, RemoteError> {
    let at = record_key(remote, key)?;
    remote.block_on(async { Ok(remote.get(&at, MAX_RECORD).await?.map(|b| b.to_vec())) })
}
