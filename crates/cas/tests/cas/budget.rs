//! `gc` under a size budget: history goes oldest first, keepers stay, and the history it
//! cuts is no damage.

use cas::*;

use crate::util::{TempStore, commit, noise, temp_store};

const JOURNAL: SideTable = SideTable::new("test.journal");

/// Each `JOURNAL` entry is history keeping the snapshot its value names, made at the
/// second its sequence number gives; `head` is kept whatever the budget.
struct Journal {
    head: SnapshotId,
}

impl SideOwner for Journal {
    fn roots(&self, reader: &Reader, roots: &mut Roots) -> Result<(), BoxError> {
        roots.keep(self.head, Keeper::new("worktree head").of("/w"));
        for (scope, key, value) in reader.side_entries(JOURNAL)? {
            let seq = sequence_of(&key).ok_or("not a sequence")?;
            roots.history.push(HistoryEntry {
                time: jiff::Timestamp::from_second(i64::try_from(seq)?)?,
                snapshots: vec![std::str::from_utf8(&value)?.parse()?],
                key: SideKey {
                    table: JOURNAL,
                    scope,
                    key,
                },
                part: None,
            });
        }
        Ok(())
    }

    fn check(&self, _: &Reader) -> Result<Checked, BoxError> {
        Ok(Checked::default())
    }

    fn name(&self) -> &'static str {
        "journal"
    }
}

const BIG: usize = 700 << 10;

/// s[0] <- s[1] <- ... <- s[7], each with its own large file and a journal entry; ref
/// `keep` on s[1], the journal's head s[7].
fn chain(t: &TempStore) -> (Vec<SnapshotId>, Journal) {
    chain_of(t, [BIG; 8])
}

/// [`chain`] with files of these sizes.
fn chain_of(t: &TempStore, sizes: [usize; 8]) -> (Vec<SnapshotId>, Journal) {
    let mut chain: Vec<SnapshotId> = Vec::new();
    for (i, size) in (0..8u64).zip(sizes) {
        let big = noise(i, size);
        let id = commit(
            &t.store,
            &[("big", &big[..])],
            chain.last().copied().into_iter().collect(),
            &format!("step {i}"),
        );
        let mut batch = WriteBatch::new();
        batch.append_side(JOURNAL, "", id.to_hex().into_bytes());
        t.store.write(&batch).unwrap();
        chain.push(id);
    }
    t.store.set_ref("keep", chain[1]).unwrap();
    let head = chain[7];
    (chain, Journal { head })
}

/// Which of `chain` are stored.
fn present(t: &TempStore, chain: &[SnapshotId]) -> Vec<bool> {
    let r = t.store.reader().unwrap();
    chain
        .iter()
        .map(|id| r.has_snapshot(*id).unwrap())
        .collect()
}

#[test]
fn a_budget_drops_history_oldest_first_and_keeps_what_is_named() {
    let mut t = temp_store();
    let (chain, owner) = chain(&t);

    // Without a budget everything stays (the journal and the ancestry keep it).
    let out = t.store.gc(&StoreGcOptions::default(), &[&owner]).unwrap();
    assert!(out.removed.is_empty());

    // Between what the keepers hold (1.4 MB) and the whole store (5.8 MB); redb's file takes
    // about 90 KB more than the stored bytes at this size.
    let budget = 4 << 20;
    assert!(store_bytes(&t.root) > budget);
    let options = StoreGcOptions {
        max_size: Some(budget),
        ..StoreGcOptions::default()
    };
    let out = t.store.gc(&options, &[&owner]).unwrap();
    assert!(out.store_bytes_after <= budget, "{out:?}");
    assert_eq!(out.store_bytes_after, store_bytes(&t.root));
    assert!(out.file_bytes_after <= budget);

    let present = present(&t, &chain);
    let r = t.store.reader().unwrap();
    assert!(
        present[1] && present[7],
        "the ref and the head stay: {present:?}"
    );
    assert!(!present[0], "the oldest goes first: {present:?}");
    // What stays of the rest is the newest of it: no kept one is older than a dropped one.
    let optional: Vec<bool> = [0, 2, 3, 4, 5, 6].iter().map(|&i| present[i]).collect();
    let first_kept = optional.iter().position(|&p| p).unwrap_or(optional.len());
    assert!(optional[first_kept..].iter().all(|&p| p), "{present:?}");
    assert!(
        optional.contains(&false),
        "the budget dropped something: {present:?}"
    );
    assert!(present[6], "the newest of the history fits: {present:?}");

    // A dropped snapshot's journal entry went with it; a kept one's stayed.
    let entries = r.side_entries(JOURNAL).unwrap();
    let journal: Vec<String> = entries
        .iter()
        .map(|(_, _, v)| String::from_utf8(v.clone()).unwrap())
        .collect();
    for (id, here) in chain.iter().zip(&present) {
        assert_eq!(journal.contains(&id.to_hex()), *here, "{id}");
    }
    assert_eq!(out.dropped.len(), present.iter().filter(|p| !**p).count());

    // `retained`: the ref first, then the head, each with the bytes only it keeps.
    let reasons: Vec<(&str, Option<&str>, SnapshotId)> = out
        .retained
        .iter()
        .map(|k| (k.keeper.reason, k.keeper.name.as_deref(), k.snapshot))
        .collect();
    assert_eq!(
        reasons,
        vec![
            ("ref", Some("keep"), chain[1]),
            ("worktree head", None, chain[7])
        ]
    );
    assert!(out.retained.iter().all(|k| k.bytes > BIG as u64));

    // The cut history is recorded, and is no damage: fsck is clean, log ends there, a
    // plain gc runs.
    let oldest_kept = (0..7).rev().take_while(|&i| present[i]).last().unwrap_or(7);
    let cut = r.snapshot(chain[oldest_kept]).unwrap().parents[0];
    assert!(r.pruned(cut).unwrap() && !r.has_snapshot(cut).unwrap());
    assert!(r.pruned(chain[0]).unwrap(), "the ref's parent was cut too");
    let log = r.log(chain[7], None).unwrap();
    assert_eq!(log.len(), 8 - oldest_kept);
    drop(r);
    let fsck = t
        .store
        .fsck(&StoreFsckOptions::default(), &[&owner])
        .unwrap();
    assert!(fsck.problems.is_empty(), "{:?}", fsck.problems);
    let out = t.store.gc(&StoreGcOptions::default(), &[&owner]).unwrap();
    assert!(out.removed.is_empty(), "{out:?}");
    assert!(t.store.reader().unwrap().pruned(cut).unwrap(), "still cut");
}

/// A mount layer in the store folder is no business of gc: however large, gc drops the
/// same history as in the same store without it.
#[test]
fn a_mount_layer_in_the_store_folder_does_not_cost_history() {
    let options = StoreGcOptions {
        max_size: Some(4 << 20),
        ..StoreGcOptions::default()
    };
    let mut plain = temp_store();
    let (plain_chain, owner) = chain(&plain);
    plain.store.gc(&options, &[&owner]).unwrap();
    let expected = present(&plain, &plain_chain);
    assert!(expected[6], "the newest history fits: {expected:?}");

    let mut t = temp_store();
    let (chain, owner) = chain(&t);
    let layer = t.root.join("mounts").join("x");
    std::fs::create_dir_all(&layer).unwrap();
    let live = noise(99, 10 << 20);
    std::fs::write(layer.join("live.bin"), &live).unwrap();
    let out = t.store.gc(&options, &[&owner]).unwrap();
    assert!(out.file_bytes_after <= 4 << 20, "{out:?}");
    assert!(
        out.store_bytes_after > 10 << 20,
        "the layer counts there: {out:?}"
    );
    assert_eq!(present(&t, &chain), expected);
    assert_eq!(std::fs::read(layer.join("live.bin")).unwrap(), live);
}

/// A budget that even the keepers alone, with the file's own overhead, do not fit in cuts
/// history to fit the stored bytes once, and no further: more would free nothing that helps.
#[test]
fn a_budget_out_of_reach_drops_only_what_does_not_fit_the_stored_bytes() {
    let mut t = temp_store();
    // The newest history entry holds a small file: the ref's and the head's files and it fit
    // what gc aims for (the budget less a 32nd) as stored bytes, while the ref's and the
    // head's alone with the file's overhead (about 80 KB) do not.
    let mut sizes = [BIG; 8];
    sizes[6] = 20 << 10;
    let (chain, owner) = chain_of(&t, sizes);
    let budget = 2 * BIG as u64 + (90 << 10);
    let out = t
        .store
        .gc(
            &StoreGcOptions {
                max_size: Some(budget),
                ..StoreGcOptions::default()
            },
            &[&owner],
        )
        .unwrap();
    assert!(out.file_bytes_after > budget, "out of reach: {out:?}");
    let present = present(&t, &chain);
    assert_eq!(
        present,
        [false, true, false, false, false, false, true, true],
        "the newest history entry fits the stored bytes and stays"
    );
}

const SPARE: SideTable = SideTable::new("test.spare");

/// The [`Journal`]'s history, plus each `SPARE` entry as a spare entry keeping the
/// snapshot its value names, used at the second its sequence number gives past
/// 1,000,000 (newer than any history), and `trees` kept as trees.
struct WithSpare {
    journal: Journal,
    trees: Vec<TreeId>,
}

impl SideOwner for WithSpare {
    fn roots(&self, reader: &Reader, roots: &mut Roots) -> Result<(), BoxError> {
        self.journal.roots(reader, roots)?;
        roots.trees.extend(&self.trees);
        for (scope, key, value) in reader.side_entries(SPARE)? {
            let seq = sequence_of(&key).ok_or("not a sequence")?;
            roots.spare.push(HistoryEntry {
                time: jiff::Timestamp::from_second(1_000_000 + i64::try_from(seq)?)?,
                snapshots: vec![std::str::from_utf8(&value)?.parse()?],
                key: SideKey {
                    table: SPARE,
                    scope,
                    key,
                },
                part: None,
            });
        }
        Ok(())
    }

    fn check(&self, _: &Reader) -> Result<Checked, BoxError> {
        Ok(Checked::default())
    }

    fn name(&self) -> &'static str {
        "spare"
    }
}

/// Spare entries (dependency layers no worktree uses) stay without a budget; under one
/// they go before any history, least recent first, though they are newer than all of it;
/// a kept tree stays whatever the budget, without the snapshot it came from.
#[test]
fn a_budget_drops_spare_entries_before_history_and_keeps_kept_trees() {
    let mut t = temp_store();
    let (chain, journal) = chain(&t);
    let spares: Vec<SnapshotId> = (0..3u64)
        .map(|i| {
            let big = noise(100 + i, BIG);
            let id = commit(&t.store, &[("big", &big[..])], vec![], "spare");
            let mut batch = WriteBatch::new();
            batch.append_side(SPARE, "", id.to_hex().into_bytes());
            t.store.write(&batch).unwrap();
            id
        })
        .collect();
    let kept_file = noise(200, BIG);
    let holder = commit(&t.store, &[("big", &kept_file[..])], vec![], "holder");
    let kept_tree = t.store.reader().unwrap().snapshot(holder).unwrap().tree;
    let owner = WithSpare {
        journal,
        trees: vec![kept_tree],
    };

    let out = t.store.gc(&StoreGcOptions::default(), &[&owner]).unwrap();
    assert_eq!(
        out.removed,
        vec![(ObjectKind::Snapshot, holder.into())],
        "without a budget only the tree's snapshot goes"
    );
    assert_eq!(present(&t, &spares), [true, true, true]);

    // Room for the keepers, the kept tree, all history and one spare (8 + 1 + 1 files of
    // 700 KB, about 7.3 MB with redb's overhead, within what gc aims for), not two.
    let options = StoreGcOptions {
        max_size: Some(7_900_000),
        ..StoreGcOptions::default()
    };
    t.store.gc(&options, &[&owner]).unwrap();
    assert_eq!(present(&t, &chain), [true; 8], "no history goes");
    assert_eq!(
        present(&t, &spares),
        [false, false, true],
        "the least recent spares go, the most recent stays"
    );
    let r = t.store.reader().unwrap();
    assert_eq!(r.side_entries(SPARE).unwrap().len(), 1, "their entries too");
    let tree = r.tree(kept_tree).unwrap();
    let blob = tree.get(b"big").unwrap().blob().unwrap();
    assert_eq!(
        r.blob(blob).unwrap(),
        kept_file,
        "the kept tree's file stays"
    );
    drop(r);

    // Too little for all history: every spare goes before it, and the tree stays.
    let options = StoreGcOptions {
        max_size: Some(4 << 20),
        ..StoreGcOptions::default()
    };
    t.store.gc(&options, &[&owner]).unwrap();
    assert_eq!(present(&t, &spares), [false, false, false]);
    let history = present(&t, &chain);
    assert!(history[6] && !history[0], "{history:?}");
    assert!(t.store.reader().unwrap().has_tree(kept_tree).unwrap());
    let fsck = t
        .store
        .fsck(&StoreFsckOptions::default(), &[&owner])
        .unwrap();
    assert!(fsck.problems.is_empty(), "{:?}", fsck.problems);
}
