//! The directory-state record: round trips, compactness, and what is trusted.

use super::*;

/// The counts follow every change made to the listing.
#[test]
fn a_tally_follows_its_listing() {
    let file = |size: u64, changed_ns: i64| {
        Child::File(FileState {
            size,
            mtime_ns: changed_ns,
            ctime_ns: changed_ns,
            ino: 1,
            dev: 1,
            mode: 0o100644,
            blob: cas::BlobId::of(b"x"),
            verified_ns: 1_000_000_000_000,
        })
    };
    let mut state = DirState::unverified_with(vec![
        (Name::from_slice(b"a"), file(3, 0)),
        (Name::from_slice(b"d"), Child::Dir),
    ]);
    let t = state.tally();
    assert_eq!(
        (t.files, t.bytes, t.dirs, t.skipped, t.racy),
        (1, 3, 1, 0, false)
    );
    state
        .children_mut()
        .push((Name::from_slice(b"e"), file(4, 1_000_000_000_000)));
    let t = state.tally();
    assert_eq!((t.files, t.bytes, t.racy), (2, 7, true));
    state.children_mut()[1].1 = Child::Skipped(SkipReason::PathTooLong);
    let t = state.tally();
    assert_eq!((t.dirs, t.skipped), (0, 1));
}

/// Found by the `stat_cache` fuzz target: a record (checksum intact) whose listing
/// held a name with NUL and '/' bytes decoded, and a capture would join it to a path
/// (`stat`ing through it). A listing no directory gives is not trusted.
#[test]
fn a_listing_no_directory_gives_is_not_trusted() {
    #[rustfmt::skip]
    let crash: &[u8] = &[
        0x03, 0x83, 0xcf, 0x40, 0xbd, 0x02, 0xbc, 0xea, 0x18, 0x83, 0xcf, 0x40, 0xbd, 0x02,
        0xbc, 0xea, 0x18, 0x88, 0x0b, 0xae, 0xd9, 0xd3, 0x6b, 0x4f, 0x71, 0xdf, 0x00, 0x57,
        0x41, 0x7e, 0x78, 0xa2, 0xb6, 0xc8, 0xa0, 0xa9, 0x30, 0x43, 0xac, 0x38, 0xa2, 0xdd,
        0xbc, 0x34, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x02,
        0x04, 0x00, 0x64, 0x65, 0x65, 0x70, 0x01, 0x0e, 0x00, 0x6c, 0x69, 0x62, 0x2e, 0x72,
        0x73, 0x30, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x83, 0xcf, 0x40, 0xbd, 0x02,
        0xbc, 0xea, 0x18, 0x83, 0xcf, 0x40, 0xbd, 0x02, 0xbc, 0xea, 0x18, 0x06, 0xe0, 0x9b,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xfe, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xa4,
        0x81, 0x00, 0x00, 0xae, 0xb9, 0x09, 0xcd, 0x10, 0x94, 0xfa, 0x7c, 0x91, 0x4f, 0xf1,
        0x43, 0x4b, 0x36, 0x08, 0xa1, 0xbe, 0x9f, 0xfe, 0x8f, 0x92, 0xf0, 0xf8, 0x87, 0x9c,
        0x37, 0x0c, 0x44, 0x46, 0x83, 0x17, 0xcd, 0x05, 0x6d, 0x4d, 0xc0, 0x02, 0xbc, 0xea,
        0x18, 0x92, 0x5a, 0x92, 0xf8, 0x37, 0x01, 0x0f, 0x61,
    ];
    assert_eq!(DirState::decode(&seal(crash.to_vec())), None);

    let listing = |names: &[&[u8]]| DirState {
        children: names
            .iter()
            .map(|n| (Name::from_slice(n), Child::Dir))
            .collect(),
        ..DirState::unverified()
    };
    assert!(DirState::decode(&listing(&[b"a", b"b"]).encode().unwrap()).is_some());
    for bad in [
        &[&b"b"[..], b"a"][..],
        &[b"a", b"a"],
        &[b"../etc"],
        &[b".."],
        &[b"."],
        &[b""],
        &[b"a\0b"],
        &[&[b'x'; 256][..]],
    ] {
        assert_eq!(
            DirState::decode(&listing(bad).encode().unwrap()),
            None,
            "{bad:?}"
        );
    }
}

/// Every skip reason a listing can hold comes back as it went in, and reads as the
/// `reason` text SPEC's `skipped` lists have always shown.
#[test]
fn skip_reasons_round_trip_with_their_texts() {
    let reasons = [
        (
            SkipReason::Denied {
                pattern: "*.pem".into(),
            },
            "denied by pattern *.pem",
        ),
        (
            SkipReason::InvalidName(path_policy::NameError::Git),
            "invalid name: a spelling of .git",
        ),
        (SkipReason::PathTooLong, "path-too-long"),
        (SkipReason::PseudoFilesystem, "pseudo-filesystem"),
        (
            SkipReason::OverSizeCap { size: 10, cap: 4 },
            "larger than the size cap (10 bytes > 4 bytes)",
        ),
        (
            SkipReason::Special(Special::Socket),
            "socket (not a file, directory or symlink)",
        ),
        (SkipReason::IgnoreFileNotRegular, "ignore-file-not-regular"),
        (SkipReason::IgnoreFileTooLarge, "ignore-file-too-large"),
        (
            SkipReason::OutOfScope(Box::new(SkipReason::PathTooLong)),
            "out of scope: path-too-long",
        ),
    ];
    let mut state = DirState::unverified();
    for (i, (reason, text)) in reasons.iter().enumerate() {
        assert_eq!(reason.to_string(), *text);
        state.children_mut().push((
            Name::from_vec(format!("n{i}").into_bytes()),
            Child::Skipped(reason.clone()),
        ));
    }
    assert_eq!(DirState::decode(&state.encode().unwrap()), Some(state));
}

#[test]
fn dir_states_round_trip() {
    let file = FileState {
        size: 3,
        mtime_ns: 1,
        ctime_ns: 2,
        ino: 3,
        dev: 4,
        mode: 0o100644,
        blob: cas::BlobId::of(b"abc"),
        verified_ns: 5,
    };
    let state = DirState {
        stamp: DirStamp {
            mtime_ns: 1,
            ctime_ns: 2,
            ino: 3,
            dev: 4,
            verified_ns: 5,
        },
        ignore: IgnoreStamp {
            mask: 0b101,
            hash: 42,
        },
        tree: Some((cas::TreeId::from_bytes([7; 32]), 9)),
        children: vec![
            (b"a".as_slice().into(), Child::File(file)),
            (b"d".as_slice().into(), Child::Dir),
            (
                b"p".as_slice().into(),
                Child::Skipped(SkipReason::Special(Special::Fifo)),
            ),
        ],
        pending: false,
        tally: TallyCell::default(),
    };
    assert_eq!(
        DirState::decode(&state.encode().unwrap()),
        Some(state.clone())
    );
    assert_eq!(DirState::decode(&state.encode().unwrap()[..20]), None);
    let mut flipped = state.encode().unwrap();
    flipped[30] ^= 1;
    assert_eq!(
        DirState::decode(&flipped),
        None,
        "a damaged record is not trusted"
    );
    let mut longer = state.encode().unwrap();
    longer.push(0);
    assert_eq!(DirState::decode(&longer), None);
    assert_eq!(dir_key(b"a/b"), b"da\0b");
    assert!(dir_key(b"a/b") < dir_key(b"a-b"), "keys sort in tree order");
}

/// Files are stored as differences from their neighbours: any values, however far
/// apart or out of order, come back exactly.
#[test]
fn file_entries_round_trip_whatever_their_values() {
    let file = |mtime_ns, ctime_ns, ino, dev, verified_ns| {
        Child::File(FileState {
            size: u64::MAX,
            mtime_ns,
            ctime_ns,
            ino,
            dev,
            mode: u32::MAX,
            blob: cas::BlobId::of(b"x"),
            verified_ns,
        })
    };
    let state = DirState {
        children: vec![
            (
                b"a".as_slice().into(),
                file(i64::MAX, i64::MIN, u64::MAX, 9, i64::MIN),
            ),
            (
                b"b".as_slice().into(),
                file(i64::MIN, i64::MAX, 0, u64::MAX, i64::MAX),
            ),
            (b"c".as_slice().into(), file(-5, 7, 1 << 63, 0, 0)),
            (
                b"d".as_slice().into(),
                file(
                    1_700_000_000_123_456_789,
                    1_700_000_000_123_456_790,
                    4242,
                    9,
                    1_700_000_001_000_000_000,
                ),
            ),
        ],
        ..DirState::unverified()
    };
    assert_eq!(DirState::decode(&state.encode().unwrap()), Some(state));
}

/// A listing of `n` files written together, as one capture records them.
fn similar_listing(n: u64) -> DirState {
    let stamp = DirStamp {
        mtime_ns: 1_700_000_000_000_000_000,
        ctime_ns: 1_700_000_000_000_000_000,
        ino: 1_000_000,
        dev: 64769,
        verified_ns: 1_700_000_100_000_000_000,
    };
    let mut children: Vec<_> = (0..n)
        .map(|i| {
            let at = stamp.mtime_ns + i64::try_from(i).unwrap() * 10_417;
            let f = FileState {
                size: 50 + i % 10,
                mtime_ns: at,
                ctime_ns: at,
                ino: stamp.ino + 1 + i,
                dev: stamp.dev,
                mode: 0o100644,
                blob: cas::BlobId::of(&i.to_le_bytes()),
                verified_ns: stamp.verified_ns,
            };
            (
                Name::from_vec(format!("f{}.rs", 100_000 + i).into_bytes()),
                Child::File(f),
            )
        })
        .collect();
    children.sort_by(|a, b| a.0.cmp(&b.0));
    DirState {
        stamp,
        children,
        ..DirState::unverified()
    }
}

/// The tree a listing's files make.
fn tree_of(state: &DirState) -> cas::Tree {
    let entries = state
        .children()
        .iter()
        .filter_map(|(name, child)| match child {
            Child::File(f) => Some(cas::TreeEntry {
                name: name.to_vec(),
                kind: cas::EntryKind::File,
                id: f.blob.into(),
                size: f.size,
            }),
            _ => None,
        })
        .collect();
    cas::Tree::new(entries).unwrap()
}

/// A thousand files written together take a few bytes each besides their blob ids:
/// the record keeps differences, and zstd shares the names' common parts.
#[test]
fn a_listing_of_similar_files_is_compact() {
    let state = similar_listing(1000);
    let encoded = state.encode().unwrap();
    let per_file = encoded.len() / 1000;
    assert!(
        per_file <= 32 + 12,
        "{per_file} bytes per file: the blob id and 12 more at most"
    );
    assert_eq!(DirState::decode(&encoded), Some(state));
}

/// A record written against its directory's tree leaves out the blob ids the tree
/// holds; read back, they stay in the tree until resolved from it, and the state is
/// then the one written. A tree lacking a name, or another tree, resolves nothing. A
/// file whose blob the tree does not hold keeps its id.
#[test]
fn a_record_points_into_its_tree() {
    let mut state = similar_listing(1000);
    let tree = tree_of(&state);
    state.tree = Some((tree.id(), tree.size()));
    let with_ids = state.encode().unwrap();
    let against = state.encode_against(Some(&tree)).unwrap();
    assert!(
        against.len() <= 12 * 1000,
        "{} bytes for 1000 files",
        against.len()
    );
    assert!(against.len() + 30 * 1000 <= with_ids.len());

    let read = DirState::decode(&against).unwrap();
    assert!(read.pending);
    assert_eq!(
        read.file(b"f100007.rs"),
        None,
        "no entry without its blob id"
    );
    let mut short = tree.entries().to_vec();
    short.remove(500);
    let short = cas::Tree::new(short).unwrap();
    assert!(!read.clone().resolve(&short));
    assert!(!read.clone().resolve(&cas::Tree::default()));
    // Written again unchanged, it still points into its tree.
    assert_eq!(read.encode().unwrap().len(), against.len());
    let mut resolved = read;
    assert!(resolved.resolve(&tree));
    assert_eq!(resolved, state);
    // Any other tree is not the record's: nothing is left out against it.
    assert_eq!(state.encode_against(Some(&short)).unwrap(), with_ids);

    let mut edited = state.clone();
    if let Child::File(f) = &mut edited.children_mut()[7].1 {
        f.blob = cas::BlobId::of(b"edited since the tree");
    }
    let mut read = DirState::decode(&edited.encode_against(Some(&tree)).unwrap()).unwrap();
    assert!(read.resolve(&tree));
    assert_eq!(read, edited);

    // Still in a tree it no longer names: not written at all.
    let mut orphan = DirState::decode(&against).unwrap();
    orphan.tree = None;
    assert_eq!(orphan.encode(), None);
}
