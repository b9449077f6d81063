//! Remotes written by older formats still pull, and their first push upgrades them.

use camino::Utf8Path;
use cas::*;
use remote::{Need, RefUpdate, Silent, fetch, push, refs};

use crate::util::*;

#[test]
fn a_format_1_remote_still_pulls_and_its_first_push_marks_it_format_3() {
    let f = Fixture::new();
    let fixture =
        Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/remote-format-1/remote");
    copy_dir(fixture.as_std_path(), f.root.join("remote").as_std_path());
    let marker = || std::fs::read_to_string(f.root.join("remote/cairn-remote")).unwrap();
    assert_eq!(marker(), r#"{"format":1}"#);
    let remote = f.remote();
    assert_eq!(marker(), r#"{"format":1}"#, "adding it changes nothing");

    let second = refs::get(&remote, "main").unwrap().expect("main");
    assert_eq!(second.to_hex()[..12], *"f03d7a689870");
    let a = f.store("a");
    fetch(&remote, &a, &[second], Need::History, &Silent).unwrap();
    assert_eq!(files_of(&a, second), fixture_files(true));
    let first = a.reader().unwrap().snapshot(second).unwrap().parents[0];
    assert_eq!(first.to_hex()[..12], *"1e94c0ba4026");
    assert_eq!(files_of(&a, first), fixture_files(false));
    let fsck = a.fsck(&StoreFsckOptions::default(), &[]).unwrap();
    assert!(fsck.problems.is_empty(), "{:?}", fsck.problems);

    // This build's push: the marker says 3 before its packs land; the old packs stay.
    let mut files: Vec<(String, Vec<u8>)> = fixture_files(true).into_iter().collect();
    files.extend(small_files().into_iter().take(100));
    let third = commit(&a, &as_files(&files), vec![second]);
    let old_packs: Vec<_> = std::fs::read_dir(f.root.join("remote/packs"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    push(&remote, &a, &[third], &Silent).unwrap();
    assert_eq!(marker(), r#"{"format":5}"#);
    let mut versions = std::collections::BTreeMap::new();
    for pack in std::fs::read_dir(f.root.join("remote/packs")).unwrap() {
        let entry = pack.unwrap();
        let bytes = std::fs::read(entry.path()).unwrap();
        let old = old_packs.contains(&entry.file_name());
        *versions.entry((old, bytes[..8].to_vec())).or_insert(0) += 1;
    }
    assert_eq!(
        versions,
        [
            ((false, b"CAIRNPK3".to_vec()), 2),
            ((true, b"CAIRNPK1".to_vec()), 4)
        ]
        .into(),
    );
    // A fresh store reads across both versions.
    let b = f.store("b");
    fetch(&remote, &b, &[third], Need::History, &Silent).unwrap();
    let expected: std::collections::BTreeMap<String, Vec<u8>> = files.into_iter().collect();
    assert_eq!(files_of(&b, third), expected);
    assert_eq!(files_of(&b, first), fixture_files(false));
}

#[test]
fn a_format_2_remote_streams_its_whole_large_blobs_and_its_crossed_refs_update_again() {
    let f = Fixture::new();
    let fixture =
        Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/remote-format-2/remote");
    copy_dir(fixture.as_std_path(), f.root.join("remote").as_std_path());
    let marker = || std::fs::read_to_string(f.root.join("remote/cairn-remote")).unwrap();
    assert_eq!(marker(), r#"{"format":2}"#);
    let remote = f.remote();
    let expected = |second: bool| {
        let mut out = std::collections::BTreeMap::new();
        for i in 1..=20 {
            out.insert(
                format!("dir/f{i}.rs"),
                format!("// file {i}\n").into_bytes(),
            );
        }
        let a = if second { "again\n" } else { "hello\n" };
        out.insert("a.txt".to_owned(), a.as_bytes().to_vec());
        let big: String = (0..17000)
            .map(|i| format!("{i:08}{}\n", ".".repeat(55)))
            .collect();
        out.insert("big.bin".to_owned(), big.into_bytes());
        out
    };
    let listed: Vec<(String, String)> = refs::list(&remote)
        .unwrap()
        .into_iter()
        .map(|r| (r.name, r.snapshot.to_hex()[..12].to_owned()))
        .collect();
    assert_eq!(
        listed,
        [
            ("main".to_owned(), "711f3e201f26".to_owned()),
            (
                "main/0000000000000003".to_owned(),
                "fd42c75ca8cc".to_owned()
            )
        ]
    );
    let second = refs::get(&remote, "main").unwrap().unwrap();
    let first = refs::get(&remote, "main/0000000000000003")
        .unwrap()
        .unwrap();
    let a = f.store("a");
    fetch(&remote, &a, &[second], Need::History, &Silent).unwrap();
    assert_eq!(files_of(&a, second), expected(true));
    assert_eq!(files_of(&a, first), expected(false));
    // The large blob is stored in chunks, as a local write stores it.
    let big = BlobId::of(&expected(true)["big.bin"]);
    assert_eq!(a.reader().unwrap().blob_chunks(big).unwrap().ids().len(), 2);
    let fsck = a.fsck(&StoreFsckOptions::default(), &[]).unwrap();
    assert!(fsck.problems.is_empty(), "{:?}", fsck.problems);

    // `main`'s next entry, 3, is the folder of the ref that build set: it is stepped past.
    refs::update(&remote, "main", RefUpdate::Set(first), Some(second)).unwrap();
    assert_eq!(refs::get(&remote, "main").unwrap(), Some(first));
    assert!(f.root.join("remote/refs/main/0000000000000004").is_file());
    refs::update(
        &remote,
        "main/0000000000000003",
        RefUpdate::Set(second),
        Some(first),
    )
    .unwrap();
    assert_eq!(
        refs::get(&remote, "main/0000000000000003").unwrap(),
        Some(second)
    );
    assert!(
        f.root
            .join("remote/refs/main/=0000000000000003/0000000000000002")
            .is_file()
    );

    // A push marks it format 5 first; a fresh store reads across the versions.
    let third = commit(&a, &as_map_files(&expected(false)), vec![second]);
    push(&remote, &a, &[third], &Silent).unwrap();
    assert_eq!(marker(), r#"{"format":5}"#);
    let b = f.store("b");
    fetch(&remote, &b, &[third], Need::History, &Silent).unwrap();
    assert_eq!(files_of(&b, third), expected(false));
    assert_eq!(files_of(&b, first), expected(false));
}

#[test]
fn a_format_4_remote_with_its_indexes_in_one_folder_still_pulls_and_lists_from_the_mark() {
    let f = Fixture::new();
    let a = f.store("a");
    let b = f.store("b");
    let remote = f.remote();
    let one = commit(&a, &files(1), vec![]);
    push(&remote, &a, &[one], &Silent).unwrap();
    // As a version 4 cairn left it: every index named `t<ms>-<pack>` in `index/` itself.
    let index = f.root.join("remote/index");
    for path in index_files(&f.root) {
        let name = path.file_name().unwrap();
        std::fs::rename(&path, index.join(name)).unwrap();
    }
    std::fs::write(f.root.join("remote/cairn-remote"), r#"{"format":4}"#).unwrap();
    fetch(&remote, &b, &[one], Need::History, &Silent).unwrap();
    assert_eq!(files_of(&b, one), as_map(&files(1)));

    // This build's push marks it 5 and names its indexes in folders; b's next listing,
    // from its mark, finds them beside the old names.
    let two = commit(&a, &files(2), vec![one]);
    push(&remote, &a, &[two], &Silent).unwrap();
    let marker = std::fs::read_to_string(f.root.join("remote/cairn-remote")).unwrap();
    assert_eq!(marker, r#"{"format":5}"#);
    assert!(
        index_files(&f.root)
            .iter()
            .any(|p| p.strip_prefix(&index).unwrap().components().count() == 3),
        "an index in its time's folders"
    );
    let catalog = remote::Catalog::sync(&remote, &b).unwrap();
    assert!(!catalog.is_full(), "a listing from the mark");
    drop(catalog);
    fetch(&remote, &b, &[two], Need::History, &Silent).unwrap();
    assert_eq!(files_of(&b, two), as_map(&files(2)));
}
