//! What every command needs: output mode and the store, found as SPEC.md says.

use camino::{Utf8Path, Utf8PathBuf};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use cas::{OpenOptions, Store};

use crate::error::CliError;

pub struct Ctx {
    pub json: bool,
    store_flag: Option<Utf8PathBuf>,
    /// Set inside `cairn serve`: the store it holds open, shared by every request.
    shared: Option<SharedStore>,
    /// The worktree operations of a command that opens the store itself.
    own_worktrees: fs_manager::Worktrees,
}

/// A store held open by this process for many commands (`cairn serve`).
#[derive(Clone)]
pub struct SharedStore {
    /// Its folder, as discovery resolves it.
    pub path: Utf8PathBuf,
    pub store: Arc<RwLock<Store>>,
    /// Its worktree operations, shared by every request.
    pub worktrees: Arc<fs_manager::Worktrees>,
}

/// An open store: opened for this command, or shared with others (`cairn serve`).
pub enum StoreRef<'a> {
    Owned(Store),
    Shared(RwLockReadGuard<'a, Store>),
}

impl std::ops::Deref for StoreRef<'_> {
    type Target = Store;
    fn deref(&self) -> &Store {
        match self {
            StoreRef::Owned(s) => s,
            StoreRef::Shared(g) => g,
        }
    }
}

/// An open store no other command uses meanwhile (`gc`).
pub enum StoreMut<'a> {
    Owned(Store),
    Exclusive(RwLockWriteGuard<'a, Store>),
}

impl std::ops::Deref for StoreMut<'_> {
    type Target = Store;
    fn deref(&self) -> &Store {
        match self {
            StoreMut::Owned(s) => s,
            StoreMut::Exclusive(g) => g,
        }
    }
}

impl std::ops::DerefMut for StoreMut<'_> {
    fn deref_mut(&mut self) -> &mut Store {
        match self {
            StoreMut::Owned(s) => s,
            StoreMut::Exclusive(g) => g,
        }
    }
}

impl Ctx {
    pub fn new(json: bool, store_flag: Option<Utf8PathBuf>) -> Ctx {
        Ctx {
            json,
            store_flag,
            shared: None,
            own_worktrees: fs_manager::Worktrees::new(),
        }
    }

    /// A context whose commands use `shared` instead of opening a store.
    pub fn serving(json: bool, store_flag: Option<Utf8PathBuf>, shared: SharedStore) -> Ctx {
        Ctx {
            json,
            store_flag,
            shared: Some(shared),
            own_worktrees: fs_manager::Worktrees::new(),
        }
    }

    /// The worktree operations on the store this command uses.
    pub fn worktrees(&self) -> &fs_manager::Worktrees {
        match &self.shared {
            Some(shared) => &shared.worktrees,
            None => &self.own_worktrees,
        }
    }

    /// The store `--store` or `$CAIRN_STORE` names, as given.
    pub fn named_store(&self) -> Option<&Utf8Path> {
        self.store_flag.as_deref()
    }

    /// The shared store, if the resolved store is the one this process serves.
    fn shared_for(&self) -> Result<Option<&SharedStore>, CliError> {
        let Some(shared) = &self.shared else {
            return Ok(None);
        };
        let path = self.store_path()?;
        let same = path == shared.path
            || std::fs::canonicalize(&path)
                .ok()
                .is_some_and(|p| std::fs::canonicalize(&shared.path).ok() == Some(p));
        if !same {
            return Err(CliError::usage(
                "wrong_store",
                format!(
                    "this server holds store {}; the request names {path}",
                    shared.path
                ),
            ));
        }
        Ok(Some(shared))
    }

    /// `--store` / `$CAIRN_STORE`, else the nearest `.cairn/` in the current directory or its
    /// ancestors, else `$XDG_DATA_HOME/cairn` (`~/.local/share/cairn`).
    pub fn store_path(&self) -> Result<Utf8PathBuf, CliError> {
        let cwd = current_dir()?;
        if let Some(p) = &self.store_flag {
            return Ok(absolute(&cwd, p));
        }
        for dir in cwd.ancestors() {
            let candidate = dir.join(".cairn");
            if candidate.is_dir() {
                return Ok(candidate);
            }
        }
        let data = match std::env::var("XDG_DATA_HOME") {
            Ok(d) if !d.is_empty() => Utf8PathBuf::from(d),
            _ => {
                let home = std::env::var("HOME").map_err(|_| {
                    CliError::usage(
                        "no_store",
                        "no store found: pass --store, or set CAIRN_STORE or HOME",
                    )
                })?;
                Utf8PathBuf::from(home).join(".local/share")
            }
        };
        Ok(data.join("cairn"))
    }

    fn open(&self, create: bool) -> Result<StoreRef<'_>, CliError> {
        self.open_with(create, false)
    }

    fn open_with(&self, create: bool, read_only: bool) -> Result<StoreRef<'_>, CliError> {
        if let Some(shared) = self.shared_for()? {
            reopen_if_write_failed(shared);
            // A request that panicked holding it changed nothing half way (every write is a
            // transaction), so the store is still good.
            let guard = shared
                .store
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            return Ok(StoreRef::Shared(guard));
        }
        Ok(StoreRef::Owned(self.open_direct(create, read_only)?))
    }

    /// Opens the store in this process, waiting while another process holds it.
    pub fn open_direct(&self, create: bool, read_only: bool) -> Result<Store, CliError> {
        let path = self.store_path()?;
        let options = OpenOptions {
            create,
            read_only,
            on_wait: Some(|root| {
                eprintln!("cairn: waiting for store {root}: another process holds it");
            }),
            ..OpenOptions::from_env()
        };
        Ok(Store::open(&path, &options)?)
    }

    /// Opens the store for a command that only reads: a missing store is an error (exit 2),
    /// nothing in it changes, and other readers may hold it at the same time.
    pub fn open_read_only(&self) -> Result<StoreRef<'_>, CliError> {
        self.open_with(false, true)
    }

    /// Opens an existing store for writing: a missing store is an error (exit 2).
    pub fn open_existing(&self) -> Result<StoreRef<'_>, CliError> {
        self.open(false)
    }

    /// Opens the store for a writing command, creating it if missing.
    pub fn open_or_create(&self) -> Result<StoreRef<'_>, CliError> {
        self.open(true)
    }

    /// Opens an existing store for a command that must have it to itself (`gc`): inside
    /// `cairn serve`, it waits until no other request uses it.
    pub fn open_exclusive(&self) -> Result<StoreMut<'_>, CliError> {
        if let Some(shared) = self.shared_for()? {
            reopen_if_write_failed(shared);
            let guard = shared
                .store
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            return Ok(StoreMut::Exclusive(guard));
        }
        Ok(StoreMut::Owned(self.open_direct(false, false)?))
    }
}

/// After a write ran out of space, the database of a store held open refuses every call:
/// open it again (giving that space back) before the next command uses it.
fn reopen_if_write_failed(shared: &SharedStore) {
    let failed = shared
        .store
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .write_failed_for_space();
    if !failed {
        return;
    }
    let mut store = shared
        .store
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // Another request may have done it while this one waited.
    if store.write_failed_for_space()
        && let Err(e) = store.reopen_after_failed_write()
    {
        tracing::warn!("reopening store {} after a failed write: {e}", shared.path);
    }
}

thread_local! {
    /// The directory a request came from, when this process serves others (`serve`, `mcp`).
    static REQUEST_DIR: std::cell::RefCell<Option<Utf8PathBuf>> = const { std::cell::RefCell::new(None) };
    /// Whether that caller's terminal wants colour.
    static REQUEST_COLOR: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// [`with_request_dir`], with colour as the caller's terminal wants it.
pub fn with_request<T>(dir: Utf8PathBuf, color: bool, f: impl FnOnce() -> T) -> T {
    REQUEST_COLOR.with(|c| c.set(color));
    with_request_dir(dir, f)
}

/// Colour for a request's output (false when not serving one).
pub fn request_color() -> bool {
    REQUEST_COLOR.with(std::cell::Cell::get)
}

/// Runs `f` with relative paths and store discovery resolved against `dir` instead of this
/// process's current directory (a request from another process).
pub fn with_request_dir<T>(dir: Utf8PathBuf, f: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            REQUEST_DIR.with(|d| *d.borrow_mut() = None);
        }
    }
    REQUEST_DIR.with(|d| *d.borrow_mut() = Some(dir));
    let _reset = Reset;
    f()
}

/// True while this thread runs a command for another process (`serve`, `mcp`): nothing may
/// prompt or draw on this process's terminal.
pub fn serving_request() -> bool {
    REQUEST_DIR.with(|d| d.borrow().is_some())
}

pub fn current_dir() -> Result<Utf8PathBuf, CliError> {
    if let Some(dir) = REQUEST_DIR.with(|d| d.borrow().clone()) {
        return Ok(dir);
    }
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::store("io", format!("current directory: {e}")))?;
    Utf8PathBuf::from_path_buf(cwd).map_err(|p| {
        CliError::usage(
            "invalid_path",
            format!(
                "{}: path is not valid UTF-8",
                crate::output::quote_path(std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str()))
            ),
        )
    })
}

/// `p` made absolute against `cwd`, with `.` and `..` components resolved lexically.
pub fn absolute(cwd: &Utf8Path, p: &Utf8Path) -> Utf8PathBuf {
    let joined = if p.is_absolute() {
        p.to_owned()
    } else {
        cwd.join(p)
    };
    let mut out = Utf8PathBuf::new();
    for c in joined.components() {
        match c {
            camino::Utf8Component::CurDir => {}
            camino::Utf8Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_str()),
        }
    }
    out
}

/// Tree paths from `-- PATH…` arguments: relative to the worktree root as given, or
/// absolute inside `root`; `.` components dropped, `..` refused.
pub fn tree_paths(
    root: Option<&Utf8Path>,
    raw: &[std::ffi::OsString],
) -> Result<Vec<Vec<u8>>, CliError> {
    use std::os::unix::ffi::OsStrExt;
    let quote = diff::quote_path;
    let mut out = Vec::new();
    for p in raw {
        let bytes = p.as_bytes();
        let rel = match (bytes.starts_with(b"/"), root) {
            (true, Some(root)) => match bytes.strip_prefix(root.as_str().as_bytes()) {
                Some(rest) if rest.is_empty() || rest.starts_with(b"/") => rest,
                _ => {
                    return Err(CliError::usage(
                        "invalid_path",
                        format!("{}: outside the worktree {root}", quote(bytes)),
                    ));
                }
            },
            (true, None) => {
                return Err(CliError::usage(
                    "invalid_path",
                    format!("{}: an absolute path needs a worktree", quote(bytes)),
                ));
            }
            (false, _) => bytes,
        };
        let mut parts = Vec::new();
        for c in rel.split(|&b| b == b'/') {
            match c {
                b"" | b"." => {}
                b".." => {
                    return Err(CliError::usage(
                        "invalid_path",
                        format!("{}: '..' is not allowed", quote(bytes)),
                    ));
                }
                c => parts.push(c),
            }
        }
        out.push(parts.join(&b'/'));
    }
    Ok(out)
}

/// A snapshot spec where no worktree is named: a checkpoint name of the worktree holding
/// the current directory, else a ref name or unique id prefix (SPEC.md's order).
pub fn resolve_snapshot(reader: &cas::Reader, spec: &str) -> Result<cas::SnapshotId, CliError> {
    let record = match current_dir() {
        Ok(cwd) => fs_manager::find_worktree(reader, &cwd)?,
        Err(_) => None,
    };
    match record.as_ref().and_then(|r| r.checkpoint(spec)) {
        Some(c) => Ok(c.snapshot),
        None => Ok(reader.resolve_snapshot(spec)?),
    }
}

/// A snapshot spec in the context of a worktree: its checkpoint name, else a ref name or
/// unique id prefix.
pub fn resolve_in(
    reader: &cas::Reader,
    record: &cas::WorktreeRecord,
    spec: &str,
) -> Result<cas::SnapshotId, CliError> {
    match record.checkpoint(spec) {
        Some(c) => Ok(c.snapshot),
        None => Ok(reader.resolve_snapshot(spec)?),
    }
}
