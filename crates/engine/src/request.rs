//! Every verb as one value: a [`Request`] built by a face (from a command line, a verb
//! name and JSON arguments, or a wire message), handled by [`Engine::handle`], answered
//! with an [`Outcome`].

use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine};
use crate::error::Error;
use crate::spec::{VerbSpec, VerbTypes, verbs};

/// Where a verb is offered besides the command line and `/v1/call`, which take every verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Face {
    /// `POST /v1/{verb}` of `cairn serve`.
    Route,
    /// A tool of `cairn mcp`.
    Tool,
}

/// One verb of [`Request`], as its faces describe and read it.
pub struct Verb {
    pub(crate) name: &'static str,
    /// The doc comment of its [`Request`] variant, a line an item.
    pub(crate) doc: &'static [&'static str],
    pub(crate) faces: &'static [Face],
    /// Its options type's schema.
    pub(crate) schema: fn(&mut schemars::SchemaGenerator) -> schemars::Schema,
    /// Its options type read from JSON, naming where reading failed.
    pub(crate) parse:
        fn(serde_json::Value) -> Result<Request, serde_path_to_error::Error<serde_json::Error>>,
    /// Its outcome type's name, as the table writes it.
    pub(crate) outcome: &'static str,
    /// Its outcome type's schema, a reference into the generator's definitions.
    pub(crate) outcome_schema: fn(&mut schemars::SchemaGenerator) -> schemars::Schema,
    /// Its [`VerbSpec::REFUSED`].
    pub(crate) refused: Option<&'static str>,
    /// Its [`VerbSpec::EXAMPLE`].
    pub(crate) example: Option<&'static str>,
    /// Its [`VerbSpec::READS_ONLY`].
    pub(crate) reads_only: bool,
}

macro_rules! verbs {
    ($( $(#[doc = $doc:literal])+ $variant:ident($options:ty) -> $outcome:ty = $verb:literal via $method:ident [$($face:ident),*]; )*) => {
        /// Calls the macro named by its argument with every verb's type name (each of
        /// [`crate::verbs`]), so a face can write one generic arm for all of them.
        #[macro_export]
        macro_rules! with_verbs {
            ($callback:ident) => { $callback! { $($variant)* } };
        }
        /// One call of any verb, with its options (each variant's is its verb's
        /// [`VerbTypes::Options`], the options type its `verb!` block names, such as
        /// [`crate::SnapshotOptions`]). Serialized as `{"verb": NAME, "args": {...}}`; the
        /// args' names are the verb's JSON arguments.
        #[derive(Debug, Clone, Serialize, Deserialize)]
        #[serde(tag = "verb", content = "args", try_from = "Tagged")]
        pub enum Request {
            $( $(#[doc = $doc])+ #[serde(rename = $verb)] $variant(<verbs::$variant as VerbTypes>::Options), )*
        }

        /// Every verb as the faces that call verbs by name describe it (see [`Verb`]).
        pub(crate) const ALL_VERBS: &[Verb] = &[$(
            Verb {
                name: $verb,
                doc: &[$($doc),+],
                faces: &[$(Face::$face),*],
                schema: <<verbs::$variant as VerbTypes>::Options as schemars::JsonSchema>::json_schema,
                parse: |args| serde_path_to_error::deserialize(args).map(Request::$variant),
                outcome: stringify!($outcome),
                outcome_schema: |generator| {
                    generator.subschema_for::<<verbs::$variant as VerbTypes>::Outcome>()
                },
                refused: <verbs::$variant as VerbSpec>::REFUSED,
                example: <verbs::$variant as VerbSpec>::EXAMPLE,
                reads_only: <verbs::$variant as VerbSpec>::READS_ONLY,
            },
        )*];

        impl TryFrom<Tagged> for Request {
            type Error = RequestError;

            fn try_from(t: Tagged) -> Result<Request, RequestError> {
                let args = serde_json::Value::Object(t.args);
                match t.verb.as_str() {
                    $( $verb => serde_json::from_value(args)
                        .map(Request::$variant)
                        .map_err(|source| RequestError::Arguments { verb: $verb, source }), )*
                    _ => Err(RequestError::UnknownVerb(t.verb)),
                }
            }
        }

        /// The outcome of any verb. Serialized as `{"verb": NAME, "outcome": {...}}`;
        /// [`Outcome::to_json`] gives the verb's own JSON object.
        #[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
        #[serde(tag = "verb", content = "outcome")]
        #[allow(missing_docs)]
        pub enum Outcome {
            $( #[serde(rename = $verb)] $variant(<verbs::$variant as VerbTypes>::Outcome), )*
        }

        impl Request {
            /// Every verb's name.
            pub const VERBS: &'static [&'static str] = &[$( $verb, )*];

            /// The verb's name.
            pub fn verb(&self) -> &'static str {
                match self {
                    $( Request::$variant(_) => $verb, )*
                }
            }

            /// Whether its verb only reads ([`VerbSpec::READS_ONLY`]).
            pub fn reads_only(&self) -> bool {
                match self {
                    $( Request::$variant(_) => <verbs::$variant as VerbSpec>::READS_ONLY, )*
                }
            }

            /// The snapshots the request names as it names them (ids, prefixes, refs,
            /// checkpoint names; `show`'s `SNAP` of `SNAP:PATH`), each verb's
            /// [`VerbSpec::named_snapshots`]. `push` and `pull` name none: their snapshots
            /// are to send or to get, not to fetch first.
            pub fn named_snapshots(&self) -> Vec<&str> {
                match self {
                    $( Request::$variant(o) => <verbs::$variant as VerbSpec>::named_snapshots(o), )*
                }
            }

            /// Walks the options (the verb's arguments, each a field at depth 1).
            pub(crate) fn visit_options(&self, visitor: &mut dyn crate::texts::Visit) {
                match self {
                    $( Request::$variant(o) => crate::texts::walk(o, visitor), )*
                }
            }
        }

        impl Outcome {
            /// The verb's name.
            pub fn verb(&self) -> &'static str {
                match self {
                    $( Outcome::$variant(_) => $verb, )*
                }
            }

            /// The refusal's message, if the outcome is one (exit status 1): each verb's
            /// [`VerbSpec::refusal`].
            pub fn refusal(&self) -> Option<&str> {
                match self {
                    $( Outcome::$variant(o) => <verbs::$variant as VerbSpec>::refusal(o), )*
                }
            }

            /// The verb's JSON object (SPEC.md's fields).
            pub fn to_json(&self) -> serde_json::Value {
                let value = match self {
                    $( Outcome::$variant(o) => serde_json::to_value(o), )*
                };
                value.unwrap_or(serde_json::Value::Null)
            }
        }

        impl Engine {
            /// Runs `request`.
            pub fn handle(&self, call: &Call, request: Request) -> Result<Outcome, Error> {
                refuse_nul(call, &request)?;
                crate::limits::refuse_oversized(request.verb(), &call.cwd, |v| {
                    request.visit_options(v)
                })?;
                // What the call names or reaches but the store lacks (a full id, a remote
                // ref, a parent of a snapshot fetched alone) is fetched when the call fails
                // for want of it, and the call runs again: nothing is asked of a remote
                // while the store has what a call needs.
                let mut fetched = 0;
                loop {
                    let result = match request.clone() {
                        $( Request::$variant(o) => self.$method(call, o).map(Outcome::$variant), )*
                    };
                    match result {
                        // A command that ran is never run again.
                        Err(e) if fetched < MAX_FETCHES_PER_CALL
                            && !matches!(request, Request::Run(_))
                            && (self.fetch_promised(call, &e, &request.named_snapshots())?
                                || (fetched == 0
                                    && matches!(e.code(), "unknown_id" | "unknown_ref")
                                    && self.fetch_named(call, snapshot_specs(&request))?)) =>
                        {
                            fetched += 1;
                        }
                        other => return other,
                    }
                }
            }
        }
    };
}

crate::spec::verb_table!(verbs);

/// The snapshot specs a request names that a fetch could supply: full ids and remote refs.
fn snapshot_specs(request: &Request) -> Vec<String> {
    request
        .named_snapshots()
        .into_iter()
        .filter(|s| {
            crate::remotes::is_full_id(s)
                || crate::engine::remote_ref(s)
                    .is_some_and(|(n, r)| !n.is_empty() && remote::validate_remote_name(r).is_ok())
        })
        .map(str::to_owned)
        .collect()
}

/// How often one call may stop at a snapshot only promised by a remote, fetch it and run
/// again (a `log` through a history fetched one snapshot at a time).
const MAX_FETCHES_PER_CALL: usize = 256;

/// No command line or path can hold a NUL byte: one in a request is bad input, never a
/// path to try.
fn refuse_nul(call: &Call, request: &Request) -> Result<(), Error> {
    let has_nul = |s: &str| s.contains('\0');
    let bad = crate::texts::find_text(request, &has_nul)
        .or_else(|| has_nul(call.cwd.as_str()).then(|| call.cwd.to_string()));
    match bad {
        Some(bad) => Err(crate::error::ArgumentError::Nul {
            text: diff::path_text(bad.as_bytes()),
        }
        .into()),
        None => Ok(()),
    }
}

/// Why a verb's name and JSON arguments are not a [`Request`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// No verb has that name.
    #[error("unknown verb {0:?}")]
    UnknownVerb(String),
    /// The arguments are not the verb's options (an unknown or missing argument, a wrong
    /// type or range).
    #[error("{verb}: {source}")]
    Arguments {
        /// The verb.
        verb: &'static str,
        /// What reading its options said, naming the argument.
        #[source]
        source: serde_json::Error,
    },
}

/// A request as it is read: the verb and its arguments, which must be a JSON object.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Tagged {
    verb: String,
    args: serde_json::Map<String, serde_json::Value>,
}

impl Request {
    /// The request of verb `verb` with JSON arguments `args` (unknown arguments, missing
    /// required ones and wrong types are refused, naming them).
    pub fn from_verb(
        verb: &str,
        args: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Request, RequestError> {
        Request::try_from(Tagged {
            verb: verb.to_owned(),
            args,
        })
    }
}

impl Outcome {
    /// The exit status: 0, or 1 for a refusal.
    pub fn exit(&self) -> u8 {
        u8::from(self.refusal().is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(body: &str) -> Result<crate::wire::CallRequest, String> {
        serde_json::from_str(body).map_err(|e| e.to_string())
    }

    #[test]
    fn a_request_is_a_verb_and_an_object_of_its_arguments_and_nothing_else() {
        let ok = call(r#"{"cwd": "/", "request": {"verb": "log", "args": {"max_count": 5.0}}}"#)
            .expect("a whole float is a count");
        let Request::Log(log) = ok.request else {
            panic!("a log")
        };
        assert_eq!(log.max_count, Some(5));
        for bad in [
            // The arguments as a list, which serde would read field by field.
            r#"{"cwd": "/", "request": {"verb": "checkpoint", "args": [null, null]}}"#,
            r#"{"cwd": "/", "request": {"verb": "log", "args": {}, "extra": 1}}"#,
            r#"{"cwd": "/", "request": {"verb": "log", "args": {"max_count": 1.5}}}"#,
            r#"{"cwd": "/", "request": {"verb": "log", "args": {"max_count": -1}}}"#,
            r#"{"cwd": "/", "request": {"verb": "gc", "args": {"prune_ops": 4294967296}}}"#,
            r#"{"cwd": "/", "request": {"verb": "nope", "args": {}}}"#,
            r#"{"cwd": "/", "request": {"verb": "status"}}"#,
        ] {
            assert!(call(bad).is_err(), "accepted {bad}");
        }
    }

    /// Each verb's snapshot arguments, as the JSON key list once found them.
    #[test]
    fn a_request_names_its_snapshots() {
        let named = |verb: &str, args: serde_json::Value| {
            let serde_json::Value::Object(args) = args else {
                panic!("an object")
            };
            let request = Request::from_verb(verb, args).expect(verb);
            request
                .named_snapshots()
                .into_iter()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        use serde_json::json;
        assert_eq!(
            named("checkout", json!({ "snapshot": "s", "dest": "d" })),
            ["s"]
        );
        assert_eq!(
            named(
                "merge",
                json!({ "snapshot": "s", "into": "r", "base": "b" })
            ),
            ["s", "b"]
        );
        assert_eq!(named("diff", json!({ "a": "x", "b": "y" })), ["x", "y"]);
        assert_eq!(
            named("show", json!({ "object": "main@origin:src/a" })),
            ["main@origin"]
        );
        assert_eq!(named("rewind", json!({ "to": "t" })), ["t"]);
        assert_eq!(named("log", json!({ "target": "main" })), ["main"]);
        assert_eq!(
            named("mount", json!({ "dir": "d", "snapshot": "s" })),
            ["s"]
        );
        assert_eq!(
            named("ref_set", json!({ "name": "n", "snapshot": "s" })),
            ["s"]
        );
        assert!(named("push", json!({ "snapshots": ["a"] })).is_empty());
        assert!(named("status", json!({ "worktree": "w" })).is_empty());
    }

    #[test]
    fn every_verb_reads_back_as_itself() {
        for verb in Request::VERBS {
            // The least each takes: its required arguments, each a value of its type, as
            // its schema says (so a new verb needs no line here).
            let schema = crate::Verb::named(verb).expect(verb).options_schema();
            let properties = schema.get("properties").and_then(|p| p.as_object());
            let required = schema.get("required").and_then(|r| r.as_array());
            let mut args = serde_json::Map::new();
            for key in required.into_iter().flatten().filter_map(|k| k.as_str()) {
                let kind = properties
                    .and_then(|p| p.get(key))
                    .and_then(|p| p.get("type"))
                    .and_then(|t| t.as_str());
                let value = match kind {
                    Some("array") => serde_json::json!(["x"]),
                    Some("integer" | "number") => serde_json::json!(1),
                    Some("boolean") => serde_json::json!(false),
                    _ => serde_json::json!("x"),
                };
                args.insert(key.to_owned(), value);
            }
            let request = Request::from_verb(verb, args).expect(verb);
            assert_eq!(request.verb(), *verb);
            let wire = serde_json::to_string(&request).expect("encodes");
            let back: Request = serde_json::from_str(&wire).expect("decodes");
            assert_eq!(back.verb(), *verb);
        }
    }
}
