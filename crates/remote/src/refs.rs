//! Refs on a remote, without a lock server. Ref `NAME` is the objects `refs/NAME/<seq>`
//! (16 hex digits), each `{"snapshot": ID}` or `{"snapshot": null}` for a deletion, and
//! its value is the one with the highest `<seq>`. An update reads the value at `<seq>`,
//! checks it is what the caller expects, and creates `<seq + 1>` with a create-only write
//! (`If-None-Match: *` on S3, an atomic link on a folder): of two machines racing from one
//! value, exactly one creates the next entry and the other is told what the ref holds now.
//! Snapshots pushed by id are kept by `pins/<id>` instead.

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use object_store::PutMode;
use serde::{Deserialize, Serialize};

use cas::SnapshotId;

use crate::catalog::{CONCURRENCY, is_hex_id};
use crate::error::RemoteError;
use crate::layout::{MAX_RECORD, pin_key};
use crate::transport::Remote;

/// A ref on a remote and its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteRef {
    /// The ref's name (without `@REMOTE`).
    pub name: String,
    /// What it points at.
    pub snapshot: SnapshotId,
}

/// What an update does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefUpdate {
    /// Point the ref at a snapshot.
    Set(SnapshotId),
    /// Delete it.
    Remove,
}

#[derive(Serialize, Deserialize)]
struct Entry {
    snapshot: Option<SnapshotId>,
}

fn seq_key(name: &str, seq: u64) -> String {
    format!("refs/{name}/{seq:016x}")
}

fn parse_seq(s: &str) -> Option<u64> {
    (s.len() == 16)
        .then(|| u64::from_str_radix(s, 16).ok())
        .flatten()
}

async fn read_entry(
    remote: &Remote,
    name: &str,
    seq: u64,
) -> Result<Option<SnapshotId>, RemoteError> {
    let key = seq_key(name, seq);
    let Some(bytes) = remote.get(&key, MAX_RECORD).await? else {
        // Compacted by a remote gc after a later entry was written.
        return Ok(None);
    };
    let entry: Entry =
        serde_json::from_slice(&bytes).map_err(|e| RemoteError::corrupt(remote.name(), &key, e))?;
    Ok(entry.snapshot)
}

/// The ref's latest sequence number (0: never written) and value.
async fn head(remote: &Remote, name: &str) -> Result<(u64, Option<SnapshotId>), RemoteError> {
    // A name becomes part of a key: nothing but a ref name may reach the engine.
    cas::validate_ref_name(name)
        .map_err(|e| RemoteError::Invalid(format!("remote {}: {e}", remote.name())))?;
    let seq = remote
        .list(&format!("refs/{name}"))
        .await?
        .into_iter()
        .filter_map(|(k, _)| parse_seq(&k))
        .max()
        .unwrap_or(0);
    if seq == 0 {
        return Ok((0, None));
    }
    Ok((seq, read_entry(remote, name, seq).await?))
}

/// What ref `name` holds on the remote.
pub fn get(remote: &Remote, name: &str) -> Result<Option<SnapshotId>, RemoteError> {
    remote.block_on(async { Ok(head(remote, name).await?.1) })
}

/// Every ref on the remote, by name.
pub fn list(remote: &Remote) -> Result<Vec<RemoteRef>, RemoteError> {
    remote.block_on(async {
        let mut latest: std::collections::BTreeMap<String, u64> = Default::default();
        for (key, _) in remote.list("refs").await? {
            let Some((name, seq)) = key.rsplit_once('/') else {
                continue;
            };
            let Some(seq) = parse_seq(seq) else { continue };
            // Keys another program put there are not refs.
            if cas::validate_ref_name(name).is_err() {
                continue;
            }
            let slot = latest.entry(name.to_owned()).or_default();
            *slot = (*slot).max(seq);
        }
        let values: Vec<Option<RemoteRef>> =
            futures_util::stream::iter(latest.into_iter().map(|(name, seq)| async move {
                let value = read_entry(remote, &name, seq).await?;
                Ok::<_, RemoteError>(value.map(|snapshot| RemoteRef { name, snapshot }))
            }))
            .buffered(CONCURRENCY)
            .try_collect()
            .await?;
        Ok(values.into_iter().flatten().collect())
    })
}

/// Updates ref `name` if it holds `expected` (`None`: if it does not exist); a ref that
/// already holds the new value is left as it is. Refused with [`RemoteError::RefMoved`]
/// naming what it holds otherwise, also when another machine updated it first.
pub fn update(
    remote: &Remote,
    name: &str,
    update: RefUpdate,
    expected: Option<SnapshotId>,
) -> Result<(), RemoteError> {
    if !remote.config().conditional.refs_safe() {
        return Err(RemoteError::NoConditionalWrites {
            remote: remote.name().to_owned(),
        });
    }
    let new = match update {
        RefUpdate::Set(id) => Some(id),
        RefUpdate::Remove => None,
    };
    remote.block_on(async {
        let (seq, current) = head(remote, name).await?;
        if current == new {
            return if new.is_none() {
                Err(RemoteError::NoSuchRef {
                    remote: remote.name().to_owned(),
                    name: name.to_owned(),
                })
            } else {
                Ok(())
            };
        }
        let moved = |current| RemoteError::RefMoved {
            remote: remote.name().to_owned(),
            name: name.to_owned(),
            current,
            expected,
        };
        if current != expected {
            return Err(moved(current));
        }
        let body = serde_json::to_vec(&Entry { snapshot: new }).unwrap_or_default();
        match remote
            .put(&seq_key(name, seq + 1), Bytes::from(body), PutMode::Create)
            .await
        {
            Ok(_) => Ok(()),
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => Err(moved(head(remote, name).await?.1)),
            Err(e) => Err(remote.fail(e)),
        }
    })
}

/// Keeps `id` on the remote (a snapshot pushed by id).
pub fn pin(remote: &Remote, id: SnapshotId) -> Result<(), RemoteError> {
    remote.block_on(async {
        remote
            .put(&pin_key(&id), Bytes::from_static(b"{}"), PutMode::Overwrite)
            .await
            .map(|_| ())
            .map_err(|e| remote.fail(e))
    })
}

/// Stops keeping `id` (`ref rm ID@REMOTE`).
pub fn unpin(remote: &Remote, id: SnapshotId) -> Result<(), RemoteError> {
    remote.block_on(async {
        if !remote.exists(&pin_key(&id)).await? {
            return Err(RemoteError::NoSuchRef {
                remote: remote.name().to_owned(),
                name: id.to_string(),
            });
        }
        remote.delete(&pin_key(&id)).await
    })
}

/// Every pinned snapshot.
pub fn pins(remote: &Remote) -> Result<Vec<SnapshotId>, RemoteError> {
    remote.block_on(async {
        Ok(remote
            .list("pins")
            .await?
            .into_iter()
            .filter(|(k, _)| is_hex_id(k))
            .filter_map(|(k, _)| k.parse().ok())
            .collect())
    })
}

/// Drops entries of every ref below its latest (remote gc): they are history no reader
/// needs, and a writer racing from an older value fails on the latest one anyway.
pub(crate) async fn compact(remote: &Remote, dry_run: bool) -> Result<u64, RemoteError> {
    let mut by_name: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
    for (key, _) in remote.list("refs").await? {
        if let Some((name, seq)) = key.rsplit_once('/')
            && let Some(seq) = parse_seq(seq)
        {
            by_name.entry(name.to_owned()).or_default().push(seq);
        }
    }
    let mut dropped = 0;
    for (name, mut seqs) in by_name {
        seqs.sort_unstable();
        seqs.pop();
        for seq in seqs {
            dropped += 1;
            if !dry_run {
                remote.delete(&seq_key(&name, seq)).await?;
            }
        }
    }
    Ok(dropped)
}
