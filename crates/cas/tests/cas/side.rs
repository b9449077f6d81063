//! Side tables: owners' records committed with objects, and what `gc` and `fsck` ask of
//! their owners.

use camino::Utf8Path;
use cas::*;

use crate::util::{commit, noise, temp_store};

const NOTES: SideTable = SideTable::new("test.notes");
const BY_OBJECT: SideTable = SideTable::keyed_by_object("test.by_object");

/// An owner whose entries in `NOTES` each keep the snapshot their value names, and which
/// asks `gc` to drop entries whose key starts with `old`.
struct Notes;

impl SideOwner for Notes {
    fn roots(&self, reader: &Reader, roots: &mut Roots) -> Result<(), BoxError> {
        for (scope, key, value) in reader.side_entries(NOTES)? {
            if key.starts_with(b"old") {
                roots.drop.push(SideKey {
                    table: NOTES,
                    scope,
                    key,
                });
                continue;
            }
            let hex = std::str::from_utf8(&value)?;
            roots.snapshots.push(hex.parse()?);
        }
        Ok(())
    }

    fn check(&self, reader: &Reader) -> Result<Checked, BoxError> {
        let mut out = Checked::default();
        for (scope, _, value) in reader.side_entries(NOTES)? {
            out.references += 1;
            let id: SnapshotId = std::str::from_utf8(&value)?.parse()?;
            if !reader.has_snapshot(id)? {
                out.problems
                    .push(Problem::new("note", scope, format!("{id} is missing")));
            }
        }
        Ok(out)
    }

    fn name(&self) -> &'static str {
        "notes"
    }
}

/// An owner that cannot say what it keeps.
struct Broken;

impl SideOwner for Broken {
    fn roots(&self, _: &Reader, _: &mut Roots) -> Result<(), BoxError> {
        Err("its records are unreadable".into())
    }
    fn check(&self, _: &Reader) -> Result<Checked, BoxError> {
        Err("its records are unreadable".into())
    }
    fn name(&self) -> &'static str {
        "broken"
    }
}

fn note(batch: &mut WriteBatch, scope: &str, key: &[u8], id: SnapshotId) {
    batch.put_side(NOTES, scope, key, id.to_hex().into_bytes());
    batch.require_snapshots([id]);
}

#[test]
fn side_entries_round_trip_by_scope_and_sequence() {
    let t = temp_store();
    let a = commit(&t.store, &[("a", b"1")], vec![], "a");
    let mut batch = WriteBatch::new();
    note(&mut batch, "/work/agent-1", b"k", a);
    note(&mut batch, "/work/agent-10", b"k", a);
    batch.append_side(NOTES, "/log/agent-1", b"first".to_vec());
    batch.append_side(NOTES, "/log/agent-1", b"second".to_vec());
    batch.append_side(NOTES, "/log/agent-10", b"other".to_vec());
    let out = t.store.write(&batch).unwrap();
    assert_eq!(out.appended, vec![1, 2, 1], "sequences are per scope");

    let r = t.store.reader().unwrap();
    assert_eq!(
        r.side_get(NOTES, "/work/agent-1", b"k").unwrap(),
        Some(a.to_hex().into_bytes())
    );
    assert_eq!(r.side_get(NOTES, "/work/agent-1", b"x").unwrap(), None);
    let log = r.side_scope(NOTES, "/log/agent-1").unwrap();
    assert_eq!(
        log.iter()
            .map(|(k, v)| (sequence_of(k).unwrap(), v.as_slice()))
            .collect::<Vec<_>>(),
        vec![(1, &b"first"[..]), (2, &b"second"[..])],
        "a scope holds only its own entries, in order"
    );
    assert_eq!(
        r.side_last(NOTES, "/log/agent-1").unwrap().unwrap().1,
        b"second"
    );
    assert_eq!(r.side_entries(NOTES).unwrap().len(), 5);
    assert!(
        r.side_scope(SideTable::new("test.never-written"), "/")
            .unwrap()
            .is_empty()
    );
    drop(r);

    // Changes apply in the order given: clear, then put.
    let mut batch = WriteBatch::new();
    batch.clear_side_scope(NOTES, "/log/agent-1");
    batch.put_side(NOTES, "/log/agent-1", &sequence_key(7), b"after".to_vec());
    batch.remove_side(NOTES, "/work/agent-10", b"k");
    t.store.write(&batch).unwrap();
    let r = t.store.reader().unwrap();
    assert_eq!(
        r.side_scope(NOTES, "/log/agent-1").unwrap(),
        vec![(sequence_key(7).to_vec(), b"after".to_vec())]
    );
    assert_eq!(r.side_get(NOTES, "/work/agent-10", b"k").unwrap(), None);
    assert!(r.side_get(NOTES, "/work/agent-1", b"k").unwrap().is_some());
}

#[test]
fn a_write_naming_a_missing_snapshot_stores_nothing() {
    let t = temp_store();
    let missing = SnapshotId::from_bytes([7; 32]);
    let mut batch = WriteBatch::new();
    note(&mut batch, "/w", b"k", missing);
    let err = t.store.write(&batch).unwrap_err();
    assert!(matches!(err, WriteError::Dangling { .. }), "{err}");
    assert_eq!(
        t.store
            .reader()
            .unwrap()
            .side_get(NOTES, "/w", b"k")
            .unwrap(),
        None
    );
}

#[test]
fn appending_to_a_scope_of_other_keys_is_refused() {
    let t = temp_store();
    let mut batch = WriteBatch::new();
    batch.put_side(NOTES, "/w", b"name", b"v".to_vec());
    t.store.write(&batch).unwrap();
    let mut batch = WriteBatch::new();
    batch.append_side(NOTES, "/w", b"x".to_vec());
    let err = t.store.write(&batch).unwrap_err();
    assert!(matches!(err, WriteError::NotASequence { .. }), "{err}");
}

#[test]
fn every_write_to_a_scope_gives_it_a_new_version() {
    let t = temp_store();
    let before = t.store.side_version(NOTES, "/a");
    let other = t.store.side_version(NOTES, "/b");
    let mut batch = WriteBatch::new();
    batch.put_side(NOTES, "/a", b"k", b"v".to_vec());
    t.store.write(&batch).unwrap();
    assert_ne!(t.store.side_version(NOTES, "/a"), before);
    assert_eq!(t.store.side_version(NOTES, "/b"), other);
}

#[test]
fn gc_keeps_what_owners_name_and_drops_what_they_ask() {
    let mut t = temp_store();
    let kept = commit(&t.store, &[("k", b"kept by a note")], vec![], "kept");
    let by_old = commit(&t.store, &[("o", b"only an old note")], vec![], "old");
    let garbage_blob = noise(3, 100_000);
    let garbage = commit(&t.store, &[("g", &garbage_blob)], vec![], "garbage");
    let mut batch = WriteBatch::new();
    note(&mut batch, "/w", b"current", kept);
    note(&mut batch, "/w", b"old-1", by_old);
    // Entries about objects: one live, one that goes with the garbage.
    batch.put_side(BY_OBJECT, "", kept.as_bytes(), b"kept".to_vec());
    batch.put_side(BY_OBJECT, "", garbage.as_bytes(), b"gone".to_vec());
    t.store.write(&batch).unwrap();

    let dry = t
        .store
        .gc(
            &StoreGcOptions {
                dry_run: true,
                ..StoreGcOptions::default()
            },
            &[&Notes],
        )
        .unwrap();
    assert_eq!(dry.dropped.len(), 1);
    assert_eq!(
        dry.removed.len(),
        6,
        "two snapshots, trees, blobs: {:?}",
        dry.removed
    );
    let r = t.store.reader().unwrap();
    assert!(r.has_snapshot(by_old).unwrap(), "a dry run removes nothing");
    assert!(r.side_get(NOTES, "/w", b"old-1").unwrap().is_some());
    drop(r);

    let out = t.store.gc(&StoreGcOptions::default(), &[&Notes]).unwrap();
    assert_eq!(out.dropped[0].key, b"old-1");
    let r = t.store.reader().unwrap();
    assert!(r.has_snapshot(kept).unwrap());
    assert!(!r.has_snapshot(by_old).unwrap());
    assert!(!r.has_snapshot(garbage).unwrap());
    assert_eq!(r.side_get(NOTES, "/w", b"old-1").unwrap(), None);
    assert_eq!(
        r.side_of_object(BY_OBJECT, kept.into()).unwrap(),
        Some(b"kept".to_vec())
    );
    assert_eq!(
        r.side_of_object(BY_OBJECT, garbage.into()).unwrap(),
        None,
        "an entry keyed by object goes with its object"
    );
    drop(r);
    let fsck = t
        .store
        .fsck(&StoreFsckOptions::default(), &[&Notes])
        .unwrap();
    assert!(fsck.problems.is_empty(), "{:?}", fsck.problems);
    assert_eq!(fsck.references, 1, "the one note left");
}

#[test]
fn without_its_owner_a_record_keeps_nothing_alive() {
    let mut t = temp_store();
    let s = commit(&t.store, &[("a", b"x")], vec![], "s");
    let mut batch = WriteBatch::new();
    note(&mut batch, "/w", b"k", s);
    t.store.write(&batch).unwrap();
    t.store.gc(&StoreGcOptions::default(), &[]).unwrap();
    assert!(!t.store.reader().unwrap().has_snapshot(s).unwrap());
    let fsck = t
        .store
        .fsck(&StoreFsckOptions::default(), &[&Notes])
        .unwrap();
    assert_eq!(fsck.problems.len(), 1, "{:?}", fsck.problems);
    assert_eq!(fsck.problems[0].kind, "note");
}

#[test]
fn gc_stops_before_removing_anything_when_an_owner_cannot_answer() {
    let mut t = temp_store();
    let s = commit(&t.store, &[("a", b"x")], vec![], "unreferenced");
    let err = t
        .store
        .gc(&StoreGcOptions::default(), &[&Broken])
        .unwrap_err();
    assert!(
        matches!(
            err,
            MaintenanceError::Owner {
                owner: "broken",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("nothing removed"), "{err}");
    assert!(t.store.reader().unwrap().has_snapshot(s).unwrap());
    let fsck = t
        .store
        .fsck(&StoreFsckOptions::default(), &[&Broken])
        .unwrap();
    assert!(
        fsck.problems
            .iter()
            .any(|p| p.kind == "store" && p.name == "broken"),
        "{:?}",
        fsck.problems
    );
}

#[test]
fn gc_stops_while_an_operation_is_under_way_anywhere() {
    let mut t = temp_store();
    let s = commit(&t.store, &[("a", b"x")], vec![], "unreferenced");
    let mut batch = WriteBatch::new();
    batch.set_journal(
        Utf8Path::new("/some/dir"),
        Some(br#"{"op":"test"}"#.to_vec()),
    );
    t.store.write(&batch).unwrap();
    let err = t.store.gc(&StoreGcOptions::default(), &[]).unwrap_err();
    assert!(matches!(err, MaintenanceError::Interrupted { .. }), "{err}");
    assert!(t.store.reader().unwrap().has_snapshot(s).unwrap());
    assert_eq!(
        t.store.reader().unwrap().journaled_dirs().unwrap(),
        vec![Utf8Path::new("/some/dir").to_owned()]
    );
    let mut batch = WriteBatch::new();
    batch.set_journal(Utf8Path::new("/some/dir"), None);
    t.store.write(&batch).unwrap();
    t.store.gc(&StoreGcOptions::default(), &[]).unwrap();
    assert!(!t.store.reader().unwrap().has_snapshot(s).unwrap());
}

#[test]
fn a_prefix_lookup_reads_only_its_scope_and_keys_starting_with_it() {
    let t = temp_store();
    let mut batch = WriteBatch::new();
    for key in [&b"ab"[..], b"abc", b"abd", b"ac", b"b"] {
        batch.put_side(NOTES, "s", key, key.to_vec());
    }
    // The next scope, and one that extends this scope's name.
    batch.put_side(NOTES, "s\0", b"ab", b"ab".to_vec());
    batch.put_side(NOTES, "sa", b"abz", b"abz".to_vec());
    t.store.write(&batch).unwrap();
    let r = t.store.reader().unwrap();
    let found = |scope: &str, prefix: &[u8]| {
        let mut out = Vec::new();
        r.side_prefix_each(NOTES, scope, prefix, |k, v| {
            assert_eq!(k, v);
            out.push(String::from_utf8(k.to_vec()).unwrap());
            true
        })
        .unwrap();
        out
    };
    assert_eq!(found("s", b"ab"), ["ab", "abc", "abd"]);
    assert_eq!(found("s", b"abc"), ["abc"]);
    assert_eq!(found("s", b"b"), ["b"]);
    assert!(found("s", b"c").is_empty());
    assert_eq!(found("s", b"").len(), 5);
    assert!(found("t", b"").is_empty());
    assert!(
        found("s\0", b"a") == ["ab"] && found("sa", b"ab") == ["abz"],
        "each scope its own"
    );
    // Stopped by its callback.
    let mut seen = 0;
    r.side_prefix_each(NOTES, "s", b"a", |_, _| {
        seen += 1;
        false
    })
    .unwrap();
    assert_eq!(seen, 1);
}
