//! Damaged or hostile packs, indexes and refs: refused, naming what, never a panic.

use cas::*;
use remote::{Need, RefUpdate, RemoteError, Silent, fetch, gc, push, refs};

use crate::util::*;

#[test]
fn a_flipped_byte_in_a_pack_is_refused_naming_the_object_and_the_remote() {
    let f = Fixture::new();
    let a = f.store("a");
    let id = commit(&a, &files(1), vec![]);
    let remote = f.remote();
    push(&remote, &a, &[id], &Silent).unwrap();
    // Flip one byte near the end of every pack (inside the last object's payload).
    for pack in std::fs::read_dir(f.root.join("remote/packs")).unwrap() {
        let path = pack.unwrap().path();
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes.len() - 3;
        bytes[at] ^= 0x40;
        std::fs::write(&path, bytes).unwrap();
    }
    let b = f.store("b");
    let err = fetch(&remote, &b, &[id], Need::Closure, &Silent).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, RemoteError::Corrupt { .. }), "{text}");
    assert!(
        text.contains("origin") && text.contains("object "),
        "{text}"
    );
    let reader = b.reader().unwrap();
    assert!(
        !reader.has_snapshot(id).unwrap(),
        "nothing of it is visible"
    );
}

#[test]
fn an_index_placing_an_object_past_the_end_of_any_pack_is_refused_not_a_panic() {
    let f = Fixture::new();
    let a = f.store("a");
    let id = commit(&a, &files(1), vec![]);
    let remote = f.remote();
    push(&remote, &a, &[id], &Silent).unwrap();
    // offset = u64::MAX - 2: offset + len overflows.
    rewrite_indexes(&f.root, |entry| {
        entry[42..50].copy_from_slice(&(u64::MAX - 2).to_le_bytes())
    });
    let b = f.store("b");
    // Every index is skipped, each named with what is wrong with it: nothing is on the
    // remote any more.
    let catalog = remote::Catalog::sync(&remote, &b).unwrap();
    assert!(catalog.is_empty().unwrap());
    assert!(!catalog.warnings().is_empty());
    for warning in catalog.warnings() {
        assert!(warning.contains("past the end"), "{warning}");
    }
    let err = fetch(&remote, &b, &[id], Need::Closure, &Silent).unwrap_err();
    assert!(matches!(err, RemoteError::NotOnRemote { .. }), "{err}");
    assert!(!b.reader().unwrap().has_snapshot(id).unwrap());
}

#[test]
fn an_index_or_ref_larger_than_any_cairn_writes_is_refused_unread() {
    let f = Fixture::new();
    let a = f.store("a");
    let id = commit(&a, &files(1), vec![]);
    let remote = f.remote();
    push(&remote, &a, &[id], &Silent).unwrap();
    refs::update(&remote, "main", RefUpdate::Set(id), None).unwrap();

    // A sparse 1 TiB index: reading it whole would exhaust memory. It is skipped unread,
    // named with its size, and the rest of the remote still serves.
    let huge = f.root.join("remote/index").join("f".repeat(64));
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    let b = f.store("b");
    let got = fetch(&remote, &b, &[id], Need::Closure, &Silent).unwrap();
    assert_eq!(got.warnings.len(), 1, "{:?}", got.warnings);
    let text = &got.warnings[0];
    assert!(
        text.contains(&"f".repeat(64)) && text.contains("1099511627776 bytes"),
        "{text}"
    );
    assert_eq!(files_of(&b, id), as_map(&files(1)));
    std::fs::remove_file(&huge).unwrap();

    let entry = std::fs::read_dir(f.root.join("remote/refs/main"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::File::options()
        .write(true)
        .open(&entry)
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    let err = refs::get(&remote, "main").unwrap_err();
    assert!(matches!(err, RemoteError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("refs/main"), "{err}");
}

#[test]
fn junk_under_index_is_skipped_and_named_and_every_pull_and_push_goes_on() {
    let f = Fixture::new();
    let a = f.store("a");
    let one = commit(&a, &files(1), vec![]);
    let remote = f.remote();
    push(&remote, &a, &[one], &Silent).unwrap();
    let index = f.root.join("remote/index");
    // A damaged index of a pack that is not there, a stray file, and a name no key can
    // have.
    let junk = "ab".repeat(32);
    std::fs::write(index.join(&junk), b"not an index").unwrap();
    std::fs::write(index.join("README"), b"notes").unwrap();
    std::fs::write(index.join("bad\u{1}name"), b"x").unwrap();

    let b = f.store("b");
    let got = fetch(&remote, &b, &[one], Need::History, &Silent).unwrap();
    assert_eq!(files_of(&b, one), as_map(&files(1)));
    assert_eq!(got.warnings.len(), 3, "{:?}", got.warnings);
    for name in [junk.as_str(), "README", "bad"] {
        assert!(
            got.warnings
                .iter()
                .any(|w| w.contains(name) && w.contains("origin")),
            "{name}: {:?}",
            got.warnings
        );
    }
    let two = commit(&a, &files(2), vec![one]);
    let pushed = push(&remote, &a, &[two], &Silent).unwrap();
    // This store's listing starts after what it saw last, and the junk sorts before
    // that: it is not met again; a store that lists whole names all three.
    assert!(pushed.warnings.is_empty(), "{pushed:?}");
    fetch(&remote, &b, &[two], Need::History, &Silent).unwrap();
    assert_eq!(files_of(&b, two), as_map(&files(2)));
    let whole = f.store("whole");
    let fresh = fetch(&remote, &whole, &[two], Need::History, &Silent).unwrap();
    assert_eq!(fresh.warnings.len(), 3, "{fresh:?}");
    assert_eq!(files_of(&whole, two), as_map(&files(2)));
    drop(whole);

    // Two snapshots no ref reaches, the index of one's pack damaged: remote gc deletes
    // the other's pack and leaves the pack it cannot read alone.
    let lone = [
        commit(&a, &[("lone", b"1".to_vec())], vec![]),
        commit(&a, &[("lone", b"2".to_vec())], vec![]),
    ];
    for id in lone {
        push(&remote, &a, &[id], &Silent).unwrap();
    }
    let pack_of = |id: SnapshotId| {
        remote_packs(&f.root)
            .into_iter()
            .find(|(_, e, _)| e.kind == ObjectKind::Snapshot && e.id == id.into())
            .map(|(p, _, _)| p)
            .unwrap()
    };
    let (damaged, deleted) = (pack_of(lone[0]), pack_of(lone[1]));
    let damaged_index = index_path(&f.root, &damaged);
    std::fs::write(&damaged_index, b"damaged").unwrap();
    refs::update(&remote, "main", RefUpdate::Set(two), None).unwrap();
    // From a store that never read that index: the pushing one knows it from its push.
    gc(&remote, &f.store("c"), &NOW).unwrap();
    assert!(f.root.join("remote/packs").join(&damaged).exists());
    assert!(damaged_index.exists());
    assert!(!f.root.join("remote/packs").join(&deleted).exists());
    assert!(index.join(&junk).exists(), "junk is not cairn's to delete");
}
