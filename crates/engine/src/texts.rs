//! What a value holds, visited through its `Serialize` impl without building JSON: a
//! request's strings (paths, names, messages, list items), its lists and its counts,
//! whatever its verb, each with the name of the argument it is in, so a check of every
//! argument needs no list of each verb's fields.

use serde::Serialize;
use serde::ser;

/// What a walk meets in a value; any method may stop the walk (`Err(Stop)`), keeping what
/// it found in the visitor.
pub(crate) trait Visit {
    /// The walk enters the field `name` of a struct `depth` structs deep (the value walked
    /// is at depth 0, so an options struct's own fields are at depth 1).
    fn field(&mut self, _depth: usize, _name: &'static str) {}
    /// A string.
    fn text(&mut self, text: &str) -> Result<(), Stop>;
    /// A list starts (`len` items, when known); [`Visit::list_end`] ends it.
    fn list(&mut self, _len: Option<usize>) -> Result<(), Stop> {
        Ok(())
    }
    /// The list last started ends.
    fn list_end(&mut self) {}
    /// An unsigned number.
    fn number(&mut self, _number: u64) -> Result<(), Stop> {
        Ok(())
    }
}

/// Walks `value`, telling `visitor` what it holds, until the visitor stops it.
pub(crate) fn walk<T: Serialize + ?Sized>(value: &T, visitor: &mut dyn Visit) {
    let mut walk = Walk { visitor, depth: 0 };
    // Only a visitor stops the walk early (keeping what it found); nothing else fails.
    let _ = value.serialize(&mut walk);
}

/// The first string in `value` for which `wanted` holds.
pub(crate) fn find_text<T: Serialize + ?Sized>(
    value: &T,
    wanted: &dyn Fn(&str) -> bool,
) -> Option<String> {
    struct Find<'a> {
        wanted: &'a dyn Fn(&str) -> bool,
        found: Option<String>,
    }
    impl Visit for Find<'_> {
        fn text(&mut self, text: &str) -> Result<(), Stop> {
            if (self.wanted)(text) {
                self.found = Some(text.to_owned());
                return Err(Stop);
            }
            Ok(())
        }
    }
    let mut find = Find {
        wanted,
        found: None,
    };
    walk(value, &mut find);
    find.found
}

struct Walk<'a> {
    visitor: &'a mut dyn Visit,
    /// How many structs deep the walk is.
    depth: usize,
}

/// Stops a walk.
#[derive(Debug)]
pub(crate) struct Stop;

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stopped")
    }
}

impl std::error::Error for Stop {}

impl ser::Error for Stop {
    fn custom<T: std::fmt::Display>(_: T) -> Stop {
        Stop
    }
}

/// Methods that hold nothing a visitor is told of.
macro_rules! nothing {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(fn $method(self, _: $ty) -> Result<(), Stop> { Ok(()) })*
    };
}

impl ser::Serializer for &mut Walk<'_> {
    type Ok = ();
    type Error = Stop;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    nothing!(
        serialize_bool(bool),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_bytes(&[u8]),
        serialize_unit_struct(&'static str),
    );

    fn serialize_i8(self, n: i8) -> Result<(), Stop> {
        self.serialize_i64(n.into())
    }

    fn serialize_i16(self, n: i16) -> Result<(), Stop> {
        self.serialize_i64(n.into())
    }

    fn serialize_i32(self, n: i32) -> Result<(), Stop> {
        self.serialize_i64(n.into())
    }

    fn serialize_i64(self, n: i64) -> Result<(), Stop> {
        match u64::try_from(n) {
            Ok(n) => self.visitor.number(n),
            Err(_) => Ok(()),
        }
    }

    fn serialize_u8(self, n: u8) -> Result<(), Stop> {
        self.visitor.number(n.into())
    }

    fn serialize_u16(self, n: u16) -> Result<(), Stop> {
        self.visitor.number(n.into())
    }

    fn serialize_u32(self, n: u32) -> Result<(), Stop> {
        self.visitor.number(n.into())
    }

    fn serialize_u64(self, n: u64) -> Result<(), Stop> {
        self.visitor.number(n)
    }

    fn serialize_char(self, c: char) -> Result<(), Stop> {
        self.serialize_str(c.encode_utf8(&mut [0; 4]))
    }

    fn serialize_str(self, s: &str) -> Result<(), Stop> {
        self.visitor.text(s)
    }

    fn serialize_none(self) -> Result<(), Stop> {
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Stop> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), Stop> {
        Ok(())
    }

    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<(), Stop> {
        Ok(())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Stop> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        value: &T,
    ) -> Result<(), Stop> {
        value.serialize(self)
    }

    fn serialize_seq(self, len: Option<usize>) -> Result<Self, Stop> {
        self.visitor.list(len)?;
        Ok(self)
    }

    fn serialize_tuple(self, len: usize) -> Result<Self, Stop> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Self, Stop> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        len: usize,
    ) -> Result<Self, Stop> {
        self.serialize_seq(Some(len))
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Self, Stop> {
        Ok(self)
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, Stop> {
        self.depth += 1;
        Ok(self)
    }

    fn serialize_struct_variant(
        self,
        name: &'static str,
        _: u32,
        _: &'static str,
        len: usize,
    ) -> Result<Self, Stop> {
        self.serialize_struct(name, len)
    }
}

/// Every element of a list is visited, then the list ends.
macro_rules! elements {
    ($($trait:ident: $method:ident),* $(,)?) => {
        $(impl ser::$trait for &mut Walk<'_> {
            type Ok = ();
            type Error = Stop;

            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
                value.serialize(&mut **self)
            }

            fn end(self) -> Result<(), Stop> {
                self.visitor.list_end();
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

/// A map's values are visited; its keys are names, not arguments.
impl ser::SerializeMap for &mut Walk<'_> {
    type Ok = ();
    type Error = Stop;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, _: &T) -> Result<(), Stop> {
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
        value.serialize(&mut **self)
    }

    fn end(self) -> Result<(), Stop> {
        Ok(())
    }
}

/// A struct's fields are visited, each named to the visitor first.
macro_rules! fields {
    ($($trait:ident),*) => {
        $(impl ser::$trait for &mut Walk<'_> {
            type Ok = ();
            type Error = Stop;

            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                name: &'static str,
                value: &T,
            ) -> Result<(), Stop> {
                self.visitor.field(self.depth, name);
                value.serialize(&mut **self)
            }

            fn end(self) -> Result<(), Stop> {
                self.depth -= 1;
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
