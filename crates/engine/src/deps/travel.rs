//! Dependency layers between stores: `push --deps` sends, for each pushed snapshot, the
//! layers stored here under the keys its lockfiles give on this machine, with a record of
//! each (`deps/<key>` on the remote); `pull --deps` reads the records for the keys the
//! pulled snapshots give, checks each is the record its key names, and stores it once its
//! layer's snapshot is here. A layer bound to its root never travels: no other machine
//! can name its key.

use camino::Utf8PathBuf;
use cas::{SnapshotId, Store};

use super::{LAYERS, LayerRecord, key, record, wanted_in};
use crate::error::{Code, Error};

/// A layer record a remote holds that cannot be this key's.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReceivedLayerError {
    /// It does not decode, or is not the record its key names.
    #[error("remote {remote}: the record of dependency layer {key} is not one: {reason}")]
    NotTheRecord {
        /// The remote.
        remote: String,
        /// The key it is stored under.
        key: String,
        /// What is wrong.
        reason: String,
    },
}

crate::error::coded!(ReceivedLayerError);

impl ReceivedLayerError {
    /// Its code.
    pub fn code(&self) -> Code {
        Code::Corrupt
    }
}

/// The keys of the layers `snapshots` want on this machine, each once, in order.
pub fn travelling_keys(
    reader: &cas::Reader,
    snapshots: &[SnapshotId],
) -> Result<Vec<String>, Error> {
    let mut out: Vec<String> = Vec::new();
    for &id in snapshots {
        let tree = reader.snapshot(id)?.tree;
        let shown = Utf8PathBuf::from(format!("{id}:{}", super::PAIRS_FILE));
        for want in wanted_in(reader, tree, &shown)? {
            let k = key(&want.dir, &want.lockfiles, None);
            if !out.contains(&k) {
                out.push(k);
            }
        }
    }
    Ok(out)
}

/// The layers stored here that `snapshots` want, each once.
pub fn travelling(
    reader: &cas::Reader,
    snapshots: &[SnapshotId],
) -> Result<Vec<LayerRecord>, Error> {
    let mut out = Vec::new();
    for k in travelling_keys(reader, snapshots)? {
        if let Some(r) = record(reader, &k)? {
            out.push(r);
        }
    }
    Ok(out)
}

/// A record as it goes to a remote.
pub fn encode(record: &LayerRecord) -> Vec<u8> {
    serde_json::to_vec(record).expect("a layer record serializes")
}

/// The record `bytes` that remote `remote` holds under `key`, checked: it decodes, names
/// that key, and its directory and lockfiles give that key on this machine.
pub fn received(remote: &str, key_asked: &str, bytes: &[u8]) -> Result<LayerRecord, Error> {
    let bad = |reason: String| ReceivedLayerError::NotTheRecord {
        remote: remote.to_owned(),
        key: key_asked.to_owned(),
        reason,
    };
    let record: LayerRecord =
        serde_json::from_slice(bytes).map_err(|e| bad(format!("it does not decode: {e}")))?;
    let dir = path_policy::RepoPathBuf::new(record.path.as_str().as_bytes().to_vec())
        .map_err(|e| bad(format!("its path {}: {e}", record.path)))?;
    let computed = key(&dir, &record.lockfiles, None);
    if record.key != key_asked || computed != key_asked || record.rooted.is_some() {
        return Err(bad(format!(
            "it names key {} and its directory and lockfiles give {computed}",
            record.key
        ))
        .into());
    }
    Ok(record)
}

/// Stores `record` (its layer's snapshot is here), unless a layer is stored under its key
/// already; used now.
pub fn store_received(store: &Store, mut layer: LayerRecord) -> Result<(), Error> {
    if record(&store.reader()?, &layer.key)?.is_some() {
        return Ok(());
    }
    layer.used = jiff::Timestamp::now();
    let mut batch = cas::WriteBatch::new();
    batch.put_side(LAYERS, "", layer.key.as_bytes(), encode(&layer));
    store.write(&batch)?;
    Ok(())
}
