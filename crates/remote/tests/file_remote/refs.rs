//! Refs on a folder remote: compare-and-swap updates and the names they may have.

use cas::*;
use remote::{Probe, RefUpdate, RemoteError, Silent, gc, push, refs};

use crate::util::*;

#[test]
fn refs_on_a_folder_remote_move_only_from_the_value_expected_and_one_racer_wins() {
    let f = Fixture::new();
    let a = f.store("a");
    let one = commit(&a, &files(1), vec![]);
    let two = commit(&a, &files(2), vec![one]);
    let remote = f.remote();
    assert!(
        remote.config().conditional.create,
        "a folder refuses a second create"
    );
    assert_eq!(remote.config().conditional.stale_update, Probe::Unsupported);
    push(&remote, &a, &[two], &Silent).unwrap();

    refs::update(&remote, "main", RefUpdate::Set(one), None).unwrap();
    assert_eq!(refs::get(&remote, "main").unwrap(), Some(one));
    // Without the right expectation: refused, naming the value.
    let err = refs::update(&remote, "main", RefUpdate::Set(two), None).unwrap_err();
    assert!(err.is_refusal(), "{err}");
    assert!(err.to_string().contains(&one.to_string()), "{err}");
    refs::update(&remote, "main", RefUpdate::Set(two), Some(one)).unwrap();

    // Eight threads race from one value: exactly one wins.
    let results: Vec<Result<(), RemoteError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let remote = &remote;
                s.spawn(move || {
                    let target = if i % 2 == 0 { one } else { two };
                    refs::update(remote, "race", RefUpdate::Set(target), None)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let winners = results.iter().filter(|r| r.is_ok()).count();
    let value = refs::get(&remote, "race").unwrap().unwrap();
    // Racers that wanted the winner's value see it there already and succeed too.
    let same_as_winner = results.len()
        - results
            .iter()
            .filter(
                |r| matches!(r, Err(RemoteError::RefMoved { current: Some(c), .. }) if *c == value),
            )
            .count();
    assert!(winners >= 1 && winners == same_as_winner, "{results:?}");
    assert_eq!(
        std::fs::read_dir(f.root.join("remote/refs/race"))
            .unwrap()
            .count(),
        1,
        "one entry was created"
    );

    refs::update(&remote, "main", RefUpdate::Remove, Some(two)).unwrap();
    assert_eq!(refs::get(&remote, "main").unwrap(), None);
    let listed: Vec<String> = refs::list(&remote)
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(listed, vec!["race".to_owned()]);
}

#[test]
fn a_ref_name_that_would_leave_refs_is_refused_before_any_request() {
    let f = Fixture::new();
    let a = f.store("a");
    let id = commit(&a, &files(1), vec![]);
    let remote = f.remote();
    push(&remote, &a, &[id], &Silent).unwrap();
    for name in ["../packs", "a//b", "", "-x"] {
        let err = refs::update(&remote, name, RefUpdate::Set(id), None).unwrap_err();
        assert!(matches!(err, RemoteError::Invalid(_)), "{name}: {err}");
        let err = refs::get(&remote, name).unwrap_err();
        assert!(matches!(err, RemoteError::Invalid(_)), "{name}: {err}");
    }
    assert!(!f.root.join("remote/packs/0000000000000001").exists());
    assert!(!f.root.join("remote/0000000000000001").exists());
}

#[test]
fn a_ref_named_like_another_refs_entry_never_blocks_it() {
    let f = Fixture::new();
    let a = f.store("a");
    let one = commit(&a, &files(1), vec![]);
    let two = commit(&a, &files(2), vec![one]);
    let remote = f.remote();
    push(&remote, &a, &[two], &Silent).unwrap();
    refs::update(&remote, "x", RefUpdate::Set(one), None).unwrap();
    // Names whose parts read as `x`'s next entries, of either case.
    for name in ["x/0000000000000002", "x/000000000000000A/0000000000000001"] {
        refs::update(&remote, name, RefUpdate::Set(two), None).unwrap();
    }
    refs::update(&remote, "x", RefUpdate::Set(two), Some(one)).unwrap();
    refs::update(&remote, "x", RefUpdate::Set(one), Some(two)).unwrap();
    assert_eq!(refs::get(&remote, "x").unwrap(), Some(one));
    assert_eq!(refs::get(&remote, "x/0000000000000002").unwrap(), Some(two));
    refs::update(
        &remote,
        "x/0000000000000002",
        RefUpdate::Set(one),
        Some(two),
    )
    .unwrap();
    let listed: Vec<(String, SnapshotId)> = refs::list(&remote)
        .unwrap()
        .into_iter()
        .map(|r| (r.name, r.snapshot))
        .collect();
    assert_eq!(
        listed,
        [
            ("x".to_owned(), one),
            ("x/0000000000000002".to_owned(), one),
            ("x/000000000000000A/0000000000000001".to_owned(), two),
        ]
    );
    // Remote gc drops each ref's old entries and keeps every ref's latest.
    let out = gc(&remote, &a, &NOW).unwrap();
    assert_eq!(out.ref_entries_dropped, 3, "{out:?}");
    let again: Vec<String> = refs::list(&remote)
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(again.len(), 3, "{again:?}");
    assert_eq!(refs::get(&remote, "x").unwrap(), Some(one));
}

/// A bad URL, remote name or ref name is an `Invalid` error whose cause is typed (the rule
/// it breaks kept as the source), with the message it always had.
#[test]
fn invalid_remotes_keep_what_they_break_as_a_typed_cause() {
    let err = remote::RemoteUrl::parse("s3://B/x").unwrap_err();
    assert_eq!(
        err,
        remote::UrlError::Bucket {
            url: "s3://B/x".into(),
            bucket: "B".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "s3://B/x: bucket \"B\" is not a bucket name (3 to 63 of a-z, 0-9, '.', '-')"
    );
    let err = remote::validate_remote_name("-x").unwrap_err();
    assert!(
        matches!(&err, RemoteError::Invalid(remote::InvalidRemote::Name { name }) if name == "-x"),
        "{err:?}"
    );

    let f = Fixture::new();
    let remote = f.remote();
    let err = refs::get(&remote, "a//b").unwrap_err();
    let RemoteError::Invalid(remote::InvalidRemote::RefName { source, .. }) = &err else {
        panic!("{err:?}");
    };
    assert!(
        matches!(source, cas::RefError::InvalidName { .. }),
        "{source:?}"
    );
    let cause = std::error::Error::source(&err).map(ToString::to_string);
    assert_eq!(cause, Some(source.to_string()));
    assert!(err.to_string().starts_with("remote "), "{err}");
}

/// A ref entry that does not decode is damage on the remote, and the JSON error is kept
/// as its typed cause beside the message it always had.
#[test]
fn a_damaged_ref_entry_keeps_its_decoding_error_as_its_cause() {
    let f = Fixture::new();
    let a = f.store("a");
    let id = commit(&a, &files(1), vec![]);
    let remote = f.remote();
    push(&remote, &a, &[id], &Silent).unwrap();
    refs::update(&remote, "main", RefUpdate::Set(id), None).unwrap();
    for entry in std::fs::read_dir(f.root.join("remote/refs/main")).unwrap() {
        std::fs::write(entry.unwrap().path(), b"{not json").unwrap();
    }
    let err = refs::get(&remote, "main").unwrap_err();
    let RemoteError::Corrupt {
        cause: Some(cause),
        reason,
        ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert!(
        matches!(**cause, remote::CorruptCause::Record(_)),
        "{cause:?}"
    );
    assert_eq!(*reason, cause.to_string());
    assert!(err.to_string().ends_with(reason.as_str()), "{err}");
}
