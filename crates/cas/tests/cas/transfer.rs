//! Objects between stores: payloads out and in, checked; objects promised by a remote.

use cas::*;

use crate::util::{commit, noise, temp_store};

fn copy_snapshot_without_parents(from: &Reader, to: &Store, id: SnapshotId, remote: &str) {
    let snap = from.snapshot(id).unwrap();
    let mut batch = WriteBatch::new();
    let tree = from.tree(snap.tree).unwrap();
    for entry in tree.entries() {
        let blob = entry.blob().unwrap();
        let payload = from.blob_payload(blob).unwrap();
        batch.add_blob(PreparedBlob::from_payload(blob, payload).unwrap());
    }
    batch.add_tree(tree);
    for p in &snap.parents {
        batch.promise((*p).into(), remote);
    }
    batch.add_snapshot(snap);
    to.write(&batch).unwrap();
}

#[test]
fn a_payload_travels_as_stored_and_comes_back_checked() {
    let a = temp_store();
    let small = b"hello hello hello hello hello hello\n".repeat(10);
    let big = noise(3, CHUNK_BYTES * 2 + 17);
    let small_id = a.store.put_blob(&small).unwrap();
    let big_id = a.store.put_blob(&big).unwrap();
    let reader = a.store.reader().unwrap();

    let payload = reader.blob_payload(small_id).unwrap();
    assert!(payload.zstd, "repetitive text goes compressed");
    assert!(payload.bytes.len() < small.len());
    let b = temp_store();
    let mut batch = WriteBatch::new();
    batch.add_blob(PreparedBlob::from_payload(small_id, payload.clone()).unwrap());
    let big_payload = reader.blob_payload(big_id).unwrap();
    assert_eq!(big_payload.size, big.len() as u64);
    batch.add_blob(PreparedBlob::from_payload(big_id, big_payload).unwrap());
    b.store.write(&batch).unwrap();
    let back = b.store.reader().unwrap();
    assert_eq!(back.blob(small_id).unwrap(), small);
    assert_eq!(back.blob(big_id).unwrap(), big);

    // A flipped byte, a wrong size, a payload of other content: refused, naming the id.
    let mut flipped = payload.clone();
    let last = flipped.bytes.len() - 1;
    flipped.bytes[last] ^= 1;
    let mut short = payload.clone();
    short.size -= 1;
    let other = BlobPayload {
        size: 5,
        zstd: false,
        bytes: b"other".to_vec(),
    };
    for bad in [flipped, short, other] {
        let err = verify_blob_payload(small_id, bad).unwrap_err();
        assert!(err.to_string().contains(&small_id.to_string()), "{err}");
    }
}

#[test]
fn a_snapshot_whose_parents_are_promised_is_whole_for_fsck_and_gc() {
    let a = temp_store();
    let first = commit(&a.store, &[("a", b"one")], vec![], "first");
    let second = commit(&a.store, &[("a", b"two")], vec![first], "second");
    let from = a.store.reader().unwrap();

    let mut b = temp_store();
    // Without the promise, the missing parent is refused.
    let snap = from.snapshot(second).unwrap();
    let mut batch = WriteBatch::new();
    batch.add_blob(PreparedBlob::new(b"two"));
    batch.add_tree(from.tree(snap.tree).unwrap());
    batch.add_snapshot(snap);
    assert!(matches!(
        b.store.write(&batch),
        Err(WriteError::Dangling { id, .. }) if id == first.into()
    ));

    copy_snapshot_without_parents(&from, &b.store, second, "origin");
    b.store.set_ref("main", second).unwrap();
    let reader = b.store.reader().unwrap();
    assert_eq!(
        reader.promised(first.into()).unwrap().as_deref(),
        Some("origin")
    );
    assert!(!reader.has_snapshot(first).unwrap());
    let fsck = b.store.fsck(&StoreFsckOptions::default(), &[]).unwrap();
    assert!(fsck.problems.is_empty(), "{:?}", fsck.problems);
    drop(reader);
    let gc = b.store.gc(&StoreGcOptions::default(), &[]).unwrap();
    assert!(gc.removed.is_empty(), "{gc:?}");
    assert!(b.store.reader().unwrap().has_snapshot(second).unwrap());

    // Fetching the parent later stores it and ends the promise.
    copy_snapshot_without_parents(&from, &b.store, first, "origin");
    let reader = b.store.reader().unwrap();
    assert!(reader.has_snapshot(first).unwrap());
    assert_eq!(reader.promised(first.into()).unwrap(), None);
    assert_eq!(reader.log(second, None).unwrap().len(), 2);
}

/// Writes `contents` in one batch (small ones: in a group frame); their ids.
fn write_together(store: &Store, contents: &[Vec<u8>]) -> Vec<BlobId> {
    let mut batch = WriteBatch::new();
    for c in contents {
        batch.add_blob(PreparedBlob::new(c));
    }
    store.write(&batch).unwrap();
    contents.iter().map(|c| BlobId::of(c)).collect()
}

/// The group frames holding `wanted`, each with the members of it wanted, in order.
fn frames_of(reader: &Reader, wanted: &[BlobId]) -> Vec<(FrameRef, Vec<FrameMember>)> {
    let mut out: Vec<(FrameRef, Vec<FrameMember>)> = Vec::new();
    for id in wanted {
        let BlobSource::Member { frame, member } = reader.blob_source(*id).unwrap() else {
            panic!("{id} is a member of a frame");
        };
        match out.iter_mut().find(|(f, _)| *f == frame) {
            Some((_, members)) => members.push(member),
            None => out.push((frame, vec![member])),
        }
    }
    out
}

#[test]
fn a_group_frame_travels_as_stored_and_is_written_as_it_came() {
    let a = temp_store();
    let contents: Vec<Vec<u8>> = (0..300)
        .map(|i| format!("// small file {i}\nconst N: u32 = {i};\n").into_bytes())
        .collect();
    let ids = write_together(&a.store, &contents);
    let reader = a.store.reader().unwrap();
    let frames = frames_of(&reader, &ids);
    assert_eq!(frames.len(), 1, "300 files of 40 bytes make one frame");
    let (at, members) = frames[0].clone();

    // Out: the frame as stored, once for all its members.
    let frame = reader.frame(at, members.clone()).unwrap().expect("whole");
    assert_eq!(frame.members(), members.as_slice());
    assert!(frame.bytes().len() * 4 < contents.iter().map(Vec::len).sum::<usize>());
    // In: checked, and written as it came.
    let ReceivedFrame::Whole(received) =
        verify_frame(frame.bytes().to_vec(), members.clone()).unwrap()
    else {
        panic!("every member wanted: whole");
    };
    let b = temp_store();
    // B has one member already: it is not recorded again.
    b.store.put_blob(&contents[7]).unwrap();
    let mut batch = WriteBatch::new();
    batch.add_frame(received.clone());
    let out = b.store.write(&batch).unwrap();
    assert_eq!(out.blobs_written, 299);
    assert_eq!(out.bytes_written, frame.bytes().len() as u64);
    let back = b.store.reader().unwrap();
    for (id, c) in ids.iter().zip(&contents) {
        assert_eq!(&back.blob(*id).unwrap(), c);
    }
    let again = frames_of(&back, &ids[8..]);
    assert_eq!(
        back.frame(again[0].0, again[0].1.clone())
            .unwrap()
            .unwrap()
            .bytes(),
        frame.bytes(),
        "byte for byte the frame A holds"
    );
    drop(back);
    // A frame whose members are all stored adds nothing.
    let mut batch = WriteBatch::new();
    batch.add_frame(received);
    let out = b.store.write(&batch).unwrap();
    assert_eq!((out.blobs_written, out.bytes_written), (0, 0));
    let fsck = b.store.fsck(&StoreFsckOptions::default(), &[]).unwrap();
    assert!(fsck.problems.is_empty(), "{:?}", fsck.problems);

    // A few members of a large frame go alone, both ways.
    let few = members[..10].to_vec();
    assert!(reader.frame(at, few.clone()).unwrap().is_none());
    let ReceivedFrame::Apart(blobs) = verify_frame(frame.bytes().to_vec(), few).unwrap() else {
        panic!("ten members of 300: apart");
    };
    let got: Vec<BlobId> = blobs.iter().map(PreparedBlob::id).collect();
    assert_eq!(got, ids[..10]);
}

#[test]
fn a_damaged_frame_or_member_is_refused_naming_the_member() {
    let a = temp_store();
    let contents: Vec<Vec<u8>> = (0..50)
        .map(|i| format!("member {i} of a frame\n").repeat(3).into_bytes())
        .collect();
    let ids = write_together(&a.store, &contents);
    let reader = a.store.reader().unwrap();
    let (at, members) = frames_of(&reader, &ids).remove(0);
    let frame = reader.frame(at, members.clone()).unwrap().unwrap();

    // A flipped byte in the frame: it does not decode, or a member's bytes change.
    let mut flipped = frame.bytes().to_vec();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x10;
    let err = verify_frame(flipped, members.clone()).unwrap_err();
    assert!(
        members
            .iter()
            .any(|m| err.to_string().contains(&m.id.to_string())),
        "{err}"
    );
    // A member placed one byte off, or past the frame: refused naming it.
    let mut moved = members.clone();
    moved[3].start += 1;
    let err = verify_frame(frame.bytes().to_vec(), moved).unwrap_err();
    assert_eq!(err.id(), ids[3].into(), "{err}");
    let mut past = members.clone();
    past[5].start = u32::MAX - 2;
    let err = verify_frame(frame.bytes().to_vec(), past).unwrap_err();
    assert!(err.to_string().contains("past"), "{err}");
    // Not a frame at all, or one claiming more than any frame may hold.
    let err = verify_frame(b"not zstd".to_vec(), members.clone()).unwrap_err();
    assert_eq!(err.id(), ids[0].into(), "{err}");
    let huge = zstd::bulk::compress(&vec![0u8; (MAX_FRAME_BYTES + 1) as usize], 3).unwrap();
    let err = verify_frame(huge, members).unwrap_err();
    assert!(err.to_string().contains("claims"), "{err}");
}
