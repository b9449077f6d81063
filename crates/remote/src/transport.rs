//! A connection to a remote's object store: S3 (any engine, through `object_store`) or a
//! folder, with bounded retries and timeouts, every failure naming the remote.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::TryStreamExt;
use object_store::path::Path;
use object_store::{
    BackoffConfig, ClientOptions, GetOptions, ObjectMeta, ObjectStore, ObjectStoreExt, PutMode,
    PutOptions, PutPayload, PutResult, RetryConfig,
};

use crate::config::RemoteConfig;
use crate::error::RemoteError;
use crate::layout::MAX_PACK;
use crate::url::RemoteUrl;

/// An open remote.
pub struct Remote {
    config: RemoteConfig,
    store: Arc<dyn ObjectStore>,
    /// The folder of a `file://` remote.
    folder: Option<std::path::PathBuf>,
    root: Vec<String>,
    runtime: tokio::runtime::Runtime,
}

/// Every file under `dir` (following links, as object_store does) whose key sorts after
/// `after` (all if `None`): its path relative to `dir` where that can be a key, else apart,
/// as a message naming it. A staging file of a write under way (`NAME#DIGITS`) is neither.
/// No folder: nothing. What sorts before `after` is not even looked at (no `stat`), nor a
/// folder of such names entered, so a listing from a mark costs a read of the names in
/// the folders it enters; and how many names those were.
fn walk_folder(
    dir: &std::path::Path,
    after: Option<&str>,
) -> std::io::Result<(Vec<String>, Vec<String>, usize)> {
    let mut keys = Vec::new();
    let mut unreadable = Vec::new();
    let mut looked_at = 0;
    let mut stack = vec![(dir.to_owned(), String::new())];
    while let Some((at, prefix)) = stack.pop() {
        let entries = match std::fs::read_dir(&at) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && prefix.is_empty() => break,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            looked_at += 1;
            let file_name = entry.file_name();
            // A key before `after` whose folder's keys cannot come after it either (its
            // name is no beginning of `after`).
            if let (Some(after), Some(part)) = (after, file_name.to_str()) {
                let key = format!("{prefix}{part}");
                if key.as_str() <= after && !after.starts_with(&key) {
                    continue;
                }
            }
            let Ok(meta) = std::fs::metadata(entry.path()) else {
                // A dangling link: object_store skips it too.
                continue;
            };
            let Some(part) = file_name.to_str().filter(|p| Path::parse(p).is_ok()) else {
                unreadable.push(format!("{:?} is a name no key can have", entry.path()));
                continue;
            };
            let key = format!("{prefix}{part}");
            if meta.is_dir() {
                stack.push((entry.path(), format!("{key}/")));
            } else if !part
                .split_once('#')
                .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            {
                keys.push(key);
            }
        }
    }
    keys.sort();
    Ok((keys, unreadable, looked_at))
}

/// The tracing target every request to a remote is logged under, at debug level.
pub const REQUESTS: &str = "cairn::remote::request";

/// Network buffers a [`RangeReader`] holds ahead of its reader.
const RANGE_BUFFERS: usize = 8;

/// A byte range of an object, read as it arrives (see [`Remote::read_range`]); its errors
/// are [`RemoteError`]s inside the `io::Error`.
pub(crate) struct RangeReader {
    rx: tokio::sync::mpsc::Receiver<Result<Bytes, RemoteError>>,
    current: Bytes,
}

impl std::io::Read for RangeReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(Ok(bytes)) => self.current = bytes,
                Some(Err(e)) => return Err(std::io::Error::other(e)),
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}

/// Requests are retried this often, within this long, before the error is the caller's.
const RETRIES: usize = 3;
const RETRY_WITHIN: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

impl Remote {
    /// Connects to the remote `config` describes (nothing is sent yet). Credentials come
    /// from the AWS environment variables, else the shared credentials file
    /// (`AWS_SHARED_CREDENTIALS_FILE`, default `~/.aws/credentials`, profile
    /// `AWS_PROFILE` or `default`); the region from `--region`, `AWS_REGION`, the shared
    /// config file, else `us-east-1`.
    pub fn connect(config: &RemoteConfig) -> Result<Remote, RemoteError> {
        let name = &config.name;
        let location = config.location()?;
        let folder = match &location {
            RemoteUrl::File { path } => Some(path.clone().into_std_path_buf()),
            RemoteUrl::S3 { .. } => None,
        };
        let (store, root): (Arc<dyn ObjectStore>, String) = match location {
            RemoteUrl::File { path } => {
                let local = object_store::local::LocalFileSystem::new_with_prefix(&path).map_err(
                    |source| RemoteError::Transport {
                        remote: name.clone(),
                        source: Box::new(source),
                    },
                )?;
                (Arc::new(local), String::new())
            }
            RemoteUrl::S3 { bucket, prefix } => {
                let mut builder = object_store::aws::AmazonS3Builder::from_env()
                    .with_bucket_name(&bucket)
                    .with_retry(RetryConfig {
                        backoff: BackoffConfig::default(),
                        max_retries: RETRIES,
                        retry_timeout: RETRY_WITHIN,
                    })
                    .with_client_options(
                        ClientOptions::new()
                            .with_connect_timeout(CONNECT_TIMEOUT)
                            .with_timeout(REQUEST_TIMEOUT)
                            .with_allow_http(
                                config
                                    .endpoint
                                    .as_deref()
                                    .is_some_and(|e| e.starts_with("http://")),
                            ),
                    );
                if let Some(endpoint) = &config.endpoint {
                    builder = builder
                        .with_endpoint(endpoint)
                        .with_virtual_hosted_style_request(false);
                }
                let files = crate::credentials::from_files(name)?;
                if std::env::var_os("AWS_ACCESS_KEY_ID").is_none()
                    && let Some((key, secret, token)) = files.keys
                {
                    {
                        builder = builder
                            .with_access_key_id(key)
                            .with_secret_access_key(secret);
                        if let Some(token) = token {
                            builder = builder.with_token(token);
                        }
                    }
                }
                let region = config
                    .region
                    .clone()
                    .or_else(|| std::env::var("AWS_REGION").ok())
                    .or_else(|| std::env::var("AWS_DEFAULT_REGION").ok())
                    .or(files.region)
                    .unwrap_or_else(|| "us-east-1".to_owned());
                let s3 = builder.with_region(region).build().map_err(|source| {
                    RemoteError::Transport {
                        remote: name.clone(),
                        source: Box::new(source),
                    }
                })?;
                (Arc::new(s3), prefix)
            }
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("cairn-remote")
            .enable_all()
            .build()
            .map_err(|e| RemoteError::Transport {
                remote: name.clone(),
                source: Box::new(object_store::Error::Generic {
                    store: "runtime",
                    source: Box::new(e),
                }),
            })?;
        Ok(Remote {
            config: config.clone(),
            store,
            folder,
            root: root
                .split('/')
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect(),
            runtime,
        })
    }

    /// Its name in this store.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Its configuration.
    pub fn config(&self) -> &RemoteConfig {
        &self.config
    }

    /// Runs `f` to completion on the remote's runtime, from any thread (a server's
    /// blocking threads included).
    pub(crate) fn block_on<F>(&self, f: F) -> F::Output
    where
        F: Future + Send,
        F::Output: Send,
    {
        std::thread::scope(|s| {
            s.spawn(|| self.runtime.block_on(f))
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }

    /// The full key of `rel` (a path under the remote's prefix, `/`-separated).
    pub(crate) fn path(&self, rel: &str) -> Path {
        Path::from_iter(
            self.root
                .iter()
                .map(String::as_str)
                .chain(rel.split('/').filter(|p| !p.is_empty())),
        )
    }

    pub(crate) fn fail(&self, source: object_store::Error) -> RemoteError {
        RemoteError::Transport {
            remote: self.config.name.clone(),
            source: Box::new(source),
        }
    }

    /// The object at `rel`, or `None` if there is none; refused unread if it is larger
    /// than `most` bytes, so a hostile remote cannot make a read hold unbounded memory.
    pub(crate) async fn get(&self, rel: &str, most: u64) -> Result<Option<Bytes>, RemoteError> {
        tracing::debug!(target: REQUESTS, op = "GET", key = rel, "remote {}: GET {rel}", self.name());
        let got = match self.store.get(&self.path(rel)).await {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(self.fail(e)),
        };
        self.within(rel, got.meta.size, most)?;
        let bytes = got.bytes().await.map_err(|e| self.fail(e))?;
        self.within(rel, bytes.len() as u64, most)?;
        Ok(Some(bytes))
    }

    /// Whether an object is at `rel`, without reading it.
    pub(crate) async fn exists(&self, rel: &str) -> Result<bool, RemoteError> {
        tracing::debug!(target: REQUESTS, op = "HEAD", key = rel, "remote {}: HEAD {rel}", self.name());
        match self.store.head(&self.path(rel)).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(self.fail(e)),
        }
    }

    fn within(&self, rel: &str, size: u64, most: u64) -> Result<(), RemoteError> {
        if size > most {
            return Err(RemoteError::corrupt(
                self.name(),
                rel,
                format!("{size} bytes, more than the {most} such an object can hold"),
            ));
        }
        Ok(())
    }

    /// Writes `bytes` at `rel` in `mode`; the store's own error, so a caller can tell a
    /// failed condition from a failure.
    pub(crate) async fn put(
        &self,
        rel: &str,
        bytes: Bytes,
        mode: PutMode,
    ) -> Result<PutResult, object_store::Error> {
        tracing::debug!(target: REQUESTS, op = "PUT", key = rel, "remote {}: PUT {rel}", self.name());
        let opts = PutOptions {
            mode,
            ..PutOptions::default()
        };
        self.store
            .put_opts(&self.path(rel), PutPayload::from_bytes(bytes), opts)
            .await
    }

    /// Every object under directory `rel`, with its key relative to `rel`.
    pub(crate) async fn list(&self, rel: &str) -> Result<Vec<(String, ObjectMeta)>, RemoteError> {
        tracing::debug!(target: REQUESTS, op = "LIST", prefix = rel, "remote {}: LIST {rel}/", self.name());
        let dir = self.path(rel);
        let metas: Vec<ObjectMeta> = self
            .store
            .list(Some(&dir))
            .try_collect()
            .await
            .map_err(|e| self.fail(e))?;
        let skip = dir.parts().count();
        Ok(metas
            .into_iter()
            .map(|m| {
                let name = m
                    .location
                    .parts()
                    .skip(skip)
                    .map(|p| p.as_ref().to_owned())
                    .collect::<Vec<_>>()
                    .join("/");
                (name, m)
            })
            .collect())
    }

    /// The keys under directory `rel` that sort after `after` (relative to `rel`; all of
    /// them if `None`), relative to it, and apart, each named, what is there but cannot be
    /// a key: a file a folder remote holds under a name no key can have (object_store's
    /// listing of a folder would end at the first such file). On S3 the listing starts
    /// there (`StartAfter`), so what sorts before it costs no request; on a folder, the
    /// log says how many names the walk read (`read`).
    pub(crate) async fn list_names_after(
        &self,
        rel: &str,
        after: Option<&str>,
    ) -> Result<(Vec<String>, Vec<String>), RemoteError> {
        let (keys, unreadable, read) = self.list_names_from(rel, after).await?;
        tracing::debug!(
            target: REQUESTS,
            op = "LIST",
            prefix = rel,
            after = after.unwrap_or(""),
            keys = keys.len(),
            read = ?read,
            "remote {}: LIST {rel}/ after {:?}: {} keys",
            self.name(),
            after.unwrap_or(""),
            keys.len()
        );
        Ok((keys, unreadable))
    }

    /// [`Remote::list_names_after`]'s listing, and on a folder the names its walk read.
    async fn list_names_from(
        &self,
        rel: &str,
        after: Option<&str>,
    ) -> Result<(Vec<String>, Vec<String>, Option<usize>), RemoteError> {
        let Some(folder) = &self.folder else {
            let dir = self.path(rel);
            let metas: Vec<ObjectMeta> = match after {
                Some(after) => {
                    let offset = self.path(&format!("{rel}/{after}"));
                    self.store
                        .list_with_offset(Some(&dir), &offset)
                        .try_collect()
                        .await
                }
                None => self.store.list(Some(&dir)).try_collect().await,
            }
            .map_err(|e| self.fail(e))?;
            let skip = dir.parts().count();
            let names = metas
                .into_iter()
                .map(|m| {
                    m.location
                        .parts()
                        .skip(skip)
                        .map(|p| p.as_ref().to_owned())
                        .collect::<Vec<_>>()
                        .join("/")
                })
                .collect();
            return Ok((names, Vec::new(), None));
        };
        let dir = folder.join(rel);
        let name = self.name().to_owned();
        let after_owned = after.map(str::to_owned);
        let walked = tokio::task::spawn_blocking(move || walk_folder(&dir, after_owned.as_deref()))
            .await
            .map_err(|e| RemoteError::Transport {
                remote: name.clone(),
                source: Box::new(object_store::Error::Generic {
                    store: "folder",
                    source: Box::new(e),
                }),
            })?;
        let (mut keys, unreadable, read) = walked.map_err(|e| RemoteError::Transport {
            remote: name,
            source: Box::new(object_store::Error::Generic {
                store: "folder",
                source: Box::new(e),
            }),
        })?;
        if let Some(after) = after {
            keys.retain(|k| k.as_str() > after);
        }
        Ok((keys, unreadable, Some(read)))
    }

    /// Deletes `rel` (absent already is fine).
    pub(crate) async fn delete(&self, rel: &str) -> Result<(), RemoteError> {
        tracing::debug!(target: REQUESTS, op = "DELETE", key = rel, "remote {}: DELETE {rel}", self.name());
        match self.store.delete(&self.path(rel)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Byte ranges of `rel`, read together (near ranges in one request), or cut from the
    /// whole object where the engine does not serve ranges.
    pub(crate) async fn get_ranges(
        &self,
        rel: &str,
        ranges: &[std::ops::Range<u64>],
    ) -> Result<Vec<Bytes>, RemoteError> {
        if self.config.ranged_reads {
            // As object_store's own `get_ranges` does (near ranges merged, a few requests
            // at once), each request logged.
            let path = self.path(rel);
            return object_store::coalesce_ranges(
                ranges,
                |range| {
                    tracing::debug!(
                        target: REQUESTS,
                        op = "GET",
                        key = rel,
                        start = range.start,
                        end = range.end,
                        "remote {}: GET {rel} {}..{}",
                        self.name(),
                        range.start,
                        range.end
                    );
                    self.store.get_range(&path, range)
                },
                object_store::OBJECT_STORE_COALESCE_DEFAULT,
            )
            .await
            .map_err(|e| self.fail(e));
        }
        let whole = self.get(rel, MAX_PACK).await?.ok_or_else(|| {
            self.fail(object_store::Error::NotFound {
                path: rel.to_owned(),
                source: "gone between its listing and the read".into(),
            })
        })?;
        ranges
            .iter()
            .map(|r| {
                let (start, end) = (r.start as usize, r.end as usize);
                if start <= end && end <= whole.len() {
                    Ok(whole.slice(start..end))
                } else {
                    Err(RemoteError::corrupt(
                        self.name(),
                        rel,
                        format!("{} bytes, a read wants {start}..{end}", whole.len()),
                    ))
                }
            })
            .collect()
    }

    /// Bytes `range` of `rel` as a reader holding a few network buffers at a time, however
    /// long the range: from a request for the range, or where the engine does not serve
    /// ranges, from the whole object with what comes before the range skipped.
    pub(crate) fn read_range(&self, rel: &str, range: std::ops::Range<u64>) -> RangeReader {
        tracing::debug!(
            target: REQUESTS,
            op = "GET",
            key = rel,
            start = range.start,
            end = range.end,
            "remote {}: GET {rel} {}..{}",
            self.name(),
            range.start,
            range.end
        );
        let (tx, rx) = tokio::sync::mpsc::channel(RANGE_BUFFERS);
        let store = Arc::clone(&self.store);
        let path = self.path(rel);
        let ranged = self.config.ranged_reads;
        let remote = self.name().to_owned();
        let what = rel.to_owned();
        self.runtime.spawn(async move {
            let fail = |source| RemoteError::Read {
                remote: remote.clone(),
                what: what.clone(),
                source: Box::new(source),
            };
            let options = GetOptions {
                range: ranged.then(|| range.clone().into()),
                ..GetOptions::default()
            };
            let mut stream = match store.get_opts(&path, options).await {
                Ok(got) => got.into_stream(),
                Err(e) => {
                    let _ = tx.send(Err(fail(e))).await;
                    return;
                }
            };
            let mut skip = if ranged { 0 } else { range.start };
            let mut left = range.end.saturating_sub(range.start);
            while left > 0 {
                let mut bytes = match stream.try_next().await {
                    Ok(Some(bytes)) => bytes,
                    Ok(None) => {
                        let short = RemoteError::corrupt(
                            &remote,
                            &what,
                            format!(
                                "it ends {left} bytes short of {}..{}",
                                range.start, range.end
                            ),
                        );
                        let _ = tx.send(Err(short)).await;
                        return;
                    }
                    Err(e) => {
                        let _ = tx.send(Err(fail(e))).await;
                        return;
                    }
                };
                let skipped = skip.min(bytes.len() as u64);
                skip -= skipped;
                let bytes = bytes.split_off(skipped as usize);
                let bytes = bytes.slice(..(left.min(bytes.len() as u64) as usize));
                left -= bytes.len() as u64;
                if !bytes.is_empty() && tx.send(Ok(bytes)).await.is_err() {
                    // The reader stopped reading.
                    return;
                }
            }
        });
        RangeReader {
            rx,
            current: Bytes::new(),
        }
    }

    /// Reads bytes 2..5 of `rel`, which holds at least 5: whether the engine serves ranges.
    pub(crate) async fn serves_ranges(&self, rel: &str) -> Result<bool, RemoteError> {
        match self.store.get_range(&self.path(rel), 2..5).await {
            Ok(b) => Ok(b.len() == 3),
            // The answer was the whole object, or not the range asked for.
            Err(object_store::Error::Generic { .. }) => Ok(false),
            Err(e) => Err(self.fail(e)),
        }
    }
}
