//! Names and ids read from the `refs` table, command lines and requests: ref names, object
//! ids and id prefixes in hex, snapshot labels and tree entry names.
#![no_main]

use cas::{HEX_LEN, IdPrefix, ObjectId, parse_label, validate_name, validate_ref_name};
use libfuzzer_sys::fuzz_target;

fn is_hex(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fuzz_target!(|data: &[u8]| {
    // Tree entry names are raw bytes.
    if validate_name(data).is_ok() {
        assert!(!data.is_empty() && data.len() <= cas::MAX_NAME_LEN);
        assert!(!data.contains(&b'/') && !data.contains(&0));
        assert!(data != b"." && data != b"..");
        assert!(!data.eq_ignore_ascii_case(b".git"));
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };

    let ref_ok = validate_ref_name(text).is_ok();
    let expected = !text.is_empty()
        && text.len() <= 255
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b))
        && !text.starts_with('-')
        && text
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
        && !(text.len() == HEX_LEN && is_hex(text));
    assert_eq!(ref_ok, expected, "ref name {text:?}");

    match text.parse::<ObjectId>() {
        Ok(id) => {
            assert_eq!(id.to_hex(), text);
            assert_eq!(ObjectId::from_bytes(*id.as_bytes()), id);
        }
        Err(_) => assert!(text.len() != HEX_LEN || !is_hex(text)),
    }

    match IdPrefix::parse(text) {
        Some(prefix) => {
            assert!((IdPrefix::MIN_LEN..=HEX_LEN).contains(&text.len()) && is_hex(text));
            assert!(prefix.low() <= prefix.high());
            assert!(
                ObjectId::from_bytes(prefix.low())
                    .to_hex()
                    .starts_with(text)
            );
            assert!(
                ObjectId::from_bytes(prefix.high())
                    .to_hex()
                    .starts_with(text)
            );
            assert_eq!(prefix.as_str(), text);
        }
        None => assert!(
            !(IdPrefix::MIN_LEN..=HEX_LEN).contains(&text.len()) || !is_hex(text),
            "prefix {text:?} refused"
        ),
    }

    if let Ok((key, value)) = parse_label(text) {
        assert_eq!(format!("{key}={value}"), text);
        assert!(cas::validate_label_key(&key).is_ok() && !key.contains('='));
    }
});
