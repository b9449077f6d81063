//! Pushing a snapshot from one store and fetching it into another.

use cas::*;
use remote::{Need, RemoteError, Silent, fetch, push};

use crate::util::*;

#[test]
fn a_snapshot_pushed_from_one_store_checks_out_whole_in_another_and_only_what_is_missing_moves() {
    let f = Fixture::new();
    let a = f.store("a");
    let first = commit(&a, &files(1), vec![]);
    let second = commit(&a, &files(2), vec![first]);
    let remote = f.remote();

    let pushed = push(&remote, &a, &[second], &Silent).unwrap();
    assert_eq!(pushed.pushed, vec![second]);
    assert!(pushed.objects_sent > 10, "{pushed:?}");
    assert_eq!(pushed.objects_present, 0);
    // Again: nothing is sent.
    let again = push(&remote, &a, &[second], &Silent).unwrap();
    assert_eq!((again.objects_sent, again.bytes_sent), (0, 0), "{again:?}");
    assert_eq!(
        again.objects_present, 1,
        "the snapshot itself, with all it reaches"
    );

    // Store B fetches the second snapshot alone: its parent stays on the remote.
    let b = f.store("b");
    let got = fetch(&remote, &b, &[second], Need::Closure, &Silent).unwrap();
    assert!(got.objects_received > 0);
    let reader = b.reader().unwrap();
    assert!(reader.has_snapshot(second).unwrap());
    assert!(!reader.has_snapshot(first).unwrap());
    assert_eq!(
        reader.promised(first.into()).unwrap().as_deref(),
        Some("origin")
    );
    let from = a.reader().unwrap();
    let tree = reader.tree(reader.snapshot(second).unwrap().tree).unwrap();
    assert_eq!(
        tree,
        from.tree(from.snapshot(second).unwrap().tree).unwrap()
    );
    for (path, content) in files(2) {
        let id = BlobId::of(&content);
        assert_eq!(reader.blob(id).unwrap(), content, "{path}");
    }
    drop(reader);
    let fsck = b.fsck(&StoreFsckOptions::default(), &[]).unwrap();
    assert!(fsck.problems.is_empty(), "{:?}", fsck.problems);

    // Then the history: only the first snapshot's own objects come.
    let before = got.objects_received;
    let history = fetch(&remote, &b, &[second], Need::History, &Silent).unwrap();
    assert!(
        history.objects_received < before,
        "{history:?} after {got:?}"
    );
    assert!(b.reader().unwrap().has_snapshot(first).unwrap());
    assert_eq!(b.reader().unwrap().promised(first.into()).unwrap(), None);

    // B's new snapshot goes back; A fetches it, sending and receiving only the change.
    let third = commit(&b, &files(3), vec![second]);
    let back = push(&remote, &b, &[third], &Silent).unwrap();
    assert!(back.objects_present >= 1, "{back:?}");
    assert!(
        back.objects_sent < pushed.objects_sent,
        "{back:?} vs {pushed:?}"
    );
    let pulled = fetch(&remote, &a, &[third], Need::History, &Silent).unwrap();
    assert_eq!(pulled.objects_received, back.objects_sent);
}

#[test]
fn an_unknown_id_is_not_on_the_remote_and_nothing_is_stored() {
    let f = Fixture::new();
    let a = f.store("a");
    let remote = f.remote();
    let id = commit(&a, &files(1), vec![]);
    let b = f.store("b");
    let err = fetch(&remote, &b, &[id], Need::Closure, &Silent).unwrap_err();
    assert!(matches!(err, RemoteError::NotOnRemote { .. }), "{err}");
    assert!(err.to_string().contains(&id.to_string()), "{err}");
}

#[test]
fn a_blob_id_asked_for_as_a_snapshot_is_not_on_the_remote() {
    let f = Fixture::new();
    let a = f.store("a");
    let id = commit(&a, &files(1), vec![]);
    let remote = f.remote();
    push(&remote, &a, &[id], &Silent).unwrap();
    let reader = a.reader().unwrap();
    let tree = reader.tree(reader.snapshot(id).unwrap().tree).unwrap();
    let blob = tree.entries().iter().find_map(|e| e.blob()).unwrap();
    let as_snapshot = SnapshotId::from_bytes(*blob.as_bytes());
    let b = f.store("b");
    let err = fetch(&remote, &b, &[as_snapshot], Need::Closure, &Silent).unwrap_err();
    assert!(matches!(err, RemoteError::NotOnRemote { .. }), "{err}");
}
