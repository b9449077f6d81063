//! How a store is opened.

use std::time::Duration;

use camino::Utf8Path;

/// How to open a store.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// Create the folder and database if missing.
    pub create: bool,
    /// How long to wait while another process holds the store.
    pub lock_timeout: Duration,
    /// Memory redb may use for its page cache.
    pub cache_bytes: usize,
    /// Called once if the store is busy and we start waiting for it.
    pub on_wait: Option<fn(&Utf8Path)>,
    /// Open without the right to write: nothing in the file changes, and other read-only
    /// openers may hold the store at the same time. Writes then fail with
    /// [`WriteError::ReadOnly`](crate::WriteError::ReadOnly).
    pub read_only: bool,
    /// Where the layers above keep the records a format 1 store held in tables of its own,
    /// as each owner declares it: a format 1 store is upgraded with these, and one holding a
    /// table none of them claims is refused ([`OpenError::Format1Unclaimed`]). An opener of
    /// stores that may be that old passes every owner's.
    ///
    /// [`OpenError::Format1Unclaimed`]: crate::OpenError::Format1Unclaimed
    pub format_1_tables: Vec<crate::Format1Table>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            create: false,
            lock_timeout: Duration::from_secs(60),
            cache_bytes: 64 << 20,
            on_wait: None,
            read_only: false,
            format_1_tables: Vec::new(),
        }
    }
}

/// The environment variable holding the lock timeout, in seconds.
pub const LOCK_TIMEOUT_VAR: &str = "CAIRN_LOCK_TIMEOUT";

/// `CAIRN_LOCK_TIMEOUT` is set to something that is not a number of seconds a
/// [`Duration`] can hold (negative, NaN, infinite, too large, not a number).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{LOCK_TIMEOUT_VAR}={value:?}: not a number of seconds (0 or more)")]
pub struct InvalidLockTimeout {
    /// The value as set (lossily decoded if it is not UTF-8).
    pub value: String,
}

impl OpenOptions {
    /// Defaults, with `lock_timeout` taken from `CAIRN_LOCK_TIMEOUT` (seconds) when set and
    /// valid; an invalid value is ignored (see [`OpenOptions::try_from_env`] to refuse it).
    pub fn from_env() -> OpenOptions {
        OpenOptions::try_from_env().unwrap_or_default()
    }

    /// Defaults, with `lock_timeout` taken from `CAIRN_LOCK_TIMEOUT` (seconds) when set and
    /// not empty; any other value is refused, naming it.
    pub fn try_from_env() -> Result<OpenOptions, InvalidLockTimeout> {
        let mut opts = OpenOptions::default();
        let Some(raw) = std::env::var_os(LOCK_TIMEOUT_VAR) else {
            return Ok(opts);
        };
        let value = raw.to_string_lossy();
        if value.trim().is_empty() {
            return Ok(opts);
        }
        let invalid = || InvalidLockTimeout {
            value: value.clone().into_owned(),
        };
        let secs = raw
            .to_str()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .ok_or_else(invalid)?;
        // `try_from_secs_f64` refuses NaN, negatives and what overflows a Duration.
        opts.lock_timeout = Duration::try_from_secs_f64(secs).map_err(|_| invalid())?;
        Ok(opts)
    }
}
