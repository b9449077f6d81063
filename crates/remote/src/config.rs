//! What a store keeps about its remotes, in side tables it commits with its objects: each
//! remote's configuration (never credentials), the value of each remote ref it last saw,
//! and a cache of the remote's pack indexes.

use serde::{Deserialize, Serialize};

use cas::{
    BoxError, Checked, Problem, Reader, Roots, SideOwner, SideTable, SnapshotId, WriteBatch,
};

use crate::error::{InvalidRemote, RemoteError};
use crate::url::RemoteUrl;

/// Remote name → its [`RemoteConfig`] as JSON (scope `""`).
pub const REMOTES: SideTable = SideTable::new("remote.config");
/// Scope: remote name; key: ref name; value: the 32-byte snapshot id this store last saw
/// there (what `NAME@REMOTE` means offline, and what `push REF` expects to replace).
pub const TRACKING: SideTable = SideTable::new("remote.refs");
/// Scope: remote name; key: pack id (hex); value: that pack's index as the remote holds it.
pub const INDEX_CACHE: SideTable = SideTable::new("remote.index");
/// Where each object of a remote is, as its cached indexes say, kept beside them so a
/// lookup reads only the object's entries. Scope: remote name; keys: see `catalog`.
pub const LOCATIONS: SideTable = SideTable::new("remote.locations");
/// The packs the remote's `gc/` records condemn, as the store last read them (the keys
/// read are in its mark): read again only when those keys change, so a sync does not
/// parse records naming every pack a repack condemned. Scope: remote name; key: pack id
/// (hex); value: when it was first condemned (Unix seconds, `i64` little-endian).
pub const CONDEMNED: SideTable = SideTable::new("remote.condemned");

/// A remote as `remote add` recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteConfig {
    /// Its name in this store.
    pub name: String,
    /// `s3://BUCKET[/PREFIX]` or `file:///PATH`.
    pub url: String,
    /// The S3 endpoint, for engines other than AWS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The S3 region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// What `remote add` found about conditional writes.
    pub conditional: Conditional,
    /// The engine answers a ranged read with just that range (`rclone serve s3` sends
    /// the whole object); without, fetches read whole packs.
    #[serde(default = "yes")]
    pub ranged_reads: bool,
}

fn yes() -> bool {
    true
}

/// How the engine behind a remote answered `remote add`'s probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conditional {
    /// A second create of one key failed, as it must.
    pub create: bool,
    /// A write naming a stale version.
    pub stale_update: Probe,
}

/// The answer to one probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Probe {
    /// Refused, as it must be.
    Refused,
    /// Accepted: the engine ignores the condition.
    Accepted,
    /// The backend has no such writes (a folder); refs do not use them.
    Unsupported,
}

impl Conditional {
    /// True if refs can be updated there without ever losing a concurrent update: refs
    /// use create-only writes, and an engine found ignoring any condition is not trusted.
    pub fn refs_safe(&self) -> bool {
        self.create && self.stale_update != Probe::Accepted
    }
}

impl RemoteConfig {
    /// Its parsed URL.
    pub fn location(&self) -> Result<RemoteUrl, RemoteError> {
        Ok(RemoteUrl::parse(&self.url)?)
    }
}

/// Checks a remote name: 1 to 64 of `A-Z a-z 0-9 . _ -`, not starting with `-` or `.`.
pub fn validate_remote_name(name: &str) -> Result<(), RemoteError> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && !name.starts_with(['-', '.']);
    if ok {
        Ok(())
    } else {
        Err(InvalidRemote::Name {
            name: name.to_owned(),
        }
        .into())
    }
}

fn decode(name: &str, bytes: &[u8]) -> Result<RemoteConfig, RemoteError> {
    serde_json::from_slice(bytes).map_err(|source| {
        InvalidRemote::Record {
            remote: name.to_owned(),
            source,
        }
        .into()
    })
}

/// Every configured remote, by name.
pub fn remotes(reader: &Reader) -> Result<Vec<RemoteConfig>, RemoteError> {
    reader
        .side_scope(REMOTES, "")?
        .into_iter()
        .map(|(k, v)| decode(&String::from_utf8_lossy(&k), &v))
        .collect()
}

/// The remote called `name`.
pub fn remote_config(reader: &Reader, name: &str) -> Result<RemoteConfig, RemoteError> {
    match reader.side_get(REMOTES, "", name.as_bytes())? {
        Some(v) => decode(name, &v),
        None => Err(RemoteError::Unknown {
            name: name.to_owned(),
        }),
    }
}

/// Adds `config` to `batch` (the caller has probed it).
pub fn add_remote(batch: &mut WriteBatch, config: &RemoteConfig) {
    let json = serde_json::to_vec(config).unwrap_or_default();
    batch.put_side(REMOTES, "", config.name.as_bytes(), json);
}

/// Forgets remote `name` in `batch`: its record, the refs seen there and its index cache.
/// Objects fetched from it stay.
pub fn remove_remote(batch: &mut WriteBatch, name: &str) {
    batch.remove_side(REMOTES, "", name.as_bytes());
    batch.clear_side_scope(TRACKING, name);
    batch.clear_side_scope(INDEX_CACHE, name);
    batch.clear_side_scope(LOCATIONS, name);
    batch.clear_side_scope(CONDEMNED, name);
}

/// What this store last saw of ref `name` on `remote`.
pub fn tracking_ref(
    reader: &Reader,
    remote: &str,
    name: &str,
) -> Result<Option<SnapshotId>, RemoteError> {
    Ok(reader
        .side_get(TRACKING, remote, name.as_bytes())?
        .and_then(|v| <[u8; 32]>::try_from(v.as_slice()).ok())
        .map(SnapshotId::from_bytes))
}

/// Every ref this store last saw on `remote`.
pub fn tracking_refs(
    reader: &Reader,
    remote: &str,
) -> Result<Vec<(String, SnapshotId)>, RemoteError> {
    Ok(reader
        .side_scope(TRACKING, remote)?
        .into_iter()
        .filter_map(|(k, v)| {
            let id = <[u8; 32]>::try_from(v.as_slice()).ok()?;
            Some((
                String::from_utf8_lossy(&k).into_owned(),
                SnapshotId::from_bytes(id),
            ))
        })
        .collect())
}

/// Records (or with `None` forgets) what ref `name` on `remote` holds.
pub fn set_tracking(batch: &mut WriteBatch, remote: &str, name: &str, value: Option<SnapshotId>) {
    match value {
        Some(id) => batch.put_side(TRACKING, remote, name.as_bytes(), id.as_bytes().to_vec()),
        None => batch.remove_side(TRACKING, remote, name.as_bytes()),
    }
}

/// The remote records' owner for `gc` and `fsck`: a remote ref this store last saw keeps
/// its snapshot, if the store holds it.
pub struct RemotesOwner;

impl SideOwner for RemotesOwner {
    fn roots(&self, reader: &Reader, roots: &mut Roots) -> Result<(), BoxError> {
        for (remote, name, value) in reader.side_entries(TRACKING)? {
            let Ok(id) = <[u8; 32]>::try_from(value.as_slice()) else {
                continue;
            };
            let id = SnapshotId::from_bytes(id);
            if reader.has_snapshot(id)? {
                let name = format!("{}@{remote}", String::from_utf8_lossy(&name));
                roots.keep(id, cas::Keeper::new("remote ref").named(name));
            }
        }
        Ok(())
    }

    fn check(&self, reader: &Reader) -> Result<Checked, BoxError> {
        let mut out = Checked::default();
        for (_, k, v) in reader.side_entries(REMOTES)? {
            out.references += 1;
            let name = String::from_utf8_lossy(&k).into_owned();
            if let Err(e) = decode(&name, &v).and_then(|c| c.location()) {
                out.problems
                    .push(Problem::new("remote", name, e.to_string()));
            }
        }
        for (remote, k, v) in reader.side_entries(TRACKING)? {
            out.references += 1;
            let name = format!("{}@{remote}", String::from_utf8_lossy(&k));
            if v.len() != 32 {
                out.problems
                    .push(Problem::new("remote ref", name, "unreadable record"));
            }
        }
        Ok(out)
    }

    fn name(&self) -> &'static str {
        "remotes"
    }
}
