//! Keeping redb's panics inside the store.
//!
//! redb trusts a database file that was closed cleanly: on a page damaged outside it (a
//! flipped page-type byte, say) its b-tree walk reaches an `unreachable!()`, and debug builds
//! also trip its debug assertions while opening. No store content may end a cairn command,
//! so every call into redb runs under [`Health::run`]: a panic there becomes a
//! [`StorageFailure`] that names the store, and the store then refuses every later call with
//! the same error, since what redb holds after a panic (a write transaction's pages, its
//! caches) is not to be trusted.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, PanicHookInfo};
use std::sync::{Once, OnceLock};

use camino::{Utf8Path, Utf8PathBuf};

use super::error::{InStore, StorageFailure};

/// Whether one store may still be used, shared by the store and its readers.
#[derive(Debug)]
pub(crate) struct Health {
    root: Utf8PathBuf,
    /// Set by the first panic caught: what redb stopped on.
    damage: OnceLock<String>,
}

impl Health {
    pub(crate) fn new(root: &Utf8Path) -> Health {
        Health {
            root: root.to_owned(),
            damage: OnceLock::new(),
        }
    }

    /// True once a panic inside redb was caught.
    pub(crate) fn is_damaged(&self) -> bool {
        self.damage.get().is_some()
    }

    /// Runs `f`, which calls into redb; an error it returns, or a panic inside it, comes back
    /// naming the store.
    pub(crate) fn run<T, E>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<T, E>
    where
        E: From<StorageFailure> + InStore,
    {
        match self.catch(f) {
            Ok(result) => result,
            Err(failure) => Err(failure.into()),
        }
        .map_err(|e| e.in_store(&self.root))
    }

    /// Runs `f`; `Err` if it panicked or the store is already known damaged. The failure
    /// does not name the store: callers that already do add it themselves.
    pub(crate) fn catch<T>(&self, f: impl FnOnce() -> T) -> Result<T, StorageFailure> {
        if let Some(reason) = self.damage.get() {
            return Err(StorageFailure::damaged(reason.clone()));
        }
        install_quiet_hook();
        let caught = {
            let _quiet = Quiet::enter();
            // Unwind safety: after a panic nothing of this store is used again (see above).
            std::panic::catch_unwind(AssertUnwindSafe(f))
        };
        caught.map_err(|payload| {
            let reason = CAUGHT
                .with(|c| c.borrow_mut().take())
                .unwrap_or_else(|| payload_text(payload.as_ref()));
            // The caller gets it as an error; this is for a log that wants the first one.
            tracing::debug!(store = %self.root, "the database file is damaged: {reason}");
            let first = self.damage.get_or_init(|| reason);
            StorageFailure::damaged(first.clone())
        })
    }
}

/// A panic caught by [`quietly`]: its message and where in redb it happened.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Panicked(String);

/// Runs `f`, which calls into redb, whatever the store's health: a panic in it ends there,
/// quietly, as an `Err` saying what it was. For closing and repairing.
pub(crate) fn quietly<T>(f: impl FnOnce() -> T) -> Result<T, Panicked> {
    install_quiet_hook();
    let caught = {
        let _quiet = Quiet::enter();
        // Unwind safety: used only on what is being closed or reopened afresh.
        std::panic::catch_unwind(AssertUnwindSafe(f))
    };
    caught.map_err(|payload| {
        Panicked(
            CAUGHT
                .with(|c| c.borrow_mut().take())
                .unwrap_or_else(|| payload_text(payload.as_ref())),
        )
    })
}

thread_local! {
    /// How many [`Health::catch`] calls this thread is inside.
    static QUIET: Cell<u32> = const { Cell::new(0) };
    /// The last panic the hook kept quiet, for the error that reports it.
    static CAUGHT: RefCell<Option<String>> = const { RefCell::new(None) };
}

struct Quiet;

impl Quiet {
    fn enter() -> Quiet {
        QUIET.with(|q| q.set(q.get() + 1));
        Quiet
    }
}

impl Drop for Quiet {
    fn drop(&mut self) {
        QUIET.with(|q| q.set(q.get().saturating_sub(1)));
    }
}

/// Installs, once, a panic hook that keeps panics inside [`Health::catch`] off stderr (they
/// are reported as errors) and hands every other panic to the hook that was there before.
fn install_quiet_hook() {
    static HOOK: Once = Once::new();
    // Replacing the hook while this thread panics would itself panic.
    if std::thread::panicking() {
        return;
    }
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if QUIET.with(Cell::get) > 0 {
                CAUGHT.with(|c| *c.borrow_mut() = Some(describe(info)));
            } else {
                previous(info);
            }
        }));
    });
}

/// The panic's message and where in redb it happened.
fn describe(info: &PanicHookInfo<'_>) -> String {
    let message = payload_text(info.payload());
    match info.location() {
        Some(at) => {
            let file = at.file();
            // Registry paths are long; from the crate's folder on says where.
            let file = file.find("/redb-").map_or(file, |i| &file[i + 1..]);
            format!("{message} at {file}:{}", at.line())
        }
        None => message,
    }
}

fn payload_text(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic".to_owned()
    }
}

/// A table of a write transaction, leaked rather than dropped while its thread panics.
///
/// redb's `Table::drop` locks the transaction's table mutex and unwraps it; a panic inside
/// redb that held that mutex (opening a table on a damaged file) poisons it, and the
/// second panic, during unwinding, aborts the process. Nothing of the store is used after a
/// panic anyway.
pub(crate) struct Held<T>(Option<T>);

impl<T> std::ops::Deref for Held<T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0
            .as_ref()
            .expect("a held table is there until dropped")
    }
}

impl<T> std::ops::DerefMut for Held<T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0
            .as_mut()
            .expect("a held table is there until dropped")
    }
}

impl<T> Drop for Held<T> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            std::mem::forget(self.0.take());
        }
    }
}

/// Opens `table` in the write transaction `txn`, [`Held`].
pub(crate) fn open_held<'t, K: redb::Key + 'static, V: redb::Value + 'static>(
    txn: &'t redb::WriteTransaction,
    table: redb::TableDefinition<K, V>,
) -> Result<Held<redb::Table<'t, K, V>>, redb::TableError> {
    txn.open_table(table).map(|t| Held(Some(t)))
}
