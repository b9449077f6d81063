//! [`Engine`] and [`Call`]: the open store and what lives as long as it, and one call's
//! context; helpers every verb uses.

use std::sync::atomic::AtomicBool;

use camino::{Utf8Path, Utf8PathBuf};

use crate::OpenOptions;
use crate::ancestry;
use crate::confine::Sandbox;
use crate::error::{ArgumentError, Error};
use crate::git::Git;
use crate::path;
use crate::store::{Access, Holding, Pools, StoreMut, StoreRef};
use cas::{Progress, Silent};

/// An open cairn store and what lives as long as it: see the crate doc.
pub struct Engine {
    path: Utf8PathBuf,
    holding: Holding,
    pools: Pools,
    /// Per-worktree locks, kept caches and (when watching) the watcher of this store.
    pub(crate) worktrees: fs_manager::Worktrees,
    /// The git backend, if the embedder gave one.
    git: Option<Box<dyn Git>>,
    /// What confines `run`'s commands, if the embedder gave it.
    sandbox: Option<Box<dyn Sandbox>>,
    /// Held while fetching from a remote, so concurrent calls naming one snapshot fetch
    /// it once.
    pub(crate) fetching: std::sync::Mutex<()>,
    /// What mounts read from remotes when first used (one source per remote, shared by
    /// every mount), and their prefetches.
    pub(crate) lazy: std::sync::Arc<crate::lazy::LazyRemotes>,
    /// The mounts this engine serves, by root.
    pub(crate) mounts: crate::store::Live,
}

/// One call's context: the caller's directory (relative paths and the current worktree
/// are resolved against it) and where its progress goes.
pub struct Call<'a> {
    /// The caller's directory; absolute.
    pub cwd: Utf8PathBuf,
    /// Receives the progress of long operations.
    pub progress: &'a dyn Progress,
    /// Never fetch from a remote (`--offline`).
    pub offline: bool,
    /// A person on a terminal asks (the command line): options only a person may give are
    /// taken (`run`'s and `verify`'s `network`, `run`'s `allow_write` and `no_sandbox`,
    /// `verify`'s `sign`). Anyone else is refused them (`not_permitted`): the command runs
    /// where the engine runs, with the keys of the engine's machine.
    pub person: bool,
    /// Set when the caller is gone (a server's client closed its connection): a long
    /// operation that watches it (`verify`'s check) stops, and records nothing.
    pub cancel: Option<&'a AtomicBool>,
}

impl Call<'static> {
    /// A call from `cwd` whose progress goes nowhere.
    pub fn new(cwd: impl Into<Utf8PathBuf>) -> Call<'static> {
        Call {
            cwd: cwd.into(),
            progress: &Silent,
            offline: false,
            person: false,
            cancel: None,
        }
    }
}

impl<'a> Call<'a> {
    /// The same call with its progress sent to `progress`.
    pub fn with_progress<'b>(self, progress: &'b dyn Progress) -> Call<'b>
    where
        'a: 'b,
    {
        Call {
            cwd: self.cwd,
            progress,
            offline: self.offline,
            person: self.person,
            cancel: self.cancel,
        }
    }

    /// The same call, cancelled once `cancel` is set (see [`Call::cancel`]).
    pub fn cancelled_by(mut self, cancel: &'a AtomicBool) -> Call<'a> {
        self.cancel = Some(cancel);
        self
    }

    /// The same call, made by a person on a terminal when `person` (see [`Call::person`]).
    pub fn by_person(mut self, person: bool) -> Call<'a> {
        self.person = person;
        self
    }

    /// The same call, never fetching from a remote when `offline`.
    pub fn offline(mut self, offline: bool) -> Call<'a> {
        self.offline = offline;
        self
    }

    pub(crate) fn path(&self, p: &Utf8Path) -> Utf8PathBuf {
        path::absolute(&self.cwd, p)
    }

    /// `dir` resolved, or the caller's directory.
    pub(crate) fn dir(&self, dir: Option<&Utf8Path>) -> Utf8PathBuf {
        match dir {
            Some(d) => self.path(d),
            None => self.cwd.clone(),
        }
    }
}

impl Engine {
    /// Opens the store at `path` and holds it open for every call.
    ///
    /// ```
    /// use cairn_engine::{Engine, OpenOptions, RefListOptions};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// # let store = camino::Utf8PathBuf::try_from(tmp.path().join("store"))?;
    /// let options = OpenOptions {
    ///     create: true,
    ///     lock_timeout: std::time::Duration::from_secs(5),
    ///     ..OpenOptions::default()
    /// };
    /// let engine = Engine::open(&store, &options)?;
    /// let call = cairn_engine::Call::new(store.clone());
    /// assert!(engine.ref_list(&call, RefListOptions::default())?.refs.is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn open(path: impl Into<Utf8PathBuf>, options: &OpenOptions) -> Result<Engine, Error> {
        let path = path.into();
        let store = cas::Store::open(&path, options)?;
        Ok(Engine {
            path,
            holding: Holding::Open(std::sync::Arc::new(std::sync::RwLock::new(store))),
            pools: Pools::default(),
            worktrees: fs_manager::Worktrees::new(),
            git: None,
            sandbox: None,
            fetching: Default::default(),
            lazy: Default::default(),
            mounts: Default::default(),
        })
    }

    /// Opens the store at `path`, creating it if missing, with the options of the
    /// environment (`CAIRN_LOCK_TIMEOUT`, ...). A format 1 store is upgraded with the
    /// worktree layer's tables; one that also holds git ids needs `cairn_git::FORMAT_1_TABLES`
    /// too, given to [`Engine::open`].
    pub fn create(path: impl Into<Utf8PathBuf>) -> Result<Engine, Error> {
        let mut options = OpenOptions {
            create: true,
            ..OpenOptions::try_from_env()?
        };
        options.format_1_tables.extend(fs_manager::FORMAT_1_TABLES);
        Engine::open(path, &options)
    }

    /// An engine for the store at `path` that opens it in each call, in the mode that call
    /// needs (read-only for reads, so other processes may read at the same time): for a
    /// process that makes one call.
    pub fn per_call(path: impl Into<Utf8PathBuf>, options: OpenOptions) -> Engine {
        Engine {
            path: path.into(),
            holding: Holding::PerCall(options),
            pools: Pools::default(),
            worktrees: fs_manager::Worktrees::new(),
            git: None,
            sandbox: None,
            fetching: Default::default(),
            lazy: Default::default(),
            mounts: Default::default(),
        }
    }

    /// The store folder.
    pub fn store_path(&self) -> &Utf8Path {
        &self.path
    }

    /// The same engine, its captures watching their worktrees so that later ones skip
    /// reading what did not change (for an engine that serves many calls).
    pub fn watching(mut self) -> Engine {
        self.worktrees = fs_manager::Worktrees::watching();
        self
    }

    /// The same engine with `git` as its git backend (for `onboard`'s git source,
    /// `onboard --git`, `merge` and recovering a `merge --checkout`); without one those
    /// record no source or are refused.
    pub fn with_git(mut self, git: impl Git + 'static) -> Engine {
        self.git = Some(Box::new(git));
        self
    }

    /// The same engine with `sandbox` confining the commands of [`Engine::run`] (the
    /// `sandbox` crate's Landlock one); without one `run` is refused.
    pub fn with_sandbox(mut self, sandbox: impl Sandbox + 'static) -> Engine {
        self.sandbox = Some(Box::new(sandbox));
        self
    }

    /// The sandbox, if any.
    pub(crate) fn sandbox(&self) -> Option<&dyn Sandbox> {
        self.sandbox.as_deref()
    }

    /// The git backend, if any.
    pub(crate) fn git(&self) -> Option<&dyn Git> {
        self.git.as_deref()
    }

    /// The git backend, or the refusal naming `repo`.
    pub(crate) fn git_for(&self, repo: &Utf8Path) -> Result<&dyn Git, Error> {
        self.git().ok_or_else(|| crate::git::no_git(repo))
    }

    /// Runs `f` on a thread pool no other running call uses, so calls do not queue behind
    /// each other's parallel work.
    pub fn isolated<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        self.pools.install(f)
    }

    /// Runs `f` on the open store (for calls on stored objects themselves, such as a
    /// server's object transfer).
    pub fn with_store<T>(&self, f: impl FnOnce(&cas::Store) -> T) -> Result<T, Error> {
        let store = self.store(Access::Write)?;
        Ok(f(&store))
    }

    pub(crate) fn store(&self, access: Access) -> Result<StoreRef<'_>, Error> {
        self.holding.get(&self.path, access)
    }

    /// The store this engine holds open, to share with what outlives a call.
    pub(crate) fn shared_store(&self) -> Option<std::sync::Arc<std::sync::RwLock<cas::Store>>> {
        self.holding.shared()
    }

    pub(crate) fn store_exclusive(&self) -> Result<StoreMut<'_>, Error> {
        self.holding.exclusive(&self.path)
    }
}

/// A snapshot spec where no worktree is named: a checkpoint name of the worktree holding
/// `cwd`, else a ref name or unique id prefix (SPEC.md's order), with steps back after it.
pub(crate) fn resolve_snapshot(
    reader: &cas::Reader,
    cwd: &Utf8Path,
    spec: &str,
) -> Result<cas::SnapshotId, Error> {
    let record = fs_manager::find_worktree(reader, cwd)?;
    resolve(reader, record.as_ref(), spec)
}

/// `NAME@REMOTE` split, if `spec` is one (a ref name holds no `@`).
pub(crate) fn remote_ref(spec: &str) -> Option<(&str, &str)> {
    spec.rsplit_once('@')
}

/// A snapshot spec in the context of a worktree: its checkpoint name, else a ref name or
/// unique id prefix, with steps back after it.
pub(crate) fn resolve_in(
    reader: &cas::Reader,
    record: &fs_manager::WorktreeRecord,
    spec: &str,
) -> Result<cas::SnapshotId, Error> {
    resolve(reader, Some(record), spec)
}

/// The one resolver of snapshot specs: a checkpoint name of `record`, a ref,
/// `NAME@REMOTE` or a unique id prefix, then each step back (`~N`, `^N`) after it.
fn resolve(
    reader: &cas::Reader,
    record: Option<&fs_manager::WorktreeRecord>,
    spec: &str,
) -> Result<cas::SnapshotId, Error> {
    let (base, steps) = ancestry::parse(spec)?;
    let start = match record.and_then(|r| r.checkpoint(base)) {
        Some(c) => c.snapshot,
        None => named(reader, base)?,
    };
    ancestry::walk(reader, spec, start, &steps)
}

/// A ref, `NAME@REMOTE` or unique id prefix, as given.
fn named(reader: &cas::Reader, spec: &str) -> Result<cas::SnapshotId, Error> {
    if let Some((name, at)) = remote_ref(spec) {
        remote::remote_config(reader, at)?;
        return remote::tracking_ref(reader, at, name)?.ok_or_else(|| {
            remote::RemoteError::NoSuchRef {
                remote: at.to_owned(),
                name: name.to_owned(),
            }
            .into()
        });
    }
    Ok(reader.resolve_snapshot(spec)?)
}

pub(crate) fn registered(
    reader: &cas::Reader,
    dir: &Utf8Path,
) -> Result<fs_manager::WorktreeRecord, Error> {
    fs_manager::find_worktree(reader, dir)?.ok_or_else(|| {
        ArgumentError::NotAWorktree {
            dir: dir.to_owned(),
        }
        .into()
    })
}

pub(crate) fn labels(raw: &[String]) -> Result<std::collections::BTreeMap<String, String>, Error> {
    let mut out = std::collections::BTreeMap::new();
    for label in raw {
        let (k, v) = cas::parse_label(label).map_err(ArgumentError::Label)?;
        out.insert(k, v);
    }
    Ok(out)
}

/// Serde for optional byte strings as base64 text.
pub(crate) mod base64_bytes {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;

    pub(crate) fn serialize<S: serde::Serializer>(
        v: &Option<Vec<u8>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.serialize_str(&STANDARD.encode(v)),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<u8>>, D::Error> {
        let text: Option<String> = serde::Deserialize::deserialize(d)?;
        text.map(|t| STANDARD.decode(t).map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// Serde for optional counts and sizes that JSON may write as a whole float (`5.0`, as JSON
/// Schema's `integer` allows): the number, if it is whole and fits.
pub(crate) mod whole_number {
    pub(crate) fn deserialize<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
    where
        D: serde::Deserializer<'de>,
        T: TryFrom<u64>,
    {
        use serde::de::Error;
        let Some(n) = <Option<serde_json::Number> as serde::Deserialize>::deserialize(d)? else {
            return Ok(None);
        };
        let whole = match (n.as_u64(), n.as_f64()) {
            (Some(u), _) => Some(u),
            // Below 2^64 (which is exactly representable), and whole.
            (None, Some(f))
                if f.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&f) =>
            {
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                Some(f as u64)
            }
            _ => None,
        };
        whole
            .and_then(|u| T::try_from(u).ok())
            .map(Some)
            .ok_or_else(|| D::Error::custom(format!("{n}: not a whole number in range")))
    }

    /// A count: a whole number of at least 1 (`log`'s `max_count`; none of them is no
    /// count at all).
    pub(crate) fn at_least_one<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
    where
        D: serde::Deserializer<'de>,
        T: TryFrom<u64> + PartialEq + From<u8>,
    {
        let count = deserialize::<D, T>(d)?;
        if count == Some(T::from(0)) {
            return Err(serde::de::Error::custom("must be at least 1, not 0"));
        }
        Ok(count)
    }
}
