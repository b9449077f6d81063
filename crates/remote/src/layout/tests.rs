//! The layout's tests: encoding and decoding packs and indexes, and what they refuse.

use super::*;
use cas::BlobId;

/// `index` with entry `n`'s bytes edited and its checksum made right again.
fn edited(index: &[u8], n: usize, edit: impl Fn(&mut [u8])) -> Vec<u8> {
    let mut out = index[..index.len() - 32].to_vec();
    let at = INDEX_FIXED + n * INDEX_ENTRY;
    edit(&mut out[at..at + INDEX_ENTRY]);
    let check = blake3::hash(&out);
    out.extend_from_slice(check.as_bytes());
    out
}

/// A pack of a raw blob, a zstd tree and a group frame of three blobs.
fn sample() -> (Pack, Vec<u8>, Vec<FrameMember>) {
    let contents: [&[u8]; 3] = [b"first member\n", b"second\n", b"third one\n"];
    let mut decoded = Vec::new();
    let members: Vec<FrameMember> = contents
        .iter()
        .map(|c| {
            let m = FrameMember {
                id: BlobId::of(c),
                start: decoded.len() as u32,
                size: c.len() as u32,
            };
            decoded.extend_from_slice(c);
            m
        })
        .collect();
    let frame = zstd::bulk::compress(&decoded, 3).unwrap();
    let mut b = PackBuilder::default();
    b.add(
        ObjectKind::Blob,
        ObjectId::from_bytes([1; 32]),
        false,
        5,
        b"hello",
    )
    .unwrap();
    b.add(
        ObjectKind::Tree,
        ObjectId::from_bytes([2; 32]),
        true,
        100,
        b"zzz",
    )
    .unwrap();
    b.add_frame(&frame, &members).unwrap();
    (b.finish(), frame, members)
}

#[test]
fn a_pack_and_its_index_read_back_and_damage_is_refused() {
    let (pack, frame, members) = sample();
    let entries = decode_index(&pack.index, &pack.id).expect("reads");
    assert_eq!(entries, pack.entries);
    assert_eq!(entries.len(), 5, "one entry per object, three in the frame");
    let whole = decode_pack(&pack.bytes, &pack.id).expect("reads");
    assert_eq!(
        whole.iter().map(|(e, _)| *e).collect::<Vec<_>>(),
        entries,
        "the pack alone says what its index says"
    );
    assert_eq!(whole[0].1, b"hello");
    let e = entries[0];
    assert_eq!(&pack.bytes[e.offset as usize..][..e.len as usize], b"hello");
    // The frame is stored once, byte for byte; its members point into it.
    for (n, m) in members.iter().enumerate() {
        let e = entries[2 + n];
        assert_eq!((e.encoding, e.id), (Encoding::Frame, m.id.into()));
        assert_eq!((e.start, e.size), (m.start, u64::from(m.size)));
        assert_eq!(&pack.bytes[e.offset as usize..][..e.len as usize], frame);
        assert_eq!(whole[2 + n].1, frame);
    }

    let mut bad = pack.index.clone();
    bad[50] ^= 1;
    assert!(decode_index(&bad, &pack.id).is_err());
    assert!(decode_index(&pack.index, &"0".repeat(64)).is_err());
    let mut bad = pack.bytes.clone();
    bad[20] ^= 1;
    assert!(decode_pack(&bad, &pack.id).is_err());

    // Entries whose meaning is hostile, with the checksum right: refused, naming them.
    let frame_member = 2;
    // (entry, byte of it, new bytes there, what the refusal says)
    let cases: [(usize, usize, Vec<u8>, &str); 5] = [
        // A member past any frame's decoded bytes.
        (
            frame_member,
            54,
            (MAX_FRAME_BYTES as u32).to_le_bytes().to_vec(),
            "past any frame",
        ),
        // A frame larger than any.
        (
            frame_member,
            50,
            (2u32 << 20).to_le_bytes().to_vec(),
            "past any frame",
        ),
        // A tree as a frame's member.
        (frame_member, 0, vec![1], "member of a group frame"),
        // A whole object read from the middle.
        (0, 54, vec![3], "whole object"),
        // Unknown flags (3 is a chunk list since version 3).
        (0, 1, vec![4], "unknown flags"),
    ];
    for (n, at, bytes, expected) in cases {
        let edit = |e: &mut [u8]| e[at..at + bytes.len()].copy_from_slice(&bytes);
        let err = decode_index(&edited(&pack.index, n, edit), &pack.id)
            .unwrap_err()
            .to_string();
        assert!(err.contains(expected), "{err}");
        assert!(
            err.contains(&entries[n].id.to_string()) || expected == "unknown flags",
            "{err}"
        );
    }
}

#[test]
fn a_large_blob_travels_as_its_chunk_list_and_a_list_that_does_not_cut_its_size_is_refused() {
    let size = 2 * CHUNK_BYTES as u64 + 1;
    let chunks: Vec<BlobId> = (0..3u8).map(|i| BlobId::of(&[i])).collect();
    let id = BlobId::of(b"the large blob");
    let mut b = PackBuilder::default();
    assert!(b.add_chunks(id, size, &chunks[..2]).is_err(), "too few");
    assert!(
        b.add_chunks(id, CHUNK_BYTES as u64, &chunks[..1]).is_err(),
        "one chunk"
    );
    b.add_chunks(id, size, &chunks).unwrap();
    // Past 4 GiB: sizes and list lengths are 64 bits.
    let huge = (4u64 << 30) + 5;
    let many = vec![chunks[0]; huge.div_ceil(CHUNK_BYTES as u64) as usize];
    b.add_chunks(BlobId::of(b"huge"), huge, &many).unwrap();
    let pack = b.finish();
    let entries = decode_index(&pack.index, &pack.id).expect("reads");
    assert_eq!(entries, pack.entries);
    let e = entries[0];
    assert_eq!(
        (e.kind, e.encoding, e.size),
        (ObjectKind::Blob, Encoding::Chunks, size)
    );
    let list = &pack.bytes[e.offset as usize..][..e.len as usize];
    assert_eq!(decode_chunk_list(e.id, e.size, list).unwrap(), chunks);
    assert_eq!(entries[1].size, huge);
    assert_eq!(u64::from(entries[1].len), many.len() as u64 * 32);
    assert!(decode_chunk_list(e.id, e.size + CHUNK_BYTES as u64, list).is_err());
    assert!(decode_chunk_list(e.id, e.size, &list[1..]).is_err());
    let whole = decode_pack(&pack.bytes, &pack.id).expect("reads");
    assert_eq!(whole[0].1, list);

    // A list whose length does not cut its size, a tree as a list, a list in a
    // version 2 index: refused, naming what.
    let err = decode_index(&edited(&pack.index, 0, |e| e[34] ^= 1), &pack.id)
        .unwrap_err()
        .to_string();
    assert!(err.contains("does not cut"), "{err}");
    let err = decode_index(&edited(&pack.index, 0, |e| e[0] = 1), &pack.id)
        .unwrap_err()
        .to_string();
    assert!(err.contains("list of chunks"), "{err}");
    let mut v2 = pack.index[..pack.index.len() - 32].to_vec();
    v2[..8].copy_from_slice(INDEX_MAGIC_2);
    let check = blake3::hash(&v2);
    v2.extend_from_slice(check.as_bytes());
    let err = decode_index(&v2, &pack.id).unwrap_err().to_string();
    assert!(err.contains("unknown flags 3"), "{err}");
}

#[test]
fn version_1_packs_and_indexes_still_read_and_other_versions_are_named() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/remote-format-1/remote");
    let mut objects = 0;
    for entry in std::fs::read_dir(dir.join("index")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let index = std::fs::read(dir.join("index").join(&name)).unwrap();
        let pack = std::fs::read(dir.join("packs").join(&name)).unwrap();
        let entries = decode_index(&index, &name).expect("a version 1 index");
        let whole = decode_pack(&pack, &name).expect("a version 1 pack");
        assert_eq!(whole.iter().map(|(e, _)| *e).collect::<Vec<_>>(), entries);
        assert!(
            entries
                .iter()
                .all(|e| e.start == 0 && e.encoding != Encoding::Frame)
        );
        objects += entries.len();
    }
    assert_eq!(objects, 68 + 5, "both pushes of the fixture");

    let (pack, _, _) = sample();
    let mut later = pack.index.clone();
    later[7] = b'4';
    let err = decode_index(&later, &pack.id).unwrap_err().to_string();
    assert!(err.contains("version 4"), "{err}");
}

/// Refusals are typed, each naming what it found, with the messages they always had.
#[test]
fn refusals_say_what_they_found_in_types() {
    let (pack, _, members) = sample();
    let mut bad = pack.index.clone();
    bad[50] ^= 1;
    assert_eq!(
        decode_index(&bad, &pack.id),
        Err(LayoutError::IndexChecksum)
    );
    assert_eq!(
        decode_pack(&pack.bytes, &"0".repeat(64)).map(|_| ()),
        Err(LayoutError::PackId)
    );
    let err = PackBuilder::default().add_frame(b"frame", &[]).unwrap_err();
    assert_eq!(
        err,
        LayoutError::FrameMembers {
            first: None,
            count: 0
        }
    );
    assert_eq!(err.to_string(), "a group frame carries 0 members");
    let many = vec![members[0]; MAX_FRAME_MEMBERS + 1];
    let err = PackBuilder::default()
        .add_frame(b"frame", &many)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "the group frame of blob {} carries {} members",
            members[0].id,
            MAX_FRAME_MEMBERS + 1
        )
    );
}

#[test]
fn index_names_sit_in_folders_of_their_time_and_sort_by_it_with_older_layouts() {
    let pack = "ab".repeat(32);
    let name = index_name(1_795_312_345_678, &pack);
    assert_eq!(name, format!("t00017953/12/t0001795312345678-{pack}"));
    assert_eq!(
        parse_index_name(&name),
        Some((pack.as_str(), Some(1_795_312_345_678)))
    );
    // Layouts 4 and 1 to 3 still read.
    let flat = format!("t0001795312345678-{pack}");
    assert_eq!(
        parse_index_name(&flat),
        Some((pack.as_str(), Some(1_795_312_345_678)))
    );
    assert_eq!(parse_index_name(&pack), Some((pack.as_str(), None)));
    // A name in folders other than its time's is none: a listing from a mark could miss it.
    for wrong in [
        format!("t00017953/13/t0001795312345678-{pack}"),
        format!("t00017952/12/t0001795312345678-{pack}"),
        format!("x/t0001795312345678-{pack}"),
        format!("t00017953/12/{pack}"),
    ] {
        assert_eq!(parse_index_name(&wrong), None, "{wrong}");
    }
    // Every name written at or after a time sorts after its prefix, across folders; so
    // does every layout 4 name of that time or later (and some of its day before it,
    // listed again at no harm).
    let at = 1_795_312_345_678;
    for later in [
        at,
        at + 1,
        at + 1_000_000,
        at + 100_000_000,
        at + 10_000_000_000,
    ] {
        assert!(index_name(later, &pack) > time_prefix(at), "{later}");
        assert!(format!("t{later:016}-{pack}") > time_prefix(at), "{later}");
    }
    for earlier in [at - 1, at - 1_000_000, at - 100_000_000] {
        assert!(index_name(earlier, &pack) < time_prefix(at), "{earlier}");
    }
    assert!(format!("t{:016}-{pack}", at - 100_000_000) < time_prefix(at));
}
