//! Group commit. When several threads of one process (`cairn serve`'s requests) write at
//! the same time, the first becomes the leader and commits every batch that queued up
//! meanwhile in one durable transaction: one fsync for the group instead of one each. Each
//! batch stays all-or-nothing on its own: if one fails its checks (a dangling reference),
//! the group's transaction is dropped and every batch is committed alone, so only that
//! writer gets the error.

use std::sync::{Arc, Condvar, Mutex, PoisonError};

use super::batch::{WriteBatch, WriteOutcome};
use super::error::WriteError;

/// Batches larger than this ([`WriteBatch::held_bytes`]) commit on their own, uncopied.
pub(crate) const GROUP_MAX_BYTES: u64 = 4 << 20;

#[derive(Default)]
pub(crate) struct Group {
    pub(super) state: Mutex<State>,
    pub(super) done: Condvar,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) queue: Vec<Arc<Pending>>,
    pub(super) leading: bool,
    pub(super) transactions: u64,
}

pub(crate) struct Pending {
    pub(super) batch: WriteBatch,
    /// Its small blobs, compressed together (see `frame`).
    pub(super) frames: Vec<super::frame::Frame>,
    pub(super) result: Mutex<Option<Result<WriteOutcome, WriteError>>>,
}

impl Pending {
    pub(super) fn set(&self, r: Result<WriteOutcome, WriteError>) {
        *self.result.lock().unwrap_or_else(PoisonError::into_inner) = Some(r);
    }

    pub(super) fn take(&self) -> Option<Result<WriteOutcome, WriteError>> {
        self.result
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// Hands leadership back when a group is done (or its commit panicked).
pub(super) struct Leader<'a> {
    pub(super) group: &'a Group,
    pub(super) members: &'a [Arc<Pending>],
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::handle::Store;
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
                    frames: Vec::new(),
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
