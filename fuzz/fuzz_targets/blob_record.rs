//! Values of the store's `blobs` table (where a blob's bytes are), the packed payloads
//! they point at in the blob log (raw or zstd), and the frames of small blobs that members
//! are read from, each checked against the blob's id.
#![no_main]

use std::io::Read;

use cas::{
    BlobId, CHUNK_BYTES, fuzzing::BlobLocation, fuzzing::unpack_blob, fuzzing::unpack_member,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    location(data);
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    if flags & 4 == 4 {
        member(flags >> 3, rest);
    } else {
        payload(flags & 1 == 1, flags & 2 == 2, rest);
    }
});

fn location(data: &[u8]) {
    let Some(loc) = BlobLocation::decode(data) else {
        return;
    };
    // Location records have one encoding each.
    assert_eq!(loc.encode(), data);
    match (loc.chunks(), loc.member()) {
        (Some(chunks), _) => {
            assert_eq!(data[0], 1);
            assert_eq!(data.len(), 9 + 32 * chunks.len());
            assert!(loc.is_zstd().is_none());
            assert_eq!(loc.size().to_le_bytes(), data[1..9]);
        }
        (None, Some(_)) => {
            assert_eq!(data[0], 2);
            assert!(loc.is_zstd().is_none());
        }
        (None, None) => {
            assert_eq!(data[0], 0);
            assert_eq!(data.len(), 22);
            assert_eq!(loc.is_zstd(), Some(data[21] == 1));
            assert_eq!(loc.size().to_le_bytes(), data[13..21]);
        }
    }
}

/// A frame of small blobs as read from the log: a member of it, `pick` choosing which
/// stretch of the decoded frame it is.
fn member(pick: u8, frame: &[u8]) {
    let decoded = content_of(true, frame);
    let id_of = |bytes: &[u8]| BlobId::of(bytes);
    if let Some(decoded) = &decoded {
        let len = decoded.len() as u64;
        let start = len * u64::from(pick % 4) / 4;
        let size = (len - start) / 2;
        let expected = &decoded[start as usize..(start + size) as usize];
        let id = id_of(expected);
        match unpack_member(id, frame, start, size) {
            // Whatever a read returns is the member its id names.
            Ok(bytes) => assert_eq!(bytes, expected),
            // (A frame without its size in the header, or over the limit, is refused.)
            Err(_) => {}
        }
        // Past the frame, or under another id: never bytes.
        assert!(unpack_member(id, frame, len + 1, 0).is_err());
        assert!(unpack_member(id, frame, start, u64::MAX).is_err());
        let mut other = *id.as_bytes();
        other[3] ^= 1;
        assert!(unpack_member(BlobId::from_bytes(other), frame, start, size).is_err());
    }
    // What the store writes, it reads back.
    if frame.len() <= CHUNK_BYTES {
        let compressed = zstd::bulk::compress(frame, 3).expect("compresses");
        let start = frame.len() as u64 / 3;
        let member = &frame[start as usize..];
        let back = unpack_member(id_of(member), &compressed, start, member.len() as u64);
        assert_eq!(back.ok().as_deref(), Some(member));
    }
}

/// A payload as read from the log: the content it stands for, by an independent decoder.
fn content_of(zstd: bool, payload: &[u8]) -> Option<Vec<u8>> {
    if !zstd {
        return Some(payload.to_vec());
    }
    let mut out = Vec::new();
    zstd::stream::Decoder::new(payload)
        .ok()?
        .take(CHUNK_BYTES as u64 + 1)
        .read_to_end(&mut out)
        .ok()?;
    Some(out)
}

fn payload(zstd: bool, lie_about_size: bool, payload: &[u8]) {
    let content = content_of(zstd, payload);
    let (id, size) = match &content {
        Some(c) => (BlobId::of(c), c.len() as u64 + u64::from(lie_about_size)),
        None => (BlobId::of(payload), payload.len() as u64),
    };
    match unpack_blob(id, zstd, payload.to_vec(), size) {
        Ok(bytes) => {
            // Whatever a read returns is the content its id names, of its recorded size.
            assert_eq!(BlobId::of(&bytes), id);
            assert_eq!(bytes.len() as u64, size);
            assert!(size <= CHUNK_BYTES as u64);
            // (The oracle refuses what zstd's one-shot decoder reads as empty: no bytes.)
            if let Some(c) = &content {
                assert_eq!(&bytes, c);
            }
        }
        // A zstd frame may be refused that a streaming decoder reads (its header claims
        // more than `size`); raw content of its recorded size never is.
        Err(_) => assert!(
            zstd || lie_about_size || size > CHUNK_BYTES as u64,
            "a raw payload of {size} bytes was refused"
        ),
    }
    // What the store writes, it reads back.
    if !zstd && payload.len() <= CHUNK_BYTES {
        let id = BlobId::of(payload);
        let compressed = zstd::bulk::compress(payload, 3).expect("compresses");
        let back = unpack_blob(id, true, compressed, payload.len() as u64);
        assert_eq!(back.ok().as_deref(), Some(payload));
    }
    let mut other = *id.as_bytes();
    other[7] ^= 4;
    assert!(unpack_blob(BlobId::from_bytes(other), zstd, payload.to_vec(), size).is_err());
}
