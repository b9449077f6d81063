//! The text a value holds, visited through its `Serialize` impl without building JSON: a
//! request's strings (paths, names, messages, list items) whatever its verb, so a check of
//! every argument needs no list of each verb's fields.

use serde::Serialize;
use serde::ser;

/// The first string in `value` for which `wanted` holds.
pub(crate) fn find_text<T: Serialize + ?Sized>(
    value: &T,
    wanted: &dyn Fn(&str) -> bool,
) -> Option<String> {
    let mut texts = Texts {
        wanted,
        found: None,
    };
    // Only a found string stops the walk early; nothing else fails.
    let _ = value.serialize(&mut texts);
    texts.found
}

struct Texts<'a> {
    wanted: &'a dyn Fn(&str) -> bool,
    found: Option<String>,
}

/// Stops the walk once a string is found.
#[derive(Debug)]
struct Found;

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("found")
    }
}

impl std::error::Error for Found {}

impl ser::Error for Found {
    fn custom<T: std::fmt::Display>(_: T) -> Found {
        Found
    }
}

/// Methods that hold no text.
macro_rules! no_text {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(fn $method(self, _: $ty) -> Result<(), Found> { Ok(()) })*
    };
}

impl ser::Serializer for &mut Texts<'_> {
    type Ok = ();
    type Error = Found;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    no_text!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_bytes(&[u8]),
        serialize_unit_struct(&'static str),
    );

    fn serialize_char(self, c: char) -> Result<(), Found> {
        self.serialize_str(c.encode_utf8(&mut [0; 4]))
    }

    fn serialize_str(self, s: &str) -> Result<(), Found> {
        if (self.wanted)(s) {
            self.found = Some(s.to_owned());
            return Err(Found);
        }
        Ok(())
    }

    fn serialize_none(self) -> Result<(), Found> {
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Found> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), Found> {
        Ok(())
    }

    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<(), Found> {
        Ok(())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Found> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        value: &T,
    ) -> Result<(), Found> {
        value.serialize(self)
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Self, Found> {
        Ok(self)
    }

    fn serialize_tuple(self, _: usize) -> Result<Self, Found> {
        Ok(self)
    }

    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self, Found> {
        Ok(self)
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self, Found> {
        Ok(self)
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Self, Found> {
        Ok(self)
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, Found> {
        Ok(self)
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self, Found> {
        Ok(self)
    }
}

/// Every element of a compound value is visited; the names of fields and variants (and
/// map keys, which are names) are not arguments.
macro_rules! elements {
    ($($trait:ident: $method:ident),* $(,)?) => {
        $(impl ser::$trait for &mut Texts<'_> {
            type Ok = ();
            type Error = Found;

            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Found> {
                value.serialize(&mut **self)
            }

            fn end(self) -> Result<(), Found> {
                Ok(())
            }
        })*
    };
}

elements!(
    SerializeSeq: serialize_element,
    SerializeTuple: serialize_element,
    SerializeTupleStruct: serialize_field,
    SerializeTupleVariant: serialize_field,
);

impl ser::SerializeMap for &mut Texts<'_> {
    type Ok = ();
    type Error = Found;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, _: &T) -> Result<(), Found> {
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Found> {
        value.serialize(&mut **self)
    }

    fn end(self) -> Result<(), Found> {
        Ok(())
    }
}

macro_rules! fields {
    ($($trait:ident),*) => {
        $(impl ser::$trait for &mut Texts<'_> {
            type Ok = ();
            type Error = Found;

            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                _: &'static str,
                value: &T,
            ) -> Result<(), Found> {
                value.serialize(&mut **self)
            }

            fn end(self) -> Result<(), Found> {
                Ok(())
            }
        })*
    };
}

fields!(SerializeStruct, SerializeStructVariant);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Request;

    #[test]
    fn every_string_of_a_request_is_visited_and_only_strings() {
        let args = serde_json::json!({
            "worktree": "w", "snapshot": "s", "dry_run": true, "paths": ["a", "b\0c"],
        });
        let serde_json::Value::Object(args) = args else {
            panic!("an object")
        };
        let request = Request::from_verb("rollback", args).expect("a rollback");
        let has_nul = |s: &str| s.contains('\0');
        assert_eq!(find_text(&request, &has_nul).as_deref(), Some("b\0c"));
        // The verb's name is no argument, nor are field names.
        assert_eq!(find_text(&request, &|s: &str| s == "rollback"), None);
        assert_eq!(find_text(&request, &|s: &str| s == "worktree"), None);
        assert_eq!(
            find_text(&request, &|s: &str| s == "s").as_deref(),
            Some("s")
        );
    }
}
