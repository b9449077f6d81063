//! Typed 32-byte BLAKE3 ids.
//!
//! Every id is a BLAKE3 digest. [`BlobId`] is the plain BLAKE3 of a file's bytes (so `b3sum`
//! agrees); [`TreeId`] and [`SnapshotId`] hash the canonical encodings of `docs/format.md` in
//! BLAKE3's key-derivation mode, one context string per kind. [`ObjectId`] is the untyped form.

use std::fmt;
use std::str::FromStr;

/// Length of every id in bytes.
pub const ID_LEN: usize = 32;

/// Length of an id in hexadecimal characters.
pub const HEX_LEN: usize = ID_LEN * 2;

/// An input that is not 64 hexadecimal characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{input}' is not an object id: expected {HEX_LEN} lowercase hexadecimal characters")]
pub struct ParseIdError {
    /// What was given.
    pub input: String,
}

macro_rules! id_type {
    ($(#[doc = $doc:literal])* $name:ident) => {
        $(#[doc = $doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name([u8; ID_LEN]);

        impl $name {
            /// Wraps raw digest bytes.
            pub const fn from_bytes(bytes: [u8; ID_LEN]) -> Self {
                Self(bytes)
            }

            /// The raw digest bytes.
            pub const fn as_bytes(&self) -> &[u8; ID_LEN] {
                &self.0
            }

            /// Full lowercase hex, 64 characters.
            pub fn to_hex(&self) -> String {
                hex_encode(&self.0)
            }

            /// The first `n` hex characters, for human output.
            pub fn short(&self, n: usize) -> String {
                let mut hex = self.to_hex();
                hex.truncate(n.min(HEX_LEN));
                hex
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.to_hex())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self.short(16))
            }
        }

        impl FromStr for $name {
            type Err = ParseIdError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                hex_decode(s).map(Self).ok_or_else(|| ParseIdError { input: s.to_owned() })
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.to_hex())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }

        /// Written as its 64 lowercase hex digits.
        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({
                    "type": "string",
                    "pattern": "^[0-9a-f]{64}$",
                    "description": concat!($($doc),*).trim(),
                })
            }
        }
    };
}

macro_rules! typed_id {
    ($(#[doc = $doc:literal])* $name:ident) => {
        id_type!($(#[doc = $doc])* $name);

        impl From<$name> for ObjectId {
            fn from(id: $name) -> ObjectId {
                ObjectId(id.0)
            }
        }
    };
}

id_type!(
    /// An id whose kind is not known or does not matter.
    ObjectId
);
typed_id!(
    /// The id of a file's bytes or a symlink's target: the plain BLAKE3 of the content.
    BlobId
);
typed_id!(
    /// The id of a tree: BLAKE3 (derive-key mode) of its canonical encoding.
    TreeId
);
typed_id!(
    /// The id of a snapshot (commit object): BLAKE3 (derive-key mode) of its canonical encoding.
    SnapshotId
);

id_type!(
    /// The id of an attestation (a check's record): BLAKE3 (derive-key mode) of its canonical
    /// encoding. Not an object of the graph: nothing names it but the index of its tree.
    AttestationId
);

impl ObjectId {
    /// Views this id as a blob id.
    pub const fn as_blob(self) -> BlobId {
        BlobId(self.0)
    }
    /// Views this id as a tree id.
    pub const fn as_tree(self) -> TreeId {
        TreeId(self.0)
    }
    /// Views this id as a snapshot id.
    pub const fn as_snapshot(self) -> SnapshotId {
        SnapshotId(self.0)
    }
}

impl BlobId {
    /// The id of `content`: its plain BLAKE3 digest.
    pub fn of(content: &[u8]) -> BlobId {
        BlobId(*blake3::hash(content).as_bytes())
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

pub(crate) fn hex_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}

fn hex_decode(s: &str) -> Option<[u8; ID_LEN]> {
    let digits = s.as_bytes();
    if digits.len() != HEX_LEN {
        return None;
    }
    let mut out = [0u8; ID_LEN];
    for (i, pair) in digits.chunks_exact(2).enumerate() {
        out[i] = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(out)
}

/// The value of one lowercase hex digit.
pub(crate) fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// A hex prefix of an id, at least [`IdPrefix::MIN_LEN`] characters, used to look ids up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdPrefix {
    text: String,
    low: [u8; ID_LEN],
    high: [u8; ID_LEN],
}

impl IdPrefix {
    /// The shortest prefix accepted.
    pub const MIN_LEN: usize = 6;

    /// Parses `text` if it is 6 to 64 lowercase hex digits.
    pub fn parse(text: &str) -> Option<IdPrefix> {
        let digits = text.as_bytes();
        if digits.len() < Self::MIN_LEN || digits.len() > HEX_LEN {
            return None;
        }
        let mut low = [0u8; ID_LEN];
        let mut high = [0xffu8; ID_LEN];
        for (i, &c) in digits.iter().enumerate() {
            let v = nibble(c)?;
            let byte = i / 2;
            if i % 2 == 0 {
                low[byte] = v << 4;
                high[byte] = (v << 4) | 0x0f;
            } else {
                low[byte] |= v;
                high[byte] = (high[byte] & 0xf0) | v;
            }
        }
        Some(IdPrefix {
            text: text.to_owned(),
            low,
            high,
        })
    }

    /// The smallest id with this prefix.
    pub fn low(&self) -> [u8; ID_LEN] {
        self.low
    }

    /// The largest id with this prefix.
    pub fn high(&self) -> [u8; ID_LEN] {
        self.high
    }

    /// The prefix as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_and_rejects_bad_input() {
        let id = BlobId::of(b"hello");
        let hex = id.to_hex();
        assert_eq!(hex, blake3::hash(b"hello").to_hex().as_str());
        assert_eq!(hex.parse::<BlobId>().unwrap(), id);
        assert!("ABC".parse::<BlobId>().is_err());
        assert!(hex.to_uppercase().parse::<BlobId>().is_err());
        assert!(format!("{hex}0").parse::<BlobId>().is_err());
    }

    #[test]
    fn prefix_bounds_cover_exactly_the_prefix() {
        let p = IdPrefix::parse("abc12").map(|_| ());
        assert!(p.is_none(), "5 digits is too short");
        let p = IdPrefix::parse("abc123f").unwrap();
        assert_eq!(&p.low()[..4], &[0xab, 0xc1, 0x23, 0xf0]);
        assert_eq!(&p.high()[..4], &[0xab, 0xc1, 0x23, 0xff]);
        assert_eq!(p.high()[31], 0xff);
        assert!(IdPrefix::parse("abc12g").is_none());
    }
}
