//! How large a request's arguments may be. Checked by [`crate::Engine::handle`] for every
//! request, so the command line, `cairn serve` and `cairn mcp` refuse the same input; the
//! faces' schemas (MCP tools, `docs/openapi.yaml`) state the same numbers. Lengths count
//! characters (Unicode scalar values), as JSON Schema's `maxLength` does.

use camino::Utf8Path;

use crate::error::{ArgumentError, Error};
use crate::texts::{Stop, Visit};

/// The longest message (`snapshot`'s, `checkpoint`'s, `merge`'s commit message).
pub const MAX_MESSAGE_CHARS: usize = 65_536;

/// The longest any other text argument may be: a path, a name, a snapshot spec, a URL.
/// A path is at most 4096 bytes (`PATH_MAX`, and the longest path a tree holds).
pub const MAX_TEXT_CHARS: usize = 4_096;

/// The most items a list argument (paths, snapshots, labels, grants) may have.
pub const MAX_LIST_ITEMS: usize = 100_000;

/// The most bytes of each of stdout and stderr a command `run` through a face returns (the
/// rest is dropped and the output marked as cut).
pub const MAX_OUTPUT_BYTES: usize = 1 << 20;

/// The largest count (`max_count`).
pub const MAX_COUNT: u64 = u32::MAX as u64;

/// The longest the argument `name` may be, in characters.
pub fn text_limit(name: &str) -> usize {
    match name {
        "message" => MAX_MESSAGE_CHARS,
        _ => MAX_TEXT_CHARS,
    }
}

/// States the limit of the argument `name` in its JSON Schema `property` (as derived from
/// its type), so a face's schema says what [`refuse_oversized`] refuses: a text's length, a
/// list's items and their length, a count's and a number's range.
pub(crate) fn constrain(name: &str, property: &mut serde_json::Map<String, serde_json::Value>) {
    use serde_json::Value;
    let types: Vec<String> = match property.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(|t| t.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    let has = |t: &str| types.iter().any(|x| x == t);
    if has("string") {
        property.insert("maxLength".into(), Value::from(text_limit(name)));
    }
    if has("array") {
        property.insert("maxItems".into(), Value::from(MAX_LIST_ITEMS));
        if let Some(Value::Object(items)) = property.get_mut("items")
            && items.get("type") == Some(&Value::from("string"))
        {
            items.insert("maxLength".into(), Value::from(text_limit(name)));
        }
    }
    if has("integer") {
        // The width the type's format names; a count's own limit.
        let maximum = match property.remove("format").as_ref().and_then(Value::as_str) {
            _ if name == "max_count" => MAX_COUNT,
            Some("uint8") => u64::from(u8::MAX),
            Some("uint16") => u64::from(u16::MAX),
            Some("uint32") => u64::from(u32::MAX),
            _ => u64::MAX,
        };
        property.insert("maximum".into(), Value::from(maximum));
        property.entry("minimum").or_insert(Value::from(0));
    }
}

/// The refusal of an argument past its limit, naming it and the limit.
fn too_large(verb: &'static str, what: &str, size: usize, unit: &'static str, limit: u64) -> Error {
    ArgumentError::TooLarge {
        verb,
        what: what.to_owned(),
        size,
        unit,
        limit,
    }
    .into()
}

/// Refuses a request of `verb` from `cwd` if one of its arguments (what `visit_options`
/// shows a visitor, each argument a field at depth 1) or the caller's directory is past
/// its limit.
pub(crate) fn refuse_oversized(
    verb: &'static str,
    cwd: &Utf8Path,
    visit_options: impl FnOnce(&mut dyn Visit),
) -> Result<(), Error> {
    let cwd = cwd.as_str().chars().count();
    if cwd > MAX_TEXT_CHARS {
        return Err(too_large(
            verb,
            "the caller's directory",
            cwd,
            "characters",
            MAX_TEXT_CHARS as u64,
        ));
    }
    let mut oversized = Oversized {
        verb,
        argument: "",
        lists: 0,
        found: None,
    };
    visit_options(&mut oversized);
    match oversized.found {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Finds the first argument past its limit.
struct Oversized {
    verb: &'static str,
    /// The argument (the options' field) the walk is in.
    argument: &'static str,
    /// How many lists deep the walk is inside it.
    lists: usize,
    found: Option<Error>,
}

impl Oversized {
    fn stop(&mut self, e: Error) -> Result<(), Stop> {
        self.found = Some(e);
        Err(Stop)
    }
}

impl Visit for Oversized {
    fn field(&mut self, depth: usize, name: &'static str) {
        if depth == 1 {
            self.argument = name;
            self.lists = 0;
        }
    }

    fn text(&mut self, text: &str) -> Result<(), Stop> {
        let n = text.chars().count();
        let limit = text_limit(self.argument);
        if n <= limit {
            return Ok(());
        }
        let what = match self.lists {
            0 => self.argument.to_owned(),
            _ => format!("an item of {}", self.argument),
        };
        let e = too_large(self.verb, &what, n, "characters", limit as u64);
        self.stop(e)
    }

    fn list(&mut self, len: Option<usize>) -> Result<(), Stop> {
        self.lists += 1;
        match len {
            Some(len) if self.lists == 1 && len > MAX_LIST_ITEMS => {
                let e = too_large(
                    self.verb,
                    self.argument,
                    len,
                    "items",
                    MAX_LIST_ITEMS as u64,
                );
                self.stop(e)
            }
            _ => Ok(()),
        }
    }

    fn list_end(&mut self) {
        self.lists = self.lists.saturating_sub(1);
    }

    fn number(&mut self, number: u64) -> Result<(), Stop> {
        if self.argument == "max_count" && number > MAX_COUNT {
            let e = ArgumentError::CountTooLarge {
                verb: self.verb,
                name: "max_count",
                number,
                limit: MAX_COUNT,
            }
            .into();
            return self.stop(e);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Request;

    fn check(cwd: &str, request: &Request) -> Result<(), Error> {
        refuse_oversized(request.verb(), Utf8Path::new(cwd), |v| {
            request.visit_options(v)
        })
    }

    fn request(verb: &str, args: serde_json::Value) -> Request {
        let serde_json::Value::Object(args) = args else {
            panic!("arguments are an object")
        };
        Request::from_verb(verb, args).expect("a request")
    }

    fn refused(verb: &str, args: serde_json::Value) -> Option<String> {
        match check("/w", &request(verb, args)) {
            Ok(()) => None,
            Err(e) => {
                assert_eq!(
                    (e.code(), e.exit()),
                    ("too_large", crate::EXIT_USAGE),
                    "{e}"
                );
                Some(e.to_string())
            }
        }
    }

    /// A 10 MB snapshot message once went into the store whole (and grew it by 33 MB).
    #[test]
    fn a_message_past_its_limit_is_refused_naming_it_and_the_limit() {
        let at_limit = "é".repeat(MAX_MESSAGE_CHARS);
        assert_eq!(
            refused(
                "snapshot",
                serde_json::json!({ "worktree": "w", "message": at_limit })
            ),
            None
        );
        let message = "m".repeat(10 << 20);
        let said = refused(
            "snapshot",
            serde_json::json!({ "worktree": "w", "message": message }),
        )
        .expect("refused");
        assert!(said.contains("message") && said.contains("65536"), "{said}");
    }

    #[test]
    fn paths_names_and_lists_past_their_limits_are_refused() {
        let long = "p".repeat(MAX_TEXT_CHARS + 1);
        let said = refused("status", serde_json::json!({ "worktree": long })).expect("refused");
        assert!(said.contains("worktree") && said.contains("4096"), "{said}");
        let said = refused(
            "checkpoint",
            serde_json::json!({ "dir": "w", "name": long }),
        )
        .expect("refused");
        assert!(said.contains("name"), "{said}");
        let said = refused(
            "rollback",
            serde_json::json!({ "worktree": "w", "snapshot": "s", "paths": [long] }),
        )
        .expect("refused");
        assert!(said.contains("an item of paths"), "{said}");
        let many = vec!["a"; MAX_LIST_ITEMS + 1];
        let said = refused("push", serde_json::json!({ "snapshots": many })).expect("refused");
        assert!(
            said.contains("snapshots") && said.ends_with("limit of 100000"),
            "{said}"
        );
        assert_eq!(
            refused(
                "push",
                serde_json::json!({ "snapshots": vec!["a"; MAX_LIST_ITEMS] })
            ),
            None
        );
        let cwd = format!("/{}", "d".repeat(MAX_TEXT_CHARS));
        let e = check(&cwd, &request("status", serde_json::json!({}))).expect_err("refused");
        assert!(e.to_string().contains("caller's directory"), "{e}");
    }

    /// `log`'s count of 2^64 - 1 was taken as "all of them".
    #[test]
    fn a_count_past_its_limit_is_refused() {
        let said = refused("log", serde_json::json!({ "max_count": u64::MAX })).expect("refused");
        assert!(
            said.contains("max_count") && said.contains("4294967295"),
            "{said}"
        );
        assert_eq!(
            refused("log", serde_json::json!({ "max_count": MAX_COUNT })),
            None
        );
    }
}
