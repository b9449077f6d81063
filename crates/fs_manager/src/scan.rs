//! Walking a worktree's scope and hashing what changed.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fs::Metadata;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use camino::Utf8Path;
use cas::{BlobId, EntryKind, PreparedBlob, Store, WriteBatch};
use rayon::prelude::*;

use crate::error::ScanError;
use crate::progress::Progress;
use crate::state::{FileState, now_ns};

/// Files larger than this are streamed into the store chunk by chunk.
const STREAM_BYTES: u64 = 16 << 20;
/// Raw bytes hashed per group before the group's blobs are written.
const GROUP_BYTES: u64 = 64 << 20;

/// A path left out of a snapshot, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Path from the worktree root, raw bytes.
    pub path: Vec<u8>,
    /// Why it was left out.
    pub reason: String,
}

/// One file or symlink in scope, found by the walk.
pub(crate) struct Walked {
    pub path: Vec<u8>,
    pub abs: PathBuf,
    pub meta: Metadata,
    pub kind: EntryKind,
}

/// A file in the captured state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRecord {
    /// Path from the worktree root.
    pub path: Vec<u8>,
    /// File, executable or symlink.
    pub kind: EntryKind,
    /// Its content.
    pub blob: BlobId,
    /// Bytes.
    pub size: u64,
}

/// Orders paths as trees list them: component by component, by name bytes.
pub(crate) fn tree_order(a: &[u8], b: &[u8]) -> Ordering {
    let key = |c: &u8| if *c == b'/' { 0 } else { *c };
    a.iter().map(key).cmp(b.iter().map(key))
}

pub(crate) struct WalkOptions<'a> {
    /// 1 walks sequentially; 0 picks a thread count.
    pub threads: usize,
    /// The store's folder, never part of any scope.
    pub store_root: Option<&'a Path>,
}

fn kind_of(meta: &Metadata) -> Option<EntryKind> {
    let ft = meta.file_type();
    if ft.is_symlink() {
        Some(EntryKind::Symlink)
    } else if ft.is_file() {
        Some(if meta.mode() & 0o100 != 0 {
            EntryKind::Executable
        } else {
            EntryKind::File
        })
    } else {
        None
    }
}

fn special_name(meta: &Metadata) -> &'static str {
    let ft = meta.file_type();
    if ft.is_fifo() {
        "fifo"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_block_device() {
        "block device"
    } else if ft.is_char_device() {
        "character device"
    } else {
        "special file"
    }
}

enum Found {
    File(Walked),
    Skip(Skipped),
    Fail(ScanError),
}

/// Walks the scope of `root`: `.gitignore` and `.ignore` files inside it (git repo or not),
/// `.git/info/exclude`, the global excludes file; never ignore files above the root,
/// never `.git`, never the store's folder. Hidden files are included.
pub(crate) fn walk(
    root: &Utf8Path,
    options: &WalkOptions<'_>,
) -> Result<(Vec<Walked>, Vec<Skipped>), ScanError> {
    let mut builder = ignore::WalkBuilder::new(root);
    builder
        .hidden(false)
        .parents(false)
        .ignore(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(true)
        .require_git(false)
        .follow_links(false)
        .threads(options.threads);
    let store_root = options.store_root.map(Path::to_path_buf);
    let refused = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let refused_names = refused.clone();
    let filter_root = root.as_std_path().to_path_buf();
    builder.filter_entry(move |e| {
        if e.file_name() == ".git" || store_root.as_deref().is_some_and(|s| e.path() == s) {
            return false;
        }
        if e.depth() > 0
            && let Err(err) = cas::validate_name(e.file_name().as_bytes())
        {
            let reason = match err {
                cas::ObjectError::InvalidName { reason, .. } => format!("invalid name: {reason}"),
                other => other.to_string(),
            };
            let rel = e
                .path()
                .strip_prefix(&filter_root)
                .map(|r| r.as_os_str().as_bytes().to_vec());
            if let (Ok(path), Ok(mut list)) = (rel, refused_names.lock()) {
                list.push(Skipped { path, reason });
            }
            return false;
        }
        true
    });
    let root_path = root.as_std_path().to_path_buf();
    let classify = move |result: Result<ignore::DirEntry, ignore::Error>| -> Option<Found> {
        let entry = match result {
            Ok(e) => e,
            Err(e) => return walk_error(&root_path, e),
        };
        if entry.depth() == 0 || entry.file_type().is_some_and(|t| t.is_dir()) {
            return None;
        }
        let rel = entry
            .path()
            .strip_prefix(&root_path)
            .ok()?
            .as_os_str()
            .as_bytes()
            .to_vec();
        let meta = match entry.path().symlink_metadata() {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(source) => {
                return Some(Found::Fail(ScanError::Io {
                    path: entry.path().to_owned(),
                    source,
                }));
            }
        };
        match kind_of(&meta) {
            Some(kind) => Some(Found::File(Walked {
                path: rel,
                abs: entry.into_path(),
                meta,
                kind,
            })),
            None if meta.is_dir() => None,
            None => {
                let reason = format!("{} (not a file, directory or symlink)", special_name(&meta));
                Some(Found::Skip(Skipped { path: rel, reason }))
            }
        }
    };

    let started = std::time::Instant::now();
    let mut found = Vec::new();
    if options.threads == 1 {
        found.extend(builder.build().filter_map(classify));
    } else {
        let (tx, rx) = std::sync::mpsc::channel();
        builder.build_parallel().run(|| {
            let tx = tx.clone();
            let classify = classify.clone();
            Box::new(move |result| {
                if let Some(f) = classify(result) {
                    let _ = tx.send(f);
                }
                ignore::WalkState::Continue
            })
        });
        drop(tx);
        found.extend(rx);
    }

    let mut files = Vec::with_capacity(found.len());
    let mut skipped = refused
        .lock()
        .map(|mut l| std::mem::take(&mut *l))
        .unwrap_or_default();
    for f in found {
        match f {
            Found::File(w) => files.push(w),
            Found::Skip(s) => skipped.push(s),
            Found::Fail(e) => return Err(e),
        }
    }
    tracing::debug!(elapsed = ?started.elapsed(), "walk done");
    files.sort_by(|a, b| tree_order(&a.path, &b.path));
    tracing::debug!(elapsed = ?started.elapsed(), "sorted");
    skipped.sort_by(|a, b| tree_order(&a.path, &b.path));
    Ok((files, skipped))
}

fn walk_error(root: &Path, e: ignore::Error) -> Option<Found> {
    // A malformed pattern in an ignore file is reported by `ignore` as a partial error;
    // git ignores such lines too, so only log it.
    if let Some(io) = e.io_error() {
        if io.kind() == std::io::ErrorKind::NotFound {
            return None;
        }
        let path = error_path(&e).unwrap_or_else(|| root.to_path_buf());
        let source = std::io::Error::new(io.kind(), io.to_string());
        return Some(Found::Fail(ScanError::Io { path, source }));
    }
    tracing::warn!("while walking {}: {e}", root.display());
    None
}

fn error_path(e: &ignore::Error) -> Option<PathBuf> {
    match e {
        ignore::Error::WithPath { path, .. } => Some(path.clone()),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            error_path(err)
        }
        _ => None,
    }
}

/// The outcome of hashing a walk against the stat cache.
pub(crate) struct Hashed {
    pub files: Vec<FileRecord>,
    /// Cache entries to set (`Some`) or drop (`None`).
    pub state_updates: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// Files whose content was read.
    pub read_files: u64,
    /// Bytes over all files in scope.
    pub bytes: u64,
}

struct Content {
    blob: BlobId,
    kind: EntryKind,
    size: u64,
    /// The stat to cache, if the content is known to match it.
    state: Option<FileState>,
}

/// Reads, hashes and (unless `dry_run`) stores every walked file the cache cannot vouch
/// for. Files that vanish meanwhile are left out; files that change while read are re-read
/// and, if they never hold still, captured as read but not cached.
pub(crate) fn hash_walk(
    store: &Store,
    walked: Vec<Walked>,
    cache: &HashMap<Vec<u8>, FileState>,
    dry_run: bool,
    progress: &dyn Progress,
) -> Result<Hashed, ScanError> {
    let total: u64 = walked.iter().map(|w| w.meta.size()).sum();
    progress.start("hashing", walked.len() as u64, total);
    let mut results: Vec<Option<Content>> = Vec::with_capacity(walked.len());
    let mut misses = Vec::new();
    for (i, w) in walked.iter().enumerate() {
        let hit = cache
            .get(&w.path)
            .filter(|s| s.matches(&w.meta) && !s.is_racy());
        match hit {
            Some(state) => {
                results.push(Some(Content {
                    blob: state.blob,
                    kind: w.kind,
                    size: w.meta.size(),
                    state: Some(*state),
                }));
                progress.advance(1, w.meta.size());
            }
            None => {
                results.push(None);
                misses.push(i);
            }
        }
    }
    let read_files = misses.len() as u64;

    let (large, small): (Vec<usize>, Vec<usize>) = misses.into_iter().partition(|&i| {
        walked[i].kind != EntryKind::Symlink && walked[i].meta.size() > STREAM_BYTES
    });
    let mut group = Vec::new();
    let mut group_bytes = 0u64;
    let mut groups = Vec::new();
    for i in small {
        group_bytes += walked[i].meta.size();
        group.push(i);
        if group_bytes >= GROUP_BYTES {
            groups.push(std::mem::take(&mut group));
            group_bytes = 0;
        }
    }
    if !group.is_empty() {
        groups.push(group);
    }
    for group in groups {
        let read: Vec<(usize, Result<SmallRead, ScanError>)> = group
            .par_iter()
            .map_init(
                || store.reader().ok(),
                |reader, &i| {
                    let w = &walked[i];
                    let r = read_small(w, dry_run, |id| {
                        reader
                            .as_ref()
                            .is_some_and(|r| r.has_blob(id).unwrap_or(false))
                    });
                    progress.advance(1, w.meta.size());
                    (i, r)
                },
            )
            .collect();
        let mut batch = WriteBatch::new();
        for (i, r) in read {
            if let Some((content, prepared)) = r? {
                if let Some(p) = prepared {
                    batch.add_blob(p);
                }
                results[i] = Some(content);
            }
        }
        if !dry_run && !batch.is_empty() {
            store
                .write(&batch)
                .map_err(|e| ScanError::Store(e.into()))?;
        }
    }
    for i in large {
        let w = &walked[i];
        if let Some(content) = read_large(store, w, dry_run)? {
            results[i] = Some(content);
        }
        progress.advance(1, w.meta.size());
    }

    let mut files = Vec::with_capacity(walked.len());
    let mut state_updates = Vec::new();
    let mut bytes = 0;
    let mut seen = std::collections::HashSet::with_capacity(walked.len());
    for (w, r) in walked.into_iter().zip(results) {
        let Some(c) = r else { continue };
        bytes += c.size;
        let new_state = c.state.map(|s| s.encode());
        let old_state = cache.get(&w.path).map(FileState::encode);
        if new_state != old_state {
            state_updates.push((w.path.clone(), new_state));
        }
        seen.insert(w.path.clone());
        files.push(FileRecord {
            path: w.path,
            kind: c.kind,
            blob: c.blob,
            size: c.size,
        });
    }
    for path in cache.keys() {
        if !seen.contains(path) {
            state_updates.push((path.clone(), None));
        }
    }
    progress.finish();
    Ok(Hashed {
        files,
        state_updates,
        read_files,
        bytes,
    })
}

fn same_stat(a: &Metadata, b: &Metadata) -> bool {
    a.size() == b.size()
        && a.mtime() == b.mtime()
        && a.mtime_nsec() == b.mtime_nsec()
        && a.ctime() == b.ctime()
        && a.ctime_nsec() == b.ctime_nsec()
        && a.ino() == b.ino()
}

fn open_nofollow(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
}

type SmallRead = Option<(Content, Option<PreparedBlob>)>;

fn read_small(
    w: &Walked,
    dry_run: bool,
    is_stored: impl FnOnce(BlobId) -> bool,
) -> Result<SmallRead, ScanError> {
    let io = |source| ScanError::Io {
        path: w.abs.clone(),
        source,
    };
    if w.kind == EntryKind::Symlink {
        let target = match std::fs::read_link(&w.abs) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => return Ok(None),
            Err(e) => return Err(io(e)),
        };
        // Trust the walk's stat only if the link did not change around the read.
        let after = w.abs.symlink_metadata().ok();
        let verified = now_ns();
        let bytes = target.as_os_str().as_bytes();
        let (blob, prepared) = prepare(bytes, dry_run, is_stored);
        let state = after
            .filter(|a| same_stat(&w.meta, a))
            .map(|a| FileState::from_metadata(&a, blob, verified));
        let content = Content {
            blob,
            kind: EntryKind::Symlink,
            size: bytes.len() as u64,
            state,
        };
        return Ok(Some((content, prepared)));
    }
    let mut buf = Vec::new();
    let mut attempts = 0;
    let (meta, stable) = loop {
        attempts += 1;
        let mut file = match open_nofollow(&w.abs) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            // Replaced by a symlink since the walk: it is captured next time.
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                return Ok(None);
            }
            Err(e) => return Err(io(e)),
        };
        let before = file.metadata().map_err(io)?;
        if !before.is_file() {
            return Ok(None);
        }
        buf.clear();
        file.read_to_end(&mut buf).map_err(io)?;
        let after = file.metadata().map_err(io)?;
        let verified = now_ns();
        if same_stat(&before, &after) && after.size() == buf.len() as u64 {
            break (after, Some(verified));
        }
        if attempts == 3 {
            break (after, None);
        }
    };
    let kind = if meta.mode() & 0o100 != 0 {
        EntryKind::Executable
    } else {
        EntryKind::File
    };
    let (blob, prepared) = prepare(&buf, dry_run, is_stored);
    let state = stable.map(|verified| FileState::from_metadata(&meta, blob, verified));
    Ok(Some((
        Content {
            blob,
            kind,
            size: buf.len() as u64,
            state,
        },
        prepared,
    )))
}

fn prepare(
    content: &[u8],
    dry_run: bool,
    is_stored: impl FnOnce(BlobId) -> bool,
) -> (BlobId, Option<PreparedBlob>) {
    if dry_run {
        (BlobId::of(content), None)
    } else {
        PreparedBlob::new_unless(content, is_stored)
    }
}

fn read_large(store: &Store, w: &Walked, dry_run: bool) -> Result<Option<Content>, ScanError> {
    let io = |source| ScanError::Io {
        path: w.abs.clone(),
        source,
    };
    let file = match open_nofollow(&w.abs) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let before = file.metadata().map_err(io)?;
    let mut counted = Counted {
        inner: &file,
        bytes: 0,
    };
    let blob = if dry_run {
        let mut hasher = blake3::Hasher::new();
        hasher.update_reader(&mut counted).map_err(io)?;
        BlobId::from_bytes(*hasher.finalize().as_bytes())
    } else {
        store
            .put_blob_stream(&mut counted, &w.abs.display().to_string())
            .map_err(|e| ScanError::Store(e.into()))?
    };
    let size = counted.bytes;
    let after = file.metadata().map_err(io)?;
    let verified = now_ns();
    let kind = if after.mode() & 0o100 != 0 {
        EntryKind::Executable
    } else {
        EntryKind::File
    };
    let stable = same_stat(&before, &after) && after.size() == size;
    let state = stable.then(|| FileState::from_metadata(&after, blob, verified));
    Ok(Some(Content {
        blob,
        kind,
        size,
        state,
    }))
}

/// Counts the bytes read through it.
struct Counted<R> {
    inner: R,
    bytes: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
}
