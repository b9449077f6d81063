//! Remote gc: what it deletes and what it keeps.

use cas::*;
use remote::{Need, RefUpdate, RemoteError, RemoteGcOptions, Silent, fetch, gc, push, refs};

use crate::util::*;

#[test]
fn remote_gc_deletes_only_what_no_ref_or_pin_reaches_after_the_grace() {
    let f = Fixture::new();
    let a = f.store("a");
    let kept = commit(&a, &files(1), vec![]);
    let dropped = commit(
        &a,
        &[("lonely.txt", b"nobody keeps me".repeat(1000))],
        vec![],
    );
    let remote = f.remote();
    push(&remote, &a, &[kept], &Silent).unwrap();
    refs::update(&remote, "main", RefUpdate::Set(kept), None).unwrap();
    push(&remote, &a, &[dropped], &Silent).unwrap();
    let packs = || {
        std::fs::read_dir(f.root.join("remote/packs"))
            .unwrap()
            .count()
    };
    let before = packs();

    // With a grace period: condemned, not deleted; a dry run says so and changes nothing.
    let day = RemoteGcOptions {
        grace_seconds: 86_400,
        dry_run: false,
    };
    let dry = gc(
        &remote,
        &a,
        &RemoteGcOptions {
            dry_run: true,
            ..day
        },
    )
    .unwrap();
    assert_eq!(dry.packs_condemned, 2, "{dry:?}");
    let first = gc(&remote, &a, &day).unwrap();
    assert_eq!(
        (first.packs_condemned, first.packs_removed),
        (2, 0),
        "{first:?}"
    );
    assert_eq!(packs(), before);

    // Pinning it again (a push by id) rescues it.
    refs::pin(&remote, dropped).unwrap();
    let rescued = gc(&remote, &a, &day).unwrap();
    assert_eq!(rescued.packs_rescued, 2, "{rescued:?}");
    refs::unpin(&remote, dropped).unwrap();

    let now = gc(&remote, &a, &NOW).unwrap();
    assert_eq!(now.packs_removed, 2, "{now:?}");
    assert_eq!(packs(), before - 2);
    // What the ref keeps still checks out in a fresh store.
    let b = f.store("b");
    fetch(&remote, &b, &[kept], Need::History, &Silent).unwrap();
    let err = fetch(&remote, &b, &[dropped], Need::Closure, &Silent).unwrap_err();
    assert!(matches!(err, RemoteError::NotOnRemote { .. }), "{err}");
}

#[test]
fn a_snapshot_still_shown_by_a_kept_pack_stays_whole_after_remote_gc() {
    let f = Fixture::new();
    let a = f.store("a");
    let remote = f.remote();
    // Z's files go to the remote in a push of their own (pinned, for now).
    let z = commit(&a, &files(1), vec![]);
    push(&remote, &a, &[z], &Silent).unwrap();
    refs::pin(&remote, z).unwrap();
    // X has Z's tree; it goes in one push with Y, so one snapshot pack shows both, while
    // X's files are only in Z's pack.
    std::thread::sleep(std::time::Duration::from_millis(5));
    let x = commit(&a, &files(1), vec![]);
    assert_ne!(x, z);
    let y = commit(&a, &[("y.txt", b"kept by main".to_vec())], vec![]);
    push(&remote, &a, &[x, y], &Silent).unwrap();
    refs::update(&remote, "main", RefUpdate::Set(y), None).unwrap();
    refs::unpin(&remote, z).unwrap();
    gc(&remote, &a, &NOW).unwrap();
    // X's pack is kept for Y and still shows X, so X must still be whole.
    let b = f.store("b");
    fetch(&remote, &b, &[x], Need::History, &Silent).unwrap();
    let reader = b.reader().unwrap();
    for (_, content) in files(1) {
        assert_eq!(reader.blob(BlobId::of(&content)).unwrap(), content);
    }
}

#[test]
fn remote_gc_keeps_a_pack_while_any_member_of_a_frame_in_it_is_live() {
    let f = Fixture::new();
    let a = f.store("a");
    let files = small_files();
    let all = commit(&a, &as_files(&files[..100]), vec![]);
    // Later, only the first 60 of them: every one already on the remote, in the frame.
    let some = commit(&a, &as_files(&files[..60]), vec![]);
    let remote = f.remote();
    push(&remote, &a, &[all], &Silent).unwrap();
    let frame_pack = remote_packs(&f.root)
        .into_iter()
        .find(|(_, e, _)| e.encoding == remote::layout::Encoding::Frame)
        .map(|(p, _, _)| p)
        .unwrap();
    let pushed = push(&remote, &a, &[some], &Silent).unwrap();
    assert_eq!(
        pushed.objects_sent, 3,
        "its two trees (d0 with 60 files, the root) and itself: {pushed:?}"
    );
    refs::update(&remote, "main", RefUpdate::Set(some), None).unwrap();
    let now = gc(&remote, &a, &NOW).unwrap();
    assert_eq!(
        now.packs_removed, 1,
        "the first push's snapshot pack: {now:?}"
    );
    assert!(f.root.join("remote/packs").join(&frame_pack).exists());
    let b = f.store("b");
    fetch(&remote, &b, &[some], Need::History, &Silent).unwrap();
    let expected: std::collections::BTreeMap<String, Vec<u8>> =
        files.into_iter().take(60).collect();
    assert_eq!(files_of(&b, some), expected);
}
