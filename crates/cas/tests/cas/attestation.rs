//! Attestations: the canonical encoding against `docs/format.md`'s test vector (read from the
//! page itself, so the page cannot drift), decoding's refusals, and the store's records.

use cas::*;

use crate::util::temp_store;

/// The fixture of `docs/format.md`, section "Attestation".
fn fixture() -> Attestation {
    Attestation {
        tree: "4cb9ec7bbe490a813df343f1c09def0a98e79ac3b9ae5916f55a9c5a7a13196a"
            .parse()
            .unwrap(),
        check: "tests".into(),
        command: vec!["pytest".into(), "-q".into()],
        env: [("PYTHONHASHSEED".to_string(), "0".to_string())]
            .into_iter()
            .collect(),
        exit: Exit {
            code: 1,
            signal: None,
            timed_out: false,
        },
        started: jiff::Timestamp::from_second(1_700_000_000).unwrap(),
        duration_ms: 1234,
        host: "ci-1".into(),
        version: "0.1.0".into(),
        stdout: CheckOutput {
            blob: BlobId::of(b"1 failed\n"),
            cut: false,
        },
        stderr: CheckOutput {
            blob: BlobId::of(b""),
            cut: false,
        },
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The attestation section of `docs/format.md`: its encoding (the indented block after
/// "(spaces added between fields):", spaces removed) and its id line.
fn documented() -> (String, String) {
    let page =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/format.md"))
            .expect("docs/format.md");
    let section = page
        .split("\n## Attestation\n")
        .nth(1)
        .expect("docs/format.md has a section \"## Attestation\"");
    let section = section.split("\n## ").next().unwrap_or(section);
    let vector = section
        .split("The attestation (spaces added between fields):\n")
        .nth(1)
        .expect("the section has the test vector");
    let mut lines = vector.lines().skip_while(|l| l.trim().is_empty());
    let mut encoding = String::new();
    for line in lines.by_ref() {
        if line.trim().is_empty() {
            break;
        }
        assert!(line.starts_with("    "), "an indented line: {line:?}");
        encoding.extend(line.split_whitespace());
    }
    let id = lines
        .find_map(|l| l.trim().strip_prefix("attestation id "))
        .expect("the vector's id line")
        .trim()
        .to_owned();
    (encoding, id)
}

#[test]
fn the_documented_vector_is_what_the_code_encodes() {
    let a = fixture();
    let (encoding, id) = documented();
    assert_eq!(hex(&a.encode()), encoding);
    assert_eq!(a.id().to_hex(), id);
    // The id is BLAKE3 in derive-key mode with the documented context, as for trees.
    let mut h = blake3::Hasher::new_derive_key("cairn 2026-11-27 attestation v1");
    h.update(&a.encode());
    assert_eq!(h.finalize().to_hex().as_str(), id);
    assert_eq!(Attestation::decode(&a.encode()).unwrap(), a);
    assert!(!a.exit.passed());
}

#[test]
fn decoding_refuses_what_is_not_canonical() {
    let a = fixture();
    let bytes = a.encode();
    let mut trailing = bytes.clone();
    trailing.push(0);
    assert!(matches!(
        Attestation::decode(&trailing),
        Err(ObjectError::TrailingBytes(1))
    ));
    assert!(matches!(
        Attestation::decode(&bytes[..bytes.len() - 1]),
        Err(ObjectError::Truncated)
    ));
    // A cut flag of 2.
    let mut flag = bytes.clone();
    *flag.last_mut().unwrap() = 2;
    assert!(Attestation::decode(&flag).is_err());
    // Environment variables out of order.
    let mut two = a.clone();
    two.env.insert("A".into(), "1".into());
    let encoded = two.encode();
    let swapped = {
        let s = hex(&encoded);
        let a = format!("{}{}", hex(&1u32.to_le_bytes()), hex(b"A"));
        let p = format!("{}{}", hex(&14u32.to_le_bytes()), hex(b"PYTHONHASHSEED"));
        let one = format!("{a}{}{}", hex(&1u32.to_le_bytes()), hex(b"1"));
        let zero = format!("{p}{}{}", hex(&1u32.to_le_bytes()), hex(b"0"));
        s.replacen(&format!("{one}{zero}"), &format!("{zero}{one}"), 1)
    };
    let swapped: Vec<u8> = (0..swapped.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&swapped[i..i + 2], 16).unwrap())
        .collect();
    assert_ne!(swapped, encoded);
    assert!(Attestation::decode(&swapped).is_err());
    // An id that is not the hash of the bytes.
    assert!(decode_attestation(AttestationId::from_bytes([0; 32]), &bytes).is_err());
}

#[test]
fn a_tree_finds_its_attestations_and_their_signatures() {
    let t = temp_store();
    let store = &t.store;
    let mut batch = WriteBatch::new();
    let out = batch.add_blob(PreparedBlob::new(b"1 failed\n"));
    let err = batch.add_blob(PreparedBlob::new(b""));
    let tree = batch.add_tree(Tree::new(vec![]).unwrap());
    let mut a = fixture();
    a.tree = tree;
    a.stdout.blob = out;
    a.stderr.blob = err;
    let id = batch.add_attestation(&a);
    batch.add_attestation_signature(id, "SHA256:abc", b"armored".to_vec());
    store.write(&batch).unwrap();
    let reader = store.reader().unwrap();
    assert_eq!(reader.attestations(tree).unwrap(), vec![(id, a)]);
    assert_eq!(
        reader.attestation_signatures(id).unwrap(),
        vec![("SHA256:abc".to_owned(), b"armored".to_vec())]
    );
    let other = TreeId::from_bytes([7; 32]);
    assert!(reader.attestations(other).unwrap().is_empty());
}
