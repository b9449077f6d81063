//! Refs on a remote, without a lock server. Ref `NAME` is the objects `refs/NAME/<seq>`
//! (16 hex digits), each `{"snapshot": ID}` or `{"snapshot": null}` for a deletion, and
//! its value is the one with the highest `<seq>`. An update reads the value at `<seq>`,
//! checks it is what the caller expects, and creates `<seq + 1>` with a create-only write
//! (`If-None-Match: *` on S3, an atomic link on a folder): of two machines racing from one
//! value, exactly one creates the next entry and the other is told what the ref holds now.
//! Snapshots pushed by id are kept by `pins/<id>` instead.
//!
//! A part of a ref's name that is 16 hex digits would read as a sequence number of the ref
//! its earlier parts name (`x/0000000000000002` against `x`'s second entry, and on a
//! folder the two cannot both exist): such a part is written `=<part>` (ref names hold no
//! `=`), so no name's entries meet another's. Entries cairn wrote before that, under the
//! part as it is, are still read, and the next update of such a ref writes past them.

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use object_store::PutMode;
use serde::{Deserialize, Serialize};

use cas::SnapshotId;

use crate::catalog::{CONCURRENCY, is_hex_id};
use crate::error::{InvalidRemote, RemoteError};
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

/// How many sequence numbers held by something else an update steps past.
const BLOCKED_KEYS: u64 = 16;

/// Where ref `name`'s entries are, under `refs/`.
fn ref_dir(name: &str) -> String {
    name.split('/')
        .map(|part| {
            if looks_like_seq(part) {
                format!("={part}")
            } else {
                part.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The ref whose entries are under `refs/<dir>`: as [`ref_dir`] writes it, or as cairn
/// wrote it before (parts as they are); `None` for keys that are not a ref's.
fn name_of_dir(dir: &str) -> Option<String> {
    let name = dir
        .split('/')
        .map(|part| match part.strip_prefix('=') {
            Some(hex) if looks_like_seq(hex) => Some(hex),
            Some(_) => None,
            None => Some(part),
        })
        .collect::<Option<Vec<_>>>()?
        .join("/");
    cas::validate_ref_name(&name).ok().map(|()| name)
}

/// 16 hex digits of either case (a folder on a case-insensitive disk would mix them up).
fn looks_like_seq(part: &str) -> bool {
    part.len() == 16 && part.bytes().all(|b| b.is_ascii_hexdigit())
}

fn seq_key(dir: &str, seq: u64) -> String {
    format!("refs/{dir}/{seq:016x}")
}

/// A sequence number as [`seq_key`] writes it: 16 lowercase hex digits.
fn parse_seq(s: &str) -> Option<u64> {
    (s.len() == 16 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        .then(|| u64::from_str_radix(s, 16).ok())
        .flatten()
}

/// A ref's entries found under `refs/`: (directory, sequence number), by ref name.
type Entries = std::collections::BTreeMap<String, Vec<(String, u64)>>;

/// Every ref's entries on the remote.
async fn all_entries(remote: &Remote) -> Result<Entries, RemoteError> {
    let mut out = Entries::new();
    for (key, _) in remote.list("refs").await? {
        let Some((dir, seq)) = key.rsplit_once('/') else {
            continue;
        };
        // Keys another program put there are not refs.
        let (Some(seq), Some(name)) = (parse_seq(seq), name_of_dir(dir)) else {
            continue;
        };
        out.entry(name).or_default().push((dir.to_owned(), seq));
    }
    Ok(out)
}

/// The latest of a ref's entries (the highest sequence number; of two with one number,
/// the one where this build writes).
fn latest(name: &str, entries: &[(String, u64)]) -> Option<(String, u64)> {
    let dir = ref_dir(name);
    entries
        .iter()
        .max_by_key(|(d, seq)| (*seq, *d == dir))
        .cloned()
}

async fn read_entry(
    remote: &Remote,
    dir: &str,
    seq: u64,
) -> Result<Option<SnapshotId>, RemoteError> {
    let key = seq_key(dir, seq);
    let Some(bytes) = remote.get(&key, MAX_RECORD).await? else {
        // Compacted by a remote gc after a later entry was written.
        return Ok(None);
    };
    let entry: Entry = serde_json::from_slice(&bytes)
        .map_err(|e| RemoteError::undecodable(remote.name(), &key, e))?;
    Ok(entry.snapshot)
}

/// The ref's latest sequence number (0: never written) and value.
async fn head(remote: &Remote, name: &str) -> Result<(u64, Option<SnapshotId>), RemoteError> {
    // A name becomes part of a key: nothing but a ref name may reach the engine.
    cas::validate_ref_name(name).map_err(|source| InvalidRemote::RefName {
        remote: remote.name().to_owned(),
        source,
    })?;
    let dir = ref_dir(name);
    let mut entries = Vec::new();
    // Where cairn wrote the ref before, if that is elsewhere: only its own entries there,
    // not those of refs nested below it.
    let legacy = (dir != name).then_some(name);
    for at in std::iter::once(dir.as_str()).chain(legacy) {
        for (key, _) in remote.list(&format!("refs/{at}")).await? {
            if let Some(seq) = parse_seq(&key) {
                entries.push((at.to_owned(), seq));
            }
        }
    }
    match latest(name, &entries) {
        None => Ok((0, None)),
        Some((at, seq)) => Ok((seq, read_entry(remote, &at, seq).await?)),
    }
}

/// What ref `name` holds on the remote.
pub fn get(remote: &Remote, name: &str) -> Result<Option<SnapshotId>, RemoteError> {
    remote.block_on(async { Ok(head(remote, name).await?.1) })
}

/// Every ref on the remote, by name.
pub fn list(remote: &Remote) -> Result<Vec<RemoteRef>, RemoteError> {
    remote.block_on(async {
        let heads: Vec<(String, (String, u64))> = all_entries(remote)
            .await?
            .into_iter()
            .filter_map(|(name, entries)| Some((name.clone(), latest(&name, &entries)?)))
            .collect();
        let values: Vec<Option<RemoteRef>> =
            futures_util::stream::iter(heads.into_iter().map(|(name, (dir, seq))| async move {
                let value = read_entry(remote, &dir, seq).await?;
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
        let body = Bytes::from(serde_json::to_vec(&Entry { snapshot: new }).unwrap_or_default());
        let dir = ref_dir(name);
        let mut next = seq + 1;
        loop {
            match remote
                .put(&seq_key(&dir, next), body.clone(), PutMode::Create)
                .await
            {
                Ok(_) => return Ok(()),
                Err(
                    object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. },
                ) => {
                    let now = head(remote, name).await?;
                    // Nobody wrote the ref: the key is held by something that is no entry
                    // of it (a folder of a ref named before `ref_dir`, whose name's part
                    // was this number), and every writer steps past it alike.
                    if now == (seq, current) && next - seq < BLOCKED_KEYS {
                        next += 1;
                        continue;
                    }
                    return Err(moved(now.1));
                }
                Err(e) => return Err(remote.fail(e)),
            }
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
    let mut dropped = 0;
    for (name, entries) in all_entries(remote).await? {
        let keep = latest(&name, &entries);
        for (dir, seq) in entries {
            if Some((dir.clone(), seq)) == keep {
                continue;
            }
            dropped += 1;
            if !dry_run {
                remote.delete(&seq_key(&dir, seq)).await?;
            }
        }
    }
    Ok(dropped)
}
