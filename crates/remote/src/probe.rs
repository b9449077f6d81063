//! `remote add`'s checks: the remote is reachable with these credentials, holds a cairn
//! remote of a format this build reads (or nothing yet), and enforces the conditional
//! writes refs rely on. Some engines accept the headers and ignore them; only trying tells.

use bytes::Bytes;
use object_store::{PutMode, UpdateVersion};

use crate::config::{Conditional, Probe, RemoteConfig};
use crate::error::{InvalidRemote, RemoteError};
use crate::layout::{FORMAT, FORMAT_1, FORMAT_2, FORMAT_3, FORMAT_4, MARKER, MAX_RECORD};
use crate::transport::Remote;

fn nonce() -> String {
    let seed = format!(
        "{}-{:?}-{:?}",
        std::process::id(),
        std::time::SystemTime::now(),
        std::thread::current().id()
    );
    blake3::hash(seed.as_bytes()).to_hex()[..16].to_owned()
}

/// Connects to `config`'s remote, writes its marker if it is new, and records what the
/// engine does with conditional writes in the returned config.
pub fn probe(config: &RemoteConfig) -> Result<RemoteConfig, RemoteError> {
    if let crate::url::RemoteUrl::File { path } = config.location()? {
        // A folder that cannot be made is a bad URL, not a failing remote.
        std::fs::create_dir_all(&path).map_err(|source| InvalidRemote::Folder {
            remote: config.name.clone(),
            path: path.clone(),
            source,
        })?;
    }
    let remote = Remote::connect(config)?;
    let (conditional, ranged_reads) = remote.block_on(async {
        check_marker(&remote).await?;
        let key = format!("probe/{}", nonce());
        let result = probe_conditions(&remote, &key).await;
        let ranges = remote.serves_ranges(&format!("{key}-update")).await;
        let _ = remote.delete(&key).await;
        let _ = remote.delete(&format!("{key}-update")).await;
        Ok::<_, RemoteError>((result?, ranges?))
    })?;
    Ok(RemoteConfig {
        conditional,
        ranged_reads,
        ..config.clone()
    })
}

fn marker() -> Bytes {
    Bytes::from(serde_json::json!({ "format": FORMAT }).to_string())
}

/// The format the remote's marker names, `None` if there is none.
async fn marker_format(remote: &Remote) -> Result<Option<u64>, RemoteError> {
    let Some(bytes) = remote.get(MARKER, MAX_RECORD).await? else {
        return Ok(None);
    };
    serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v.get("format").and_then(serde_json::Value::as_u64))
        .map(Some)
        .ok_or_else(|| RemoteError::Format {
            remote: remote.name().to_owned(),
            reason: format!("{MARKER} is not a cairn remote marker"),
        })
}

fn other_format(remote: &Remote, format: u64) -> RemoteError {
    RemoteError::Format {
        remote: remote.name().to_owned(),
        reason: format!(
            "remote layout format {format}; this cairn reads formats {FORMAT_1} to {FORMAT}"
        ),
    }
}

async fn check_marker(remote: &Remote) -> Result<(), RemoteError> {
    match remote.put(MARKER, marker(), PutMode::Create).await {
        Ok(_) => return Ok(()),
        Err(
            object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. },
        ) => {}
        // An engine without create-only writes: the marker is read below.
        Err(
            object_store::Error::NotImplemented { .. } | object_store::Error::NotSupported { .. },
        ) => {}
        Err(e) => return Err(remote.fail(e)),
    }
    match marker_format(remote).await? {
        Some(FORMAT | FORMAT_4 | FORMAT_3 | FORMAT_2 | FORMAT_1) => Ok(()),
        Some(other) => Err(other_format(remote, other)),
        None => Err(RemoteError::Format {
            remote: remote.name().to_owned(),
            reason: format!("{MARKER} could not be written or read back"),
        }),
    }
}

/// Before a push writes its first pack: a remote of format 1 to 4 is marked format 5 (so
/// an older cairn refuses it at `remote add`, naming the format, rather than meet packs or
/// index names it cannot read); one without a marker gets one; one of a later format is
/// refused.
pub(crate) async fn mark_for_push(remote: &Remote) -> Result<(), RemoteError> {
    match marker_format(remote).await? {
        Some(FORMAT) => Ok(()),
        Some(FORMAT_4 | FORMAT_3 | FORMAT_2 | FORMAT_1) | None => remote
            .put(MARKER, marker(), PutMode::Overwrite)
            .await
            .map(|_| ())
            .map_err(|e| remote.fail(e)),
        Some(other) => Err(other_format(remote, other)),
    }
}

async fn probe_conditions(remote: &Remote, key: &str) -> Result<Conditional, RemoteError> {
    let unsupported = |e: &object_store::Error| {
        matches!(
            e,
            object_store::Error::NotImplemented { .. } | object_store::Error::NotSupported { .. }
        )
    };
    let refused = |e: &object_store::Error| {
        matches!(
            e,
            object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }
        )
    };
    // A second create of one key must fail.
    let create = match remote
        .put(key, Bytes::from_static(b"1"), PutMode::Create)
        .await
    {
        Ok(_) => match remote
            .put(key, Bytes::from_static(b"2"), PutMode::Create)
            .await
        {
            Ok(_) => false,
            Err(e) if refused(&e) => true,
            Err(e) if unsupported(&e) => false,
            Err(e) => return Err(remote.fail(e)),
        },
        Err(e) if unsupported(&e) => false,
        Err(e) => return Err(remote.fail(e)),
    };
    // A write naming a version that is no longer current must fail.
    let update_key = format!("{key}-update");
    let first = remote
        .put(
            &update_key,
            Bytes::from_static(b"probe-a"),
            PutMode::Overwrite,
        )
        .await
        .map_err(|e| remote.fail(e))?;
    let stale = UpdateVersion {
        e_tag: first.e_tag,
        version: first.version,
    };
    let stale_update = match remote
        .put(
            &update_key,
            Bytes::from_static(b"probe-b"),
            PutMode::Update(stale.clone()),
        )
        .await
    {
        Err(e) if unsupported(&e) => Probe::Unsupported,
        // Even a current version was refused: such writes are not usable here, and refs
        // do not use them.
        Err(e) if refused(&e) => Probe::Unsupported,
        Err(e) => return Err(remote.fail(e)),
        Ok(_) => match remote
            .put(
                &update_key,
                Bytes::from_static(b"probe-c"),
                PutMode::Update(stale),
            )
            .await
        {
            Ok(_) => Probe::Accepted,
            Err(e) if refused(&e) => Probe::Refused,
            Err(e) if unsupported(&e) => Probe::Unsupported,
            Err(e) => return Err(remote.fail(e)),
        },
    };
    Ok(Conditional {
        create,
        stale_update,
    })
}
