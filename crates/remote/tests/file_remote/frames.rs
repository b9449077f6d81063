//! Small files travel as the store's frames, whole or member by member.

use cas::*;
use remote::{Need, RemoteError, Silent, fetch, push};

use crate::util::*;

#[test]
fn a_thousand_small_files_travel_as_the_stores_frames_and_come_back_byte_identical() {
    use remote::layout::Encoding;
    let f = Fixture::new();
    let a = f.store("a");
    let files = small_files();
    let id = commit(&a, &as_files(&files), vec![]);
    let remote = f.remote();
    let pushed = push(&remote, &a, &[id], &Silent).unwrap();
    assert_eq!(pushed.objects_sent, 1000 + 11 + 1, "{pushed:?}");

    // On the remote: one entry per object in the indexes, but the blobs' payloads are a
    // few group frames, each byte for byte a frame store A holds.
    let packs = remote_packs(&f.root);
    assert_eq!(packs.len(), 1012);
    let payloads: std::collections::HashSet<(&str, u64)> = packs
        .iter()
        .map(|(p, e, _)| (p.as_str(), e.offset))
        .collect();
    let frames: Vec<&(String, remote::layout::PackEntry, Vec<u8>)> = packs
        .iter()
        .filter(|(_, e, _)| e.encoding == Encoding::Frame)
        .collect();
    assert_eq!(frames.len(), 1000, "every file is a frame's member");
    assert!(
        payloads.len() < 30,
        "{} payloads for 1012 objects",
        payloads.len()
    );
    let reader = a.reader().unwrap();
    for (_, e, payload) in &frames {
        let BlobSource::Member { frame, member } = reader.blob_source(e.id.as_blob()).unwrap()
        else {
            panic!("{} is stored in a frame", e.id);
        };
        assert_eq!((member.start, u64::from(member.size)), (e.start, e.size));
        let stored = reader.frame(frame, vec![member]).unwrap();
        // One member of its frame: too little to read it whole; the payload is checked
        // against the frame's other members below, by the fetch.
        assert!(stored.is_none() || stored.unwrap().bytes() == payload.as_slice());
    }

    // What layout version 1 sent for the same objects: per object a 46-byte pack header,
    // a 54-byte index entry and its payload alone (a blob's as `blob_payload` gives it),
    // per pack its magic and the index's fixed 76 bytes.
    let blob_payloads: u64 = files
        .iter()
        .map(|(_, c)| reader.blob_payload(BlobId::of(c)).unwrap().bytes.len() as u64)
        .sum();
    let others: u64 = packs
        .iter()
        .filter(|(_, e, _)| e.kind != ObjectKind::Blob)
        .map(|(_, e, _)| u64::from(e.len))
        .sum();
    let pack_count = payloads
        .iter()
        .map(|(p, _)| *p)
        .collect::<std::collections::HashSet<_>>()
        .len() as u64;
    let v1 = 1012 * (46 + 54) + blob_payloads + others + pack_count * (8 + 76);
    eprintln!(
        "1000 small files: version 2 sent {} bytes in {} payloads; version 1: {v1} bytes in 1012",
        pushed.bytes_sent,
        payloads.len()
    );
    assert!(
        pushed.bytes_sent < v1 * 3 / 4,
        "{} vs {v1}",
        pushed.bytes_sent
    );
    drop(reader);

    // Back into a fresh store: byte for byte, the frames kept as they came.
    let b = f.store("b");
    let got = fetch(&remote, &b, &[id], Need::History, &Silent).unwrap();
    assert_eq!(got.objects_received, 1012);
    assert!(got.bytes_received < v1 / 2, "{got:?}");
    let expected: std::collections::BTreeMap<String, Vec<u8>> = files.into_iter().collect();
    assert_eq!(files_of(&b, id), expected);
    let back = b.reader().unwrap();
    let mut frames_here = std::collections::HashSet::new();
    for content in expected.values() {
        match back.blob_source(BlobId::of(content)).unwrap() {
            BlobSource::Member { frame, .. } => frames_here.insert(frame),
            other => panic!("{other:?}: a fetched member stays in its frame"),
        };
    }
    assert_eq!(
        frames_here.len(),
        frames
            .iter()
            .map(|(p, e, _)| (p, e.offset))
            .collect::<std::collections::HashSet<_>>()
            .len()
    );
    drop(back);
    let fsck = b.fsck(&StoreFsckOptions::default(), &[]).unwrap();
    assert!(fsck.problems.is_empty(), "{:?}", fsck.problems);
}

#[test]
fn a_damaged_frame_or_member_is_refused_naming_it_and_nothing_of_it_is_stored() {
    use remote::layout::Encoding;
    let f = Fixture::new();
    let a = f.store("a");
    let files = small_files();
    let id = commit(&a, &as_files(&files[..200]), vec![]);
    let remote = f.remote();
    push(&remote, &a, &[id], &Silent).unwrap();
    let members: Vec<remote::layout::PackEntry> = remote_packs(&f.root)
        .into_iter()
        .filter(|(_, e, _)| e.encoding == Encoding::Frame)
        .map(|(_, e, _)| e)
        .collect();
    assert_eq!(members.len(), 200);
    let nothing_stored = |b: &Store| {
        let r = b.reader().unwrap();
        assert!(!r.has_snapshot(id).unwrap());
        for m in &members {
            assert!(!r.has_blob(m.id.as_blob()).unwrap(), "{} was stored", m.id);
        }
    };

    // A member placed one byte off in its index: refused, naming it.
    let moved = members[17].id;
    rewrite_indexes(&f.root, |entry| {
        if entry[2..34] == *moved.as_bytes() {
            let start = u32::from_le_bytes(entry[54..58].try_into().unwrap());
            entry[54..58].copy_from_slice(&(start + 1).to_le_bytes());
        }
    });
    let b = f.store("b");
    let err = fetch(&remote, &b, &[id], Need::Closure, &Silent).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, RemoteError::Corrupt { .. }), "{text}");
    assert!(
        text.contains(&moved.to_string()) && text.contains("origin"),
        "{text}"
    );
    nothing_stored(&b);
    rewrite_indexes(&f.root, |entry| {
        if entry[2..34] == *moved.as_bytes() {
            let start = u32::from_le_bytes(entry[54..58].try_into().unwrap());
            entry[54..58].copy_from_slice(&(start - 1).to_le_bytes());
        }
    });

    // A flipped byte inside the frame on the remote's disk: refused, naming a member.
    let frame = members[0];
    for pack in std::fs::read_dir(f.root.join("remote/packs")).unwrap() {
        let path = pack.unwrap().path();
        let mut bytes = std::fs::read(&path).unwrap();
        if bytes.len() as u64 >= frame.offset + u64::from(frame.len) {
            let at = (frame.offset + u64::from(frame.len) / 2) as usize;
            bytes[at] ^= 0x08;
            std::fs::write(&path, bytes).unwrap();
        }
    }
    let err = fetch(&remote, &b, &[id], Need::Closure, &Silent).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, RemoteError::Corrupt { .. }), "{text}");
    assert!(
        text.contains("origin") && members.iter().any(|m| text.contains(&m.id.to_string())),
        "{text}"
    );
    nothing_stored(&b);
}

#[test]
fn a_few_members_of_a_large_frame_travel_alone_both_ways() {
    use remote::layout::Encoding;
    let f = Fixture::new();
    let a = f.store("a");
    let files = small_files();
    let all = commit(&a, &as_files(&files), vec![]);
    let few = commit(&a, &as_files(&files[..10]), vec![]);
    let remote = f.remote();

    // Push: ten members of a frame of hundreds go alone, not with the whole frame.
    push(&remote, &a, &[few], &Silent).unwrap();
    let packs = remote_packs(&f.root);
    let blobs: Vec<_> = packs
        .iter()
        .filter(|(_, e, _)| e.kind == ObjectKind::Blob)
        .collect();
    assert_eq!(blobs.len(), 10);
    assert!(blobs.iter().all(|(_, e, _)| e.encoding != Encoding::Frame));
    let b = f.store("b");
    fetch(&remote, &b, &[few], Need::History, &Silent).unwrap();
    let expected = |range: std::ops::Range<usize>| -> std::collections::BTreeMap<String, Vec<u8>> {
        files[range].iter().cloned().collect()
    };
    assert_eq!(files_of(&b, few), expected(0..10));

    // Fetch: ten members of a frame the remote holds whole are kept apart, in a frame of
    // this store's own, not with the other members' bytes.
    push(&remote, &a, &[all], &Silent).unwrap();
    let middle = commit(&a, &as_files(&files[500..510]), vec![]);
    let pushed = push(&remote, &a, &[middle], &Silent).unwrap();
    assert_eq!(
        pushed.objects_sent, 3,
        "two trees and the snapshot: {pushed:?}"
    );
    let remote_frame = remote_packs(&f.root)
        .into_iter()
        .find(|(_, e, _)| e.id == BlobId::of(&files[505].1).into())
        .map(|(_, e, _)| e)
        .unwrap();
    assert_eq!(remote_frame.encoding, Encoding::Frame);
    let c = f.store("c");
    fetch(&remote, &c, &[middle], Need::History, &Silent).unwrap();
    assert_eq!(files_of(&c, middle), expected(500..510));
    let reader = c.reader().unwrap();
    let mut here = Vec::new();
    for (_, content) in &files[500..510] {
        let BlobSource::Member { frame, member } = reader.blob_source(BlobId::of(content)).unwrap()
        else {
            panic!("ten small files written together make a frame");
        };
        here.push((frame, member));
    }
    let frame = reader
        .frame(here[0].0, here.iter().map(|(_, m)| *m).collect())
        .unwrap()
        .expect("all ten of it");
    assert!(
        (frame.bytes().len() as u32) < remote_frame.len / 4,
        "{} bytes here, the remote's frame {}",
        frame.bytes().len(),
        remote_frame.len
    );
}
