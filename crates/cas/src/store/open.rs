//! Opening a store: the database, its format (and upgrading an older one), and closing
//! it again, giving back the space of a write that ran out of it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use camino::Utf8Path;
use redb::{Database, WriteTransaction};

use super::contain::{Health, open_held};
use super::error::StorageResult;
use super::error::*;
use super::handle::{Db, Store};
use super::options::*;
use super::tables::*;

impl Store {
    /// Opens the store folder `root`, creating it if `options.create`.
    pub fn open(root: &Utf8Path, options: &OpenOptions) -> Result<Store, OpenError> {
        let db_path = root.join(DATABASE_FILE);
        let exists = db_path.is_file();
        if !exists && !options.create {
            return Err(OpenError::Missing {
                path: root.to_owned(),
            });
        }
        if !exists {
            std::fs::create_dir_all(root).map_err(|source| OpenError::Io {
                path: root.to_owned(),
                source,
            })?;
        }
        let health = Arc::new(Health::new(root));
        let damaged = |source| OpenError::Database {
            path: db_path.clone(),
            source,
        };
        let db = health
            .catch(|| Self::open_database(root, &db_path, options))
            .map_err(damaged)??;
        let mut store = Store {
            db,
            root: root.to_owned(),
            health: Arc::clone(&health),
            segment_bytes: 0,
            group: super::group::Group::default(),
            versions: super::versions::Versions::default(),
            reclaim_past: std::sync::Mutex::new(None),
            options: Box::new(options.clone()),
        };
        match health
            .catch(|| store.prepare(options.create))
            .map_err(damaged)?
        {
            Ok(segment_bytes) => store.segment_bytes = segment_bytes,
            // An old format read-only: upgrading it takes a writer, once.
            Err(OpenError::UnsupportedFormat { found: 1, .. }) if options.read_only => {
                drop(store);
                let writer = OpenOptions {
                    read_only: false,
                    create: false,
                    ..options.clone()
                };
                drop(Store::open(root, &writer)?);
                return Store::open(root, options);
            }
            Err(e) => return Err(e),
        }
        Ok(store)
    }

    pub(super) fn open_database(
        root: &Utf8Path,
        db_path: &Utf8Path,
        options: &OpenOptions,
    ) -> Result<Db, OpenError> {
        let started = Instant::now();
        let mut announced = false;
        let mut pause = Duration::from_millis(5);
        let mut read_only = options.read_only;
        loop {
            let mut builder = Database::builder();
            builder.set_cache_size(options.cache_bytes);
            let opened = if read_only {
                builder.open_read_only(db_path).map(Db::Read)
            } else {
                builder.create(db_path).map(Db::Write)
            };
            match opened {
                Ok(db) => return Ok(db),
                Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
                    let waited = started.elapsed();
                    if waited >= options.lock_timeout {
                        return Err(OpenError::LockTimeout {
                            path: root.to_owned(),
                            waited,
                        });
                    }
                    // A wait too short to notice (a server that is stopping lets go within
                    // a second) is not worth a line; half the allowed wait always is.
                    let noticeable = Duration::from_secs(1).min(options.lock_timeout / 2);
                    if !announced && waited >= noticeable {
                        announced = true;
                        tracing::info!(store = %root, "store is held by another process; waiting");
                        if let Some(notify) = options.on_wait {
                            notify(root);
                        }
                    }
                    std::thread::sleep(pause.min(options.lock_timeout.saturating_sub(waited)));
                    pause = (pause * 2).min(Duration::from_millis(100));
                }
                // A store left behind by a crash needs the repair that only a writer does;
                // any other failure is reported as it is, with the file untouched.
                Err(redb::DatabaseError::RepairAborted) if read_only => {
                    tracing::info!(store = %root, "store was not closed cleanly; repairing it");
                    read_only = false;
                }
                Err(e) => {
                    return Err(OpenError::Database {
                        path: db_path.to_owned(),
                        source: StorageFailure::from(e),
                    });
                }
            }
        }
    }

    pub(super) fn writer(&self) -> Result<&Database, WriteError> {
        match &self.db {
            Db::Write(db) => Ok(db),
            Db::Read(_) => Err(WriteError::ReadOnly {
                path: self.root.clone(),
            }),
            Db::Closed => Err(StorageFailure::from(redb::StorageError::DatabaseClosed).into()),
        }
    }

    /// Begins a write transaction and returns it with the database file's length. While it
    /// is open nothing else grows the file (redb has one writer, and a writable store is held
    /// by one process), so what lies past that length is this transaction's alone.
    pub(super) fn begin_write(&self) -> Result<(WriteTransaction, u64), WriteError> {
        Ok(self.begin_write_on(self.writer()?)?)
    }

    pub(super) fn begin_write_on(
        &self,
        db: &Database,
    ) -> Result<(WriteTransaction, u64), StorageFailure> {
        let txn = db.begin_write().storage()?;
        let len = std::fs::metadata(self.database_path())
            .map_err(|e| StorageFailure::from(redb::StorageError::Io(e)))?;
        Ok((txn, len.len()))
    }

    /// Passes on `e`, the failure of a write transaction begun when the file was
    /// `len_before` long; if the file system filled up, that space is given back on close.
    pub(super) fn after_failed_write<E: super::error::OutOfSpace>(
        &self,
        len_before: u64,
        e: E,
    ) -> E {
        if e.is_out_of_space() {
            let mut past = self
                .reclaim_past
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *past = Some(past.map_or(len_before, |p| p.min(len_before)));
        }
        e
    }

    /// Checks the format version, initialising a new database; returns the segment size.
    pub(super) fn prepare(&self, create: bool) -> Result<u64, OpenError> {
        let db_err = |e: StorageFailure| OpenError::Database {
            path: self.root.join(DATABASE_FILE),
            source: e,
        };
        let existing = {
            let txn = self.db.begin_read().storage().map_err(db_err)?;
            match txn.open_table(META) {
                Ok(meta) => {
                    let version = meta.get(FORMAT_VERSION_KEY).storage().map_err(db_err)?;
                    let segment = meta.get(SEGMENT_BYTES_KEY).storage().map_err(db_err)?;
                    Some((version.map(|v| v.value()), segment.map(|v| v.value())))
                }
                Err(redb::TableError::TableDoesNotExist(_)) => None,
                Err(e) => return Err(db_err(e.into())),
            }
        };
        if let (Some((Some(1), Some(_))), Db::Write(db)) = (&existing, &self.db) {
            let txn = db.begin_write().storage().map_err(db_err)?;
            super::upgrade::from_format_1(&txn, &self.options.format_1_tables).map_err(
                |e| match e {
                    super::upgrade::UpgradeError::Storage(e) => db_err(e),
                    super::upgrade::UpgradeError::Unclaimed(table) => OpenError::Format1Unclaimed {
                        path: self.root.clone(),
                        table,
                    },
                },
            )?;
            txn.commit().storage().map_err(db_err)?;
            tracing::info!(store = %self.root, "upgraded the store from format 1 to 2");
            return self.prepare(create);
        }
        if let (Some((Some(2), Some(_))), Db::Write(db)) = (&existing, &self.db) {
            // Format 3 reads every format 2 record as it is; new writes use its records.
            let txn = db.begin_write().storage().map_err(db_err)?;
            open_held(&txn, META)
                .storage()
                .map_err(db_err)?
                .insert(FORMAT_VERSION_KEY, FORMAT_FRAMES)
                .storage()
                .map_err(db_err)?;
            txn.commit().storage().map_err(db_err)?;
            tracing::info!(store = %self.root, "marked the store format {FORMAT_FRAMES} (from 2)");
            return self.prepare(create);
        }
        match existing {
            Some((Some(2 | FORMAT_FRAMES | FORMAT_VERSION), Some(segment))) => {
                // Every read and write allocates a segment: a damaged size must not reach them.
                if (super::blob::MIN_SEGMENT_BYTES..=super::blob::MAX_SEGMENT_BYTES)
                    .contains(&segment)
                {
                    Ok(segment)
                } else {
                    Err(OpenError::Corrupt {
                        path: self.root.clone(),
                        reason: format!(
                            "its blob log segment size, {segment} bytes, is not possible"
                        ),
                    })
                }
            }
            Some((found, _)) => Err(OpenError::UnsupportedFormat {
                path: self.root.clone(),
                found: found.unwrap_or(0),
                expected: FORMAT_VERSION,
            }),
            None if !create => Err(OpenError::UnsupportedFormat {
                path: self.root.clone(),
                found: 0,
                expected: FORMAT_VERSION,
            }),
            None => {
                let Db::Write(db) = &self.db else {
                    return Err(OpenError::UnsupportedFormat {
                        path: self.root.clone(),
                        found: 0,
                        expected: FORMAT_VERSION,
                    });
                };
                let txn = db.begin_write().storage().map_err(db_err)?;
                {
                    let mut meta = open_held(&txn, META).storage().map_err(db_err)?;
                    meta.insert(FORMAT_VERSION_KEY, FORMAT_VERSION)
                        .storage()
                        .map_err(db_err)?;
                    meta.insert(SEGMENT_BYTES_KEY, super::blob::DEFAULT_SEGMENT_BYTES)
                        .storage()
                        .map_err(db_err)?;
                    meta.insert(LOG_END_KEY, 0).storage().map_err(db_err)?;
                    open_held(&txn, BLOBS).storage().map_err(db_err)?;
                    open_held(&txn, SEGMENTS).storage().map_err(db_err)?;
                    open_held(&txn, TREES).storage().map_err(db_err)?;
                    open_held(&txn, SNAPSHOTS).storage().map_err(db_err)?;
                    open_held(&txn, REFS).storage().map_err(db_err)?;
                }
                txn.commit().storage().map_err(db_err)?;
                Ok(super::blob::DEFAULT_SEGMENT_BYTES)
            }
        }
    }
}

impl Store {
    /// True after a write ran out of space: the database then refuses every call until
    /// [`Store::reopen_after_failed_write`], or until the store is dropped (which gives the
    /// space back too).
    pub fn write_failed_for_space(&self) -> bool {
        self.reclaim_past
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some()
    }

    /// Gives back the space of a write that ran out of it and opens the database again, so
    /// that a store held open for long (`cairn serve`) goes on working once there is room.
    pub fn reopen_after_failed_write(&mut self) -> Result<(), OpenError> {
        let past = self
            .reclaim_past
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let Some(len_before) = past else {
            return Ok(());
        };
        super::reclaim::give_back(&self.root, len_before);
        self.reopen_db()
    }

    /// Closes the database and opens it again with the store's options.
    pub(super) fn reopen_db(&mut self) -> Result<(), OpenError> {
        self.close_db();
        let db_path = self.database_path();
        let options = self.options.clone();
        self.db = self
            .health
            .catch(|| Self::open_database(&self.root, &db_path, &options))
            .map_err(|source| OpenError::Database {
                path: db_path.clone(),
                source,
            })??;
        Ok(())
    }
}

impl Store {
    /// Closes the database. redb's drop commits once more (its allocator state), which can
    /// panic on a damaged file, and does after a caught panic poisoned its locks; a drop must
    /// not panic, and the next open repairs what the close left undone.
    pub(super) fn close_db(&mut self) {
        let db = std::mem::replace(&mut self.db, Db::Closed);
        if let Err(reason) = super::contain::quietly(|| drop(db))
            && !self.health.is_damaged()
        {
            tracing::warn!(store = %self.root, "closing the database failed ({reason}); the next open repairs it");
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let past = self
            .reclaim_past
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        match past {
            Some(len_before) if !self.health.is_damaged() => {
                super::reclaim::give_back(&self.root, len_before);
                self.close_db();
                super::reclaim::repair(&self.root);
            }
            _ => self.close_db(),
        }
    }
}
