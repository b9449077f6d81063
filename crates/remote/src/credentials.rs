//! The AWS shared credentials and config files, for when the environment names no keys.

use std::path::PathBuf;

use crate::error::RemoteError;

/// What the files give: keys (id, secret, session token) and a region.
#[derive(Default)]
pub(crate) struct FromFiles {
    pub(crate) keys: Option<(String, String, Option<String>)>,
    pub(crate) region: Option<String>,
}

fn home_file(var: &str, default: &str) -> Option<PathBuf> {
    match std::env::var_os(var) {
        Some(p) => Some(PathBuf::from(p)),
        None => std::env::var_os("HOME").map(|h| PathBuf::from(h).join(default)),
    }
}

fn load(path: &std::path::Path, remote: &str) -> Result<Option<ini::Ini>, RemoteError> {
    match ini::Ini::load_from_file(path) {
        Ok(i) => Ok(Some(i)),
        Err(ini::Error::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(RemoteError::Credentials {
            remote: remote.to_owned(),
            path: path.to_owned(),
            source: Box::new(e),
        }),
    }
}

/// Reads the profile `AWS_PROFILE` (or `default`) from the shared files, if they exist.
pub(crate) fn from_files(remote: &str) -> Result<FromFiles, RemoteError> {
    let profile = std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".to_owned());
    let mut out = FromFiles::default();
    let credentials = match home_file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials") {
        Some(path) => load(&path, remote)?,
        None => None,
    };
    if let Some(section) = credentials
        .as_ref()
        .and_then(|f| f.section(Some(profile.as_str())))
        && let (Some(k), Some(s)) = (
            section.get("aws_access_key_id"),
            section.get("aws_secret_access_key"),
        )
    {
        let token = section.get("aws_session_token").map(str::to_owned);
        out.keys = Some((k.to_owned(), s.to_owned(), token));
    }
    let config = match home_file("AWS_CONFIG_FILE", ".aws/config") {
        Some(path) => load(&path, remote)?,
        None => None,
    };
    let section = if profile == "default" {
        profile.clone()
    } else {
        format!("profile {profile}")
    };
    out.region = config
        .as_ref()
        .and_then(|f| f.section(Some(section.as_str())))
        .and_then(|s| s.get("region"))
        .map(str::to_owned);
    Ok(out)
}
