//! Group commit. When several threads of one process (`cairn serve`'s requests) write at
//! the same time, the first becomes the leader and commits every batch that queued up
//! meanwhile in one durable transaction: one fsync for the group instead of one each. Each
//! batch stays all-or-nothing on its own: if one fails its checks (a dangling reference),
//! the group's transaction is dropped and every batch is committed alone, so only that
//! writer gets the error.

use std::sync::{Arc, Condvar, Mutex, PoisonError};

use super::error::{InStore, OutOfSpace, StorageResult, WriteError};
use super::{Store, WriteBatch, WriteOutcome};

/// Batches larger than this (compressed blob bytes) commit on their own, uncopied.
pub(crate) const GROUP_MAX_BYTES: u64 = 4 << 20;

#[derive(Default)]
pub(crate) struct Group {
    state: Mutex<State>,
    done: Condvar,
}

#[derive(Default)]
struct State {
    queue: Vec<Arc<Pending>>,
    leading: bool,
    transactions: u64,
}

pub(crate) struct Pending {
    batch: WriteBatch,
    result: Mutex<Option<Result<WriteOutcome, WriteError>>>,
}

impl Pending {
    fn set(&self, r: Result<WriteOutcome, WriteError>) {
        *self.result.lock().unwrap_or_else(PoisonError::into_inner) = Some(r);
    }

    fn take(&self) -> Option<Result<WriteOutcome, WriteError>> {
        self.result
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// Hands leadership back when a group is done (or its commit panicked).
struct Leader<'a> {
    group: &'a Group,
    members: &'a [Arc<Pending>],
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        for m in self.members {
            let mut result = m.result.lock().unwrap_or_else(PoisonError::into_inner);
            if result.is_none() {
                *result = Some(Err(WriteError::Commit {
                    reason: "the committing thread panicked".into(),
                }));
            }
        }
        let mut state = self
            .group
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        state.leading = false;
        state.transactions += 1;
        self.group.done.notify_all();
    }
}

impl Store {
    /// [`Store::write`] through the group: returns once `batch` is durable (or refused).
    pub(crate) fn write_grouped(&self, batch: &WriteBatch) -> Result<WriteOutcome, WriteError> {
        let pending = Arc::new(Pending {
            batch: batch.clone(),
            result: Mutex::new(None),
        });
        let group = &self.group;
        let mut state = group.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.queue.push(Arc::clone(&pending));
        loop {
            if let Some(r) = pending.take() {
                return r;
            }
            if !state.leading {
                state.leading = true;
                let members = std::mem::take(&mut state.queue);
                drop(state);
                // Even if committing panics, the next writer must be able to lead and every
                // member must get an answer.
                let leader = Leader {
                    group,
                    members: &members,
                };
                self.commit_group(&members);
                drop(leader);
                state = group.state.lock().unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            state = group
                .done
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Durable write transactions committed by the group so far (for tests and stats).
    pub fn group_transactions(&self) -> u64 {
        self.group
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .transactions
    }

    /// Commits `members` in one transaction and sets each one's result. If any batch is
    /// refused, that transaction is dropped and each batch is committed on its own, so a
    /// refusal reaches only its writer.
    pub(crate) fn commit_group(&self, members: &[Arc<Pending>]) {
        // Each member's answer names the store, and a panic in redb fails them all.
        if members.len() > 1 {
            let together = self
                .health
                .catch(|| self.try_together(members))
                .unwrap_or_else(|damaged| Err(Some(damaged.into())));
            match together {
                Ok(results) => {
                    for (m, r) in members.iter().zip(results) {
                        m.set(Ok(r));
                    }
                    return;
                }
                Err(Some(e)) => {
                    let reason = e.in_store(&self.root).to_string();
                    for m in members {
                        m.set(Err(WriteError::Commit {
                            reason: reason.clone(),
                        }));
                    }
                    return;
                }
                Err(None) => {}
            }
        }
        for m in members {
            m.set(self.health.run(|| self.write_alone(&m.batch)));
        }
    }

    /// All of `members` in one transaction. `Err(None)`: a batch was refused, nothing was
    /// committed; `Err(Some(e))`: the transaction failed.
    fn try_together(
        &self,
        members: &[Arc<Pending>],
    ) -> Result<Vec<WriteOutcome>, Option<WriteError>> {
        let (txn, len_before) = self.begin_write().map_err(Some)?;
        let mut outcomes = Vec::with_capacity(members.len());
        for m in members {
            match self.write_in(&txn, &m.batch) {
                Ok(o) => outcomes.push(o),
                // Out of space is the transaction's failure, not one batch's refusal.
                Err(e) if e.is_out_of_space() => {
                    return Err(Some(self.after_failed_write(len_before, e)));
                }
                Err(_) => {
                    let _ = txn.abort();
                    return Err(None);
                }
            }
        }
        txn.commit()
            .storage()
            .map_err(|e| Some(self.after_failed_write(len_before, e.into())))?;
        Ok(outcomes)
    }

    /// One batch in its own transaction.
    pub(crate) fn write_alone(&self, batch: &WriteBatch) -> Result<WriteOutcome, WriteError> {
        let (txn, len_before) = self.begin_write()?;
        let written = self.write_in(&txn, batch).and_then(|outcome| {
            txn.commit().storage()?;
            Ok(outcome)
        });
        written.map_err(|e| self.after_failed_write(len_before, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EntryKind, OpenOptions, PreparedBlob, Tree, TreeEntry};

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = camino::Utf8Path::from_path(dir.path())
            .expect("utf8")
            .join("s");
        let store = Store::open(
            &root,
            &OpenOptions {
                create: true,
                ..OpenOptions::default()
            },
        )
        .expect("store");
        (dir, store)
    }

    fn blob_batch(content: &[u8]) -> WriteBatch {
        let mut b = WriteBatch::new();
        b.add_blob(PreparedBlob::new(content));
        b
    }

    #[test]
    fn a_refused_batch_in_a_group_fails_alone_and_leaves_nothing() {
        let (_dir, store) = store();
        let missing = crate::BlobId::of(b"never stored");
        let mut dangling = blob_batch(b"blob of the refused batch");
        dangling.add_tree(
            Tree::new(vec![TreeEntry {
                name: b"f".to_vec(),
                kind: EntryKind::File,
                id: missing.into(),
                size: 12,
            }])
            .expect("tree"),
        );
        let members: Vec<Arc<Pending>> = [blob_batch(b"first"), dangling, blob_batch(b"third")]
            .into_iter()
            .map(|batch| {
                Arc::new(Pending {
                    batch,
                    result: Mutex::new(None),
                })
            })
            .collect();
        store.commit_group(&members);
        let results: Vec<_> = members.iter().map(|m| m.take().expect("result")).collect();
        assert!(results[0].is_ok() && results[2].is_ok());
        assert!(matches!(results[1], Err(WriteError::Dangling { .. })));
        let reader = store.reader().expect("reader");
        assert!(reader.has_blob(crate::BlobId::of(b"first")).expect("read"));
        assert!(reader.has_blob(crate::BlobId::of(b"third")).expect("read"));
        assert!(
            !reader
                .has_blob(crate::BlobId::of(b"blob of the refused batch"))
                .expect("read"),
            "the refused batch's blob was rolled back with it"
        );
        assert_eq!(
            reader.blob(crate::BlobId::of(b"third")).expect("bytes"),
            b"third"
        );
    }

    #[test]
    fn concurrent_writers_all_land_and_share_transactions() {
        let (_dir, store) = store();
        let store = &store;
        std::thread::scope(|s| {
            for t in 0..8 {
                s.spawn(move || {
                    for i in 0..20 {
                        let content = format!("thread {t} batch {i}");
                        store.write(&blob_batch(content.as_bytes())).expect("write");
                    }
                });
            }
        });
        let reader = store.reader().expect("reader");
        for t in 0..8 {
            for i in 0..20 {
                let content = format!("thread {t} batch {i}");
                assert_eq!(
                    reader
                        .blob(crate::BlobId::of(content.as_bytes()))
                        .expect("stored"),
                    content.as_bytes()
                );
            }
        }
        let transactions = store.group_transactions();
        eprintln!("160 concurrent batches in {transactions} transactions");
        assert!(
            transactions < 160,
            "writers that overlap share transactions ({transactions} for 160 batches)"
        );
    }
}
