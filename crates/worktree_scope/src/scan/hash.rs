//! Hashing what the walk found changed: reading files (small ones whole, large ones
//! streamed), checking they did not change while read.

use super::*;

pub(super) struct Content {
    pub(super) blob: BlobId,
    pub(super) kind: EntryKind,
    pub(super) size: u64,
    /// The stat to cache, if the content is known to match it.
    pub(super) state: Option<FileState>,
}

pub(super) struct Hashed {
    pub(super) read_files: u64,
    /// New blobs read but not stored yet.
    pub(super) unstored: WriteBatch,
}

/// Reads and hashes every file the cache cannot vouch for; unless `dry_run`, stores the
/// new blobs. One group of them is returned unstored, for the capture's own transaction;
/// several are each stored as read. Walked files are let go group by group, as their
/// directories' states take them over.
pub(super) fn hash_walked(
    store: &Store,
    root: &Path,
    mut walked: Vec<Walked>,
    dry_run: bool,
    group_bytes: u64,
    progress: &dyn Progress,
    found: &mut dyn FnMut(&Walked, Option<Content>),
) -> Result<Hashed, ScanError> {
    let total: u64 = walked.iter().map(|w| w.stat.size).sum();
    progress.start("hashing", walked.len() as u64, total);
    walked.retain(|w| {
        if let Some(state) = (w.cached.as_deref()).filter(|s| s.matches(&w.stat) && !s.is_racy()) {
            let content = Content {
                blob: state.blob,
                kind: w.kind,
                size: w.stat.size,
                state: Some(*state),
            };
            found(w, Some(content));
            progress.advance(1, w.stat.size);
            return false;
        }
        true
    });
    let large: Vec<Walked> = (walked.extract_if(.., |w| {
        w.kind != EntryKind::Symlink && w.stat.size > STREAM_BYTES
    }))
    .collect();
    let read_files = (walked.len() + large.len()) as u64;

    let mut unstored = WriteBatch::new();
    // Files larger now than the walk saw: streamed after the groups, so a group holds no
    // more than the walk planned.
    let mut grown = Vec::new();
    let mut first = true;
    // Groups are cut from the end, so the list shrinks as they are read.
    while !walked.is_empty() {
        let mut start = walked.len();
        let mut taken = 0u64;
        while start > 0 && taken < group_bytes {
            start -= 1;
            taken += walked[start].stat.size + FILE_OVERHEAD;
        }
        let group = walked.split_off(start);
        walked.shrink_to_fit();
        let only = first && walked.is_empty();
        first = false;
        let mut batch = WriteBatch::new();
        let mut files = group.into_iter();
        // Read a slice at a time: a read file's result is larger than its stored blob.
        loop {
            let slice: Vec<Walked> = files.by_ref().take(READ_SLICE).collect();
            if slice.is_empty() {
                break;
            }
            let read: Vec<Result<SmallRead, ScanError>> = slice
                .par_iter()
                .map_init(
                    || store.reader().ok(),
                    |reader, w| {
                        let r = read_small(w, root, dry_run, |id| {
                            reader
                                .as_ref()
                                .is_some_and(|r| r.has_blob(id).unwrap_or(false))
                        });
                        progress.advance(1, w.stat.size);
                        r
                    },
                )
                .collect();
            for (w, r) in slice.into_iter().zip(read) {
                match r? {
                    SmallRead::Read(content, prepared) => {
                        if let Some(p) = prepared {
                            batch.add_blob(p);
                        }
                        found(&w, Some(content));
                    }
                    SmallRead::Grown => grown.push(w),
                    SmallRead::Gone => found(&w, None),
                }
            }
        }
        if dry_run || batch.is_empty() {
            continue;
        }
        if only {
            unstored = batch;
        } else {
            store
                .write(&batch)
                .map_err(|e| ScanError::Store(e.into()))?;
        }
    }
    for w in &large {
        found(w, read_large(store, root, &w.path, dry_run)?);
        progress.advance(1, w.stat.size);
    }
    for w in &grown {
        found(w, read_large(store, root, &w.path, dry_run)?);
    }
    progress.finish();
    Ok(Hashed {
        read_files,
        unstored,
    })
}

pub(super) fn same_stat(a: &Metadata, b: &Metadata) -> bool {
    a.size() == b.size()
        && a.mtime() == b.mtime()
        && a.mtime_nsec() == b.mtime_nsec()
        && a.ctime() == b.ctime()
        && a.ctime_nsec() == b.ctime_nsec()
        && a.ino() == b.ino()
}

/// How reading a small file went.
// Moved once per file read: boxing the large variant would only add an allocation.
#[allow(clippy::large_enum_variant)]
pub(super) enum SmallRead {
    /// Vanished or changed type meanwhile.
    Gone,
    /// Its content (to store, unless stored already).
    Read(Content, Option<PreparedBlob>),
    /// Larger than the walk saw: to be streamed.
    Grown,
}

/// Reads at most `limit` bytes of `file` into `buf`; true if the file holds more (it is
/// growing, or lies about its size as a `/proc` file does). Memory never exceeds `limit`.
pub(super) fn read_at_most(
    file: &mut std::fs::File,
    limit: u64,
    buf: &mut Vec<u8>,
) -> std::io::Result<bool> {
    buf.clear();
    file.take(limit).read_to_end(buf)?;
    let mut probe = [0u8; 1];
    Ok(file.read(&mut probe)? > 0)
}

/// Reads walked file `w` under `root`. It is opened without following a link and never
/// blocks: a FIFO swapped in since the walk would otherwise hold the capture (and the
/// store) until someone writes to it; what is opened is checked to be a regular file.
pub(super) fn read_small(
    w: &Walked,
    root: &Path,
    dry_run: bool,
    is_stored: impl FnOnce(BlobId) -> bool,
) -> Result<SmallRead, ScanError> {
    let io = |source| ScanError::Io {
        path: join(root, &w.path),
        source,
    };
    if w.kind == EntryKind::Symlink {
        let target = match reach::read_link(root, &w.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(SmallRead::Gone),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => return Ok(SmallRead::Gone),
            Err(e) => return Err(io(e)),
        };
        // Trust the walk's stat only if the link did not change around the read.
        let after = reach::lstat(root, &w.path).ok();
        let verified = now_ns();
        let bytes = target.as_os_str().as_bytes();
        let (blob, prepared) = prepare(bytes, dry_run, is_stored);
        let state = after
            .filter(|a| Stat::from_std(a) == w.stat)
            .map(|a| FileState::from_metadata(&a, blob, verified));
        let content = Content {
            blob,
            kind: EntryKind::Symlink,
            size: bytes.len() as u64,
            state,
        };
        return Ok(SmallRead::Read(content, prepared));
    }
    let mut buf = Vec::new();
    let mut attempts = 0;
    let (meta, stable) = loop {
        attempts += 1;
        let mut file = match reach::open_read(root, &w.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(SmallRead::Gone),
            // Replaced by a symlink since the walk: it is captured next time.
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                return Ok(SmallRead::Gone);
            }
            Err(e) => return Err(io(e)),
        };
        let before = file.metadata().map_err(io)?;
        if !before.is_file() {
            return Ok(SmallRead::Gone);
        }
        if before.size() > w.stat.size {
            return Ok(SmallRead::Grown);
        }
        let more = read_at_most(&mut file, before.size(), &mut buf).map_err(io)?;
        let after = file.metadata().map_err(io)?;
        let verified = now_ns();
        if !more && same_stat(&before, &after) && after.size() == buf.len() as u64 {
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
    Ok(SmallRead::Read(
        Content {
            blob,
            kind,
            size: buf.len() as u64,
            state,
        },
        prepared,
    ))
}

pub(super) fn prepare(
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

/// [`read_small`] of a file streamed into the store a chunk at a time.
pub(super) fn read_large(
    store: &Store,
    root: &Path,
    rel: &[u8],
    dry_run: bool,
) -> Result<Option<Content>, ScanError> {
    let abs = join(root, rel);
    let io = |source| ScanError::Io {
        path: abs.clone(),
        source,
    };
    let file = match reach::open_read(root, rel) {
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
    // No further than the size says: a file that keeps growing (or never ends) is read
    // as it was when opened, and not cached.
    let (blob, size) = store
        .blob_of_stream(
            (&file).take(before.size()),
            &abs.display().to_string(),
            !dry_run,
        )
        .map_err(|e| match e {
            cas::WriteError::Input { source, .. } => io(source),
            e => ScanError::Store(e.into()),
        })?;
    let mut probe = [0u8; 1];
    let more = (&file).read(&mut probe).map_err(io)? > 0;
    let after = file.metadata().map_err(io)?;
    let verified = now_ns();
    let kind = if after.mode() & 0o100 != 0 {
        EntryKind::Executable
    } else {
        EntryKind::File
    };
    let stable = !more && same_stat(&before, &after) && after.size() == size;
    let state = stable.then(|| FileState::from_metadata(&after, blob, verified));
    Ok(Some(Content {
        blob,
        kind,
        size,
        state,
    }))
}
