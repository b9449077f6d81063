use cas::*;
use proptest::prelude::*;

/// The fixture of `docs/format.md`, section "Test vectors".
fn fixture() -> (Tree, Snapshot) {
    let sub = Tree::new(vec![TreeEntry {
        name: b"run.sh".to_vec(),
        kind: EntryKind::Executable,
        id: BlobId::of(b"#!/bin/sh\n").into(),
        size: 10,
    }])
    .unwrap();
    let tree = Tree::new(vec![
        TreeEntry {
            name: b"link".to_vec(),
            kind: EntryKind::Symlink,
            id: BlobId::of(b"hello.txt").into(),
            size: 9,
        },
        TreeEntry {
            name: b"hello.txt".to_vec(),
            kind: EntryKind::File,
            id: BlobId::of(b"hello\n").into(),
            size: 6,
        },
        TreeEntry {
            name: b"bin".to_vec(),
            kind: EntryKind::Tree,
            id: sub.id().into(),
            size: 10,
        },
    ])
    .unwrap();
    let snap = Snapshot {
        tree: tree.id(),
        parents: vec![SnapshotId::from_bytes([0x11; 32])],
        created: jiff::Timestamp::from_second(1_700_000_000).unwrap(),
        message: "turn 3".into(),
        labels: [("task".to_string(), "42".to_string())]
            .into_iter()
            .collect(),
        source: Some(Source {
            path: "/src/repo".into(),
            git: Some(GitSource {
                commit: "0123456789abcdef0123456789abcdef01234567".into(),
                dirty: true,
            }),
        }),
    };
    (tree, snap)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn blob_id_is_plain_blake3() {
    // b3sum of a file holding "hello\n" prints the plain BLAKE3 digest.
    assert_eq!(
        BlobId::of(b"hello\n").to_hex(),
        blake3::hash(b"hello\n").to_hex().as_str()
    );
    // The published BLAKE3 digest of the empty input.
    assert_eq!(
        BlobId::of(b"").to_hex(),
        "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
    );
}

#[test]
fn test_vectors_are_stable() {
    let (tree, snap) = fixture();
    assert_eq!(
        hex(&tree.encode()),
        "03000000\
         04 03000000 62696e 47dd8db26e755e5f2f00a291a9169c87aa03f48c4fcfd3ee87372a56fc8aeab4 0a00000000000000\
         01 09000000 68656c6c6f2e747874 8e4c7c1b99dbfd50e7a95185fead5ee1448fa904a2fdd778eaf5f2dbfd629a99 0600000000000000\
         03 04000000 6c696e6b c1b130578061e462dc4595c987e151d8715d2702ff08cf24aad9f90410fb295e 0900000000000000"
            .replace(' ', "")
    );
    assert_eq!(
        tree.id().to_hex(),
        "4cb9ec7bbe490a813df343f1c09def0a98e79ac3b9ae5916f55a9c5a7a13196a"
    );
    assert_eq!(
        hex(&snap.encode()),
        "4cb9ec7bbe490a813df343f1c09def0a98e79ac3b9ae5916f55a9c5a7a13196a\
         01000000 1111111111111111111111111111111111111111111111111111111111111111\
         00f1536500000000 00000000\
         06000000 7475726e2033\
         01000000 04000000 7461736b 02000000 3432\
         01 09000000 2f7372632f7265706f 01 28000000 30313233343536373839616263646566303132333435363738396162636465663031323334353637 01"
            .replace(' ', "")
    );
    assert_eq!(
        snap.id().to_hex(),
        "39f6f1e29754ace41fc5571aea0d328d6e52b2f4b6058672198437b58646d11f"
    );
    assert_eq!(
        Tree::default().id().to_hex(),
        "41feafb42174ac07ed90f815ce03b079ee61d4753d21912d15bff4326cd85bdf"
    );
    // The ids are reproducible with b3sum's derive-key mode over the encodings.
    let mut h = blake3::Hasher::new_derive_key(TREE_CONTEXT);
    h.update(&tree.encode());
    assert_eq!(h.finalize().as_bytes(), tree.id().as_bytes());
}

#[test]
fn decode_rejects_non_canonical_input() {
    let (tree, snap) = fixture();
    let mut bytes = tree.encode();
    bytes.push(0);
    assert_eq!(Tree::decode(&bytes), Err(ObjectError::TrailingBytes(1)));
    let bytes = tree.encode();
    assert_eq!(
        Tree::decode(&bytes[..bytes.len() - 1]),
        Err(ObjectError::Truncated)
    );
    // Swap the first two entries: out of order.
    let e = tree.entries();
    let swapped = Tree::from_sorted(vec![e[1].clone(), e[0].clone()]);
    assert!(matches!(swapped, Err(ObjectError::Unsorted { .. })));
    let dup = Tree::new(vec![e[0].clone(), e[0].clone()]);
    assert!(matches!(dup, Err(ObjectError::Duplicate { .. })));
    let mut bytes = snap.encode();
    bytes.truncate(bytes.len() - 1);
    assert!(Snapshot::decode(&bytes).is_err());
    let mut bad_kind = tree.encode();
    bad_kind[4] = 9;
    assert_eq!(Tree::decode(&bad_kind), Err(ObjectError::UnknownKind(9)));
}

#[test]
fn invalid_names_are_refused() {
    for name in [
        &b""[..],
        b".",
        b"..",
        b"a/b",
        b"nul\0",
        b"tab\t",
        b"del\x7f",
        &[b'x'; 256],
    ] {
        assert!(validate_name(name).is_err(), "{name:?} must be refused");
    }
    for name in [
        &b"aux.c"[..],
        b"con",
        b"a\\b",
        b"what?*",
        b"\xff\xfe",
        &[b'x'; 255],
    ] {
        assert!(validate_name(name).is_ok(), "{name:?} must be accepted");
    }
}

#[test]
fn labels_parse_and_validate() {
    assert_eq!(
        parse_label("task=42").unwrap(),
        ("task".into(), "42".into())
    );
    assert_eq!(parse_label("k=a=b").unwrap(), ("k".into(), "a=b".into()));
    assert!(parse_label("novalue").is_err());
    assert!(parse_label("=x").is_err());
    assert!(parse_label("sp ace=x").is_err());
}

fn arb_entry() -> impl Strategy<Value = TreeEntry> {
    (
        proptest::collection::vec(0x20u8..=0xff, 1..40),
        0u8..4,
        any::<[u8; 32]>(),
        // Up to 30 entries whose sizes sum within a u64, as every tree's must.
        0..=u64::MAX / 32,
    )
        .prop_filter_map("valid name", |(name, kind, id, size)| {
            validate_name(&name).ok()?;
            let kind = [
                EntryKind::File,
                EntryKind::Executable,
                EntryKind::Symlink,
                EntryKind::Tree,
            ][kind as usize];
            Some(TreeEntry {
                name,
                kind,
                id: ObjectId::from_bytes(id),
                size,
            })
        })
}

proptest! {
    #[test]
    fn tree_round_trips(entries in proptest::collection::vec(arb_entry(), 0..30)) {
        let mut entries = entries;
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        entries.dedup_by(|a, b| a.name == b.name);
        let tree = Tree::new(entries).unwrap();
        let decoded = Tree::decode(&tree.encode()).unwrap();
        prop_assert_eq!(decoded.id(), tree.id());
        prop_assert_eq!(decoded, tree);
    }

    #[test]
    fn snapshot_round_trips(
        msg in ".{0,80}",
        secs in -10_000_000_000i64..10_000_000_000,
        nanos in 0u32..1_000_000_000,
        labels in proptest::collection::btree_map("[a-z0-9_.-]{1,10}", ".{0,20}", 0..5),
        parents in proptest::collection::hash_set(any::<[u8; 32]>(), 0..3),
        git in proptest::option::of(("[0-9a-f]{40}", any::<bool>())),
    ) {
        let snap = Snapshot {
            tree: TreeId::from_bytes([7; 32]),
            parents: parents.into_iter().map(SnapshotId::from_bytes).collect(),
            created: jiff::Timestamp::from_nanosecond(i128::from(secs) * 1_000_000_000 + i128::from(nanos)).unwrap(),
            message: msg,
            labels,
            source: Some(Source { path: "/w".into(), git: git.map(|(commit, dirty)| GitSource { commit, dirty }) }),
        };
        let decoded = Snapshot::decode(&snap.encode()).unwrap();
        prop_assert_eq!(decoded.id(), snap.id());
        prop_assert_eq!(decoded, snap);
    }

    #[test]
    fn tree_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = Tree::decode(&bytes);
        let _ = Snapshot::decode(&bytes);
    }
}

#[test]
fn trees_naming_git_are_refused_when_built_and_when_received() {
    let entry = |name: &[u8]| TreeEntry {
        name: name.to_vec(),
        kind: EntryKind::File,
        id: BlobId::of(b"x").into(),
        size: 1,
    };
    for name in [
        &b".git"[..],
        b".GIT",
        b"git~1",
        b".git.",
        b".git::$INDEX_ALLOCATION",
    ] {
        assert!(Tree::new(vec![entry(name)]).is_err(), "{name:?}");
    }
    // A received encoding naming .GIT does not decode.
    let mut bytes = Tree::new(vec![entry(b".gXT")]).unwrap().encode();
    let at = bytes.windows(4).position(|w| w == b".gXT").unwrap();
    bytes[at + 2] = b'I';
    bytes[at + 1] = b'G';
    assert!(matches!(
        Tree::decode(&bytes),
        Err(ObjectError::InvalidName { .. })
    ));
}

/// Found by the `tree` fuzz target: two entries of 2^63 bytes each decoded, and
/// `Tree::size()` then overflowed (a panic with overflow checks, a wrong total without);
/// `cairn fsck` sums every stored tree this way, and `cairn serve` stores uploaded trees.
#[test]
fn a_tree_whose_entry_sizes_overflow_is_refused() {
    #[rustfmt::skip]
    let crash: &[u8] = &[
        0x02, 0x00, 0x00, 0x00,
        0x01, 0x01, 0x00, 0x00, 0x00, b'a',
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80,
        0x01, 0x01, 0x00, 0x00, 0x00, b'b',
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80,
    ];
    let err = Tree::decode(crash).expect_err("sizes over 2^64 in all");
    assert!(err.to_string().contains("entry sizes"), "{err}");

    let entry = |name: &[u8], size| TreeEntry {
        name: name.to_vec(),
        kind: EntryKind::File,
        id: ObjectId::from_bytes([0; 32]),
        size,
    };
    assert!(Tree::new(vec![entry(b"a", 1 << 63), entry(b"b", 1 << 63)]).is_err());
    let largest = Tree::new(vec![entry(b"a", u64::MAX - 1), entry(b"b", 1)]).expect("fits");
    assert_eq!(largest.size(), u64::MAX);
    assert_eq!(Tree::decode(&largest.encode()).as_ref(), Ok(&largest));
}

/// `cairn serve` decodes uploaded snapshots (bodies up to 64 MiB, some 1.5 million
/// parents): the duplicate-parent check compared each parent with every earlier one, hours
/// of CPU for one request. It must take time in proportion to the parents.
#[test]
fn many_parents_decode_in_linear_time() {
    let parents: Vec<SnapshotId> = (0..200_000u32)
        .map(|i| SnapshotId::from_bytes(*blake3::hash(&i.to_le_bytes()).as_bytes()))
        .collect();
    let snap = Snapshot {
        tree: TreeId::from_bytes([7; 32]),
        parents: parents.clone(),
        created: jiff::Timestamp::UNIX_EPOCH,
        message: String::new(),
        labels: Default::default(),
        source: None,
    };
    let bytes = snap.encode();
    let started = std::time::Instant::now();
    let decoded = Snapshot::decode(&bytes).expect("distinct parents");
    let took = started.elapsed();
    assert_eq!(decoded.parents, parents);
    // Linear: milliseconds even unoptimized; quadratic: minutes.
    assert!(took < std::time::Duration::from_secs(10), "took {took:?}");

    let mut repeated = snap;
    repeated.parents.push(parents[123_456]);
    assert!(
        Snapshot::decode(&repeated.encode()).is_err(),
        "a repeated parent"
    );
}
