//! A verb as the faces that call it by name see it (`cairn serve`'s `POST /v1/{verb}`,
//! `cairn mcp`'s tools, `docs/openapi.yaml`): its description, the JSON Schema of its
//! arguments and how its JSON arguments become a [`Request`]. All of it comes from the
//! verb's entry in [`Request`] and its options type: their doc comments are the
//! descriptions, the type is the schema (with the limits of [`crate::limits`]), and serde
//! reads the arguments, as it reads a [`Request`] sent to `/v1/call`. So a request means the
//! same on every face; only the options the command line alone sets (marked `x-cli-only`
//! on the options type) are left out of the routes and tools.

use std::collections::HashMap;
use std::sync::OnceLock;

use schemars::generate::{Contract, SchemaSettings};
use schemars::transform::RecursiveTransform;
use schemars::{Schema, SchemaGenerator};
use serde_json::{Map, Value};

use crate::request::{ALL_VERBS, Face, Request, Verb};

/// A verb's JSON arguments: an object.
pub type JsonObject = Map<String, Value>;

/// Why a route's or tool's JSON arguments are not a request of its verb.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArgumentsError {
    /// An argument the verb's route and tool do not take.
    #[error("unknown argument {0:?}")]
    Unknown(String),
    /// A required argument left out.
    #[error("missing argument {0:?}")]
    Missing(String),
    /// A value of the wrong type or out of range.
    #[error("{explained}")]
    Invalid {
        /// Where in the arguments (the argument's name, or a path into it).
        argument: String,
        /// What is wrong, naming the argument (`to must be a string, not 2096`).
        explained: String,
        /// What reading it said.
        #[source]
        source: serde_json::Error,
    },
}

/// The schema keyword marking an option only the command line sets (through `/v1/call`).
const CLI_ONLY: &str = "x-cli-only";
/// The schema keyword marking the argument that defaults to the caller's directory.
const DEFAULT_CWD: &str = "x-default-cwd";

impl Verb {
    /// Every verb, in [`Request`]'s order.
    pub fn all() -> &'static [Verb] {
        ALL_VERBS
    }

    /// The verb called `name`.
    pub fn named(name: &str) -> Option<&'static Verb> {
        Verb::all().iter().find(|v| v.name == name)
    }

    /// Its name (`/v1/{name}`, the MCP tool's name, [`Request::verb`]).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether it is offered on `face`.
    pub fn on(&self, face: Face) -> bool {
        self.faces.contains(&face)
    }

    /// What it does: its [`Request`] variant's doc comment.
    pub fn description(&self) -> String {
        self.doc
            .iter()
            .map(|line| line.trim())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// What it does in a line: the first sentence of [`Verb::description`].
    pub fn summary(&self) -> String {
        let description = self.description();
        match description.find(". ") {
            Some(end) => description[..=end].to_owned(),
            None => description,
        }
    }

    /// Its outcome type's name without the module path or `Box` (`RollbackOutcome`).
    pub fn outcome_type(&self) -> &'static str {
        let name = self.outcome.trim();
        let name = name
            .strip_prefix("Box")
            .map(|inner| {
                inner
                    .trim()
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .trim()
            })
            .unwrap_or(name);
        name.rsplit("::").next().unwrap_or(name)
    }

    /// What a refusal of its route means (its [`crate::VerbSpec::REFUSED`]).
    pub fn refused(&self) -> Option<&'static str> {
        self.refused
    }

    /// An example of its route's JSON arguments (its [`crate::VerbSpec::EXAMPLE`]).
    pub fn example(&self) -> Option<&'static str> {
        self.example
    }

    /// Whether it only reads (its [`crate::VerbSpec::READS_ONLY`]).
    pub fn reads_only(&self) -> bool {
        self.reads_only
    }

    /// The JSON Schema of its outcome's JSON object ([`crate::Outcome::to_json`]), as serde
    /// writes it: a reference into the definitions of `generator` (made by
    /// [`output_schemas`]), which gains those it needs.
    pub fn outcome_schema(&self, generator: &mut SchemaGenerator) -> Schema {
        (self.outcome_schema)(generator)
    }

    /// The JSON Schema of its options, every one (as `/v1/call` takes them), each with its
    /// doc comment as description and its limit.
    pub fn options_schema(&self) -> JsonObject {
        let mut out = self.annotated().clone();
        if let Some(Value::Object(properties)) = out.get_mut("properties") {
            for property in properties.values_mut() {
                strip_extensions(property);
            }
        }
        out
    }

    /// The JSON Schema of its arguments as its route and tool take them: its options but
    /// those only the command line sets. With `nullable`, an optional argument may be
    /// `null` (the routes take a `null` as left out).
    pub fn args_schema(&self, nullable: bool) -> JsonObject {
        let mut out = self.annotated().clone();
        let required = required(&out);
        if let Some(Value::Object(properties)) = out.get_mut("properties") {
            properties.retain(|_, p| !marked(p, CLI_ONLY));
            for (name, property) in properties.iter_mut() {
                strip_extensions(property);
                if let Value::Object(p) = property {
                    p.remove("default");
                    let nullable = nullable && !required.contains(name);
                    set_nullable(p, nullable);
                }
            }
        }
        out
    }

    /// The argument that defaults to the caller's directory, if it has one.
    pub fn default_directory(&self) -> Option<String> {
        let schema = self.annotated();
        let Some(Value::Object(properties)) = schema.get("properties") else {
            return None;
        };
        properties
            .iter()
            .find(|(_, p)| marked(p, DEFAULT_CWD))
            .map(|(name, _)| name.clone())
    }

    /// The request of this verb with `args`, its JSON arguments as its route and tool take
    /// them: a `null` counts as left out; an argument it does not take, a required one
    /// missing or a value of the wrong type or range is refused, naming it. The options are
    /// read as `/v1/call` reads them.
    pub fn request(&self, mut args: JsonObject) -> Result<Request, ArgumentsError> {
        args.retain(|_, v| !v.is_null());
        let schema = self.annotated();
        let empty = JsonObject::new();
        let properties = match schema.get("properties") {
            Some(Value::Object(p)) => p,
            _ => &empty,
        };
        for key in args.keys() {
            if properties.get(key).is_none_or(|p| marked(p, CLI_ONLY)) {
                return Err(ArgumentsError::Unknown(key.clone()));
            }
        }
        for name in required(schema) {
            if !args.contains_key(&name) {
                return Err(ArgumentsError::Missing(name));
            }
        }
        let given = args.clone();
        (self.parse)(Value::Object(args)).map_err(|e| {
            let explained = explain(&e, &given);
            ArgumentsError::Invalid {
                argument: e.path().to_string(),
                explained,
                source: e.into_inner(),
            }
        })
    }

    /// The options type's schema with the limits, its extension keywords kept: made once
    /// per verb, from its type, and the same for every store and request.
    fn annotated(&self) -> &'static JsonObject {
        static ANNOTATED: OnceLock<HashMap<&'static str, JsonObject>> = OnceLock::new();
        let all = ANNOTATED.get_or_init(|| {
            ALL_VERBS
                .iter()
                .map(|verb| (verb.name, verb.generate_schema()))
                .collect()
        });
        all.get(self.name)
            .expect("every verb of ALL_VERBS has its schema")
    }

    fn generate_schema(&self) -> JsonObject {
        let mut generator = SchemaSettings::draft2020_12()
            .with(|s| {
                s.inline_subschemas = true;
                s.meta_schema = None;
            })
            .into_generator();
        let Value::Object(mut out) = (self.schema)(&mut generator).to_value() else {
            return JsonObject::new();
        };
        // The verb's own description is its Request variant's; the options type's title and
        // doc say how the command line spells it.
        out.remove("title");
        out.remove("description");
        out.entry("properties")
            .or_insert_with(|| Value::Object(JsonObject::new()));
        if let Some(Value::Object(properties)) = out.get_mut("properties") {
            for (name, property) in properties.iter_mut() {
                if let Value::Object(p) = property {
                    crate::limits::constrain(name, p);
                }
            }
        }
        out
    }
}

/// A generator of the JSON Schemas of what the engine writes (outcomes, a `/v1/call`
/// reply): serde's serializing side (a field skipped when empty is optional, a field
/// written as `null` is required), each named type a definition under `definitions_path`
/// (`/$defs`, or OpenAPI's `/components/schemas`).
pub fn output_schemas(definitions_path: &str) -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .with(|s| {
            s.contract = Contract::Serialize;
            s.definitions_path = definitions_path.to_owned().into();
            s.meta_schema = None;
        })
        .with_transform(RecursiveTransform(absent_not_null))
        .with_transform(RecursiveTransform(plain_description))
        .into_generator()
}

/// A property serde leaves out when it has nothing (`skip_serializing_if`, so not
/// required) is never `null`: its schema says so.
fn absent_not_null(schema: &mut Schema) {
    let required: Vec<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let Some(Value::Object(properties)) = schema.get_mut("properties") else {
        return;
    };
    for (name, property) in properties.iter_mut() {
        if required.contains(name) {
            continue;
        }
        let Value::Object(p) = property else {
            continue;
        };
        set_nullable(p, false);
        let one = match p.get_mut("anyOf") {
            Some(Value::Array(branches)) => {
                branches.retain(|b| b != &serde_json::json!({ "type": "null" }));
                (branches.len() == 1).then(|| branches.remove(0))
            }
            _ => None,
        };
        if let Some(Value::Object(only)) = one {
            p.remove("anyOf");
            for (k, v) in only {
                p.entry(k).or_insert(v);
            }
        }
    }
}

/// A doc comment as a description: its lines joined, as [`Verb::description`] joins
/// them, and rustdoc's links plain code.
fn plain_description(schema: &mut Schema) {
    if let Some(Value::String(text)) = schema.get_mut("description") {
        *text = text
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
            .replace("[`", "`")
            .replace("`]", "`");
    }
}

fn marked(property: &Value, keyword: &str) -> bool {
    property.get(keyword) == Some(&Value::Bool(true))
}

fn strip_extensions(property: &mut Value) {
    if let Value::Object(p) = property {
        p.retain(|k, _| !k.starts_with("x-"));
    }
}

fn required(schema: &JsonObject) -> Vec<String> {
    match schema.get("required") {
        Some(Value::Array(names)) => names
            .iter()
            .filter_map(|n| n.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

/// `property`'s type with `null` among its types, or without.
fn set_nullable(property: &mut JsonObject, nullable: bool) {
    let mut types: Vec<Value> = match property.get("type") {
        Some(Value::String(t)) => vec![Value::String(t.clone())],
        Some(Value::Array(ts)) => ts.clone(),
        _ => return,
    };
    types.retain(|t| t != "null");
    if nullable {
        types.push(Value::from("null"));
    }
    let ty = match <[Value; 1]>::try_from(types) {
        Ok([one]) => one,
        Err(many) => Value::Array(many),
    };
    property.insert("type".into(), ty);
}

/// Why reading the arguments failed, naming the argument (`to must be a string, not 2096`).
fn explain(e: &serde_path_to_error::Error<serde_json::Error>, args: &JsonObject) -> String {
    let path = e.path().to_string();
    let inner = e.inner().to_string();
    if let (Some(rest), Some(value)) = (inner.strip_prefix("invalid type: "), args.get(&path))
        && let Some((_, expected)) = rest.rsplit_once(", expected ")
    {
        return format!("{path} must be {expected}, not {value}");
    }
    format!("{path}: {inner}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(name: &str) -> &'static Verb {
        Verb::named(name).expect("a verb")
    }

    /// A count is a whole number of at least 1, given as a number: anything else is
    /// refused naming it (the serve_verb_args fuzz target's oracle once took any string).
    #[test]
    fn counts_are_whole_numbers_of_at_least_one() {
        let log = spec("log");
        let args = |v: Value| -> JsonObject { [("max_count".to_owned(), v)].into_iter().collect() };
        for bad in [
            json!("/w"),
            json!("3"),
            json!(0),
            json!(-1),
            json!(2.5),
            json!(true),
        ] {
            let refused = log
                .request(args(bad.clone()))
                .expect_err("refused")
                .to_string();
            assert!(refused.contains("max_count"), "{bad}: {refused}");
        }
        for (good, n) in [(json!(3), 3), (json!(5.0), 5)] {
            let Ok(Request::Log(checked)) = log.request(args(good.clone())) else {
                panic!("{good}: accepted as a log")
            };
            assert_eq!(checked.max_count, Some(n), "{good}");
        }
    }

    /// `gc`'s days and bytes are whole numbers within their range, given as numbers.
    #[test]
    fn numbers_are_whole_and_in_range() {
        let gc = spec("gc");
        let args = |k: &str, v: Value| -> JsonObject { [(k.to_owned(), v)].into_iter().collect() };
        for (key, bad) in [
            ("keep_within", json!(4_294_967_296u64)),
            ("keep_within", json!(-1)),
            ("max_size", json!(1.5)),
            ("max_size", json!("100")),
            ("grace", json!(true)),
        ] {
            let refused = gc
                .request(args(key, bad.clone()))
                .expect_err("refused")
                .to_string();
            assert!(refused.starts_with(key), "{bad}: {refused}");
        }
        let Ok(Request::Gc(checked)) = gc.request(args("max_size", json!(5e6))) else {
            panic!("accepted")
        };
        assert_eq!(checked.max_size, Some(5_000_000));
        let Ok(Request::Gc(checked)) = gc.request(args("keep_within", json!(0))) else {
            panic!("accepted")
        };
        assert_eq!(checked.keep_within, Some(0));
    }

    /// A name, message or id is a JSON string; a number there is refused naming the
    /// argument, as the command-line table always did.
    #[test]
    fn numbers_are_not_text() {
        let args: JsonObject = [("to".to_owned(), json!(2096))].into_iter().collect();
        let refused = spec("rewind")
            .request(args)
            .expect_err("refused")
            .to_string();
        assert_eq!(refused, "to must be a string, not 2096");
    }

    /// Found by the `serve_verb_args` fuzz target: `--branch -` (and `--message -x`) put
    /// the value where a command-line parser reads a flag, so a message or branch starting
    /// with '-' was refused as bad usage, or taken for another flag.
    #[test]
    fn option_values_starting_with_a_dash_stay_values() {
        let crash = br#"{"branch":"-","into":"","snapshot":""}"#;
        let args: JsonObject = serde_json::from_slice(crash).expect("an object");
        let Ok(Request::Merge(checked)) = spec("merge").request(args) else {
            panic!("valid arguments")
        };
        assert_eq!(checked.branch.as_deref(), Some("-"));
        assert_eq!(checked.into, "");

        let args: JsonObject =
            serde_json::from_str(r#"{"dir": "/w", "to": "--dry-run"}"#).expect("an object");
        let Ok(Request::Rewind(checked)) = spec("rewind").request(args) else {
            panic!("valid arguments")
        };
        assert_eq!(checked.to.as_deref(), Some("--dry-run"));
        assert!(!checked.dry_run);
    }

    /// The schemas state the engine's limits and the types' requirements: what a face
    /// shows a client is what the engine reads.
    #[test]
    fn schemas_carry_the_types_and_the_limits() {
        let snapshot = spec("snapshot").args_schema(false);
        assert_eq!(snapshot["required"], json!(["worktree"]));
        assert_eq!(snapshot["additionalProperties"], json!(false));
        let properties = snapshot["properties"].as_object().expect("properties");
        assert_eq!(
            properties["message"],
            json!({ "type": "string", "maxLength": 65536, "description": "Snapshot message." })
        );
        assert!(
            !properties.contains_key("labels"),
            "labels: the command line's"
        );
        let nullable = spec("snapshot").args_schema(true);
        assert_eq!(
            nullable["properties"]["message"]["type"],
            json!(["string", "null"])
        );
        assert_eq!(nullable["properties"]["worktree"]["type"], json!("string"));
        let log = spec("log").args_schema(false);
        assert_eq!(log["properties"]["max_count"]["minimum"], json!(1));
        assert_eq!(
            log["properties"]["max_count"]["maximum"],
            json!(4_294_967_295u64)
        );
        let gc = spec("gc").args_schema(false);
        assert_eq!(
            gc["properties"]["keep_within"]["maximum"],
            json!(4_294_967_295u64)
        );
        assert_eq!(gc["properties"]["max_size"]["maximum"], json!(u64::MAX));
        let rollback = spec("rollback").args_schema(false);
        assert_eq!(rollback["properties"]["paths"]["maxItems"], json!(100_000));
        assert_eq!(
            rollback["properties"]["paths"]["items"]["maxLength"],
            json!(4096)
        );
        // Every option, on /v1/call.
        let full = spec("snapshot").options_schema();
        assert!(full["properties"]["labels"].is_object());
        assert_eq!(
            spec("status").default_directory().as_deref(),
            Some("worktree")
        );
        assert_eq!(spec("snapshot").default_directory(), None);
        assert!(
            spec("undo")
                .description()
                .starts_with("Revert the newest change set")
        );
    }

    /// An argument without which the verb cannot work is required in its schema, so a
    /// client learns it from the schema rather than from a refusal.
    #[test]
    fn the_snapshots_to_combine_or_compare_and_the_worktree_to_rebase_are_required() {
        for verb in ["combine", "compare"] {
            let schema = spec(verb).args_schema(false);
            assert_eq!(
                schema.get("required"),
                Some(&json!(["snapshots"])),
                "{verb}: {schema:?}"
            );
        }
        let rebase = spec("rebase").args_schema(false);
        assert_eq!(
            rebase.get("required"),
            Some(&json!(["worktree", "onto"])),
            "{rebase:?}"
        );
    }
}

/// What each verb says of itself through its `VerbSpec` (written by hand in its module, so
/// the compiler cannot hold it to its arguments): checked against its options' schema.
#[cfg(test)]
mod spec_tests {
    use super::*;

    /// A least value of a schema's type, as a required argument's stand-in.
    fn stand_in(property: &Value) -> Value {
        let types: Vec<&str> = match property.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        match types.first().copied() {
            Some("array") => Value::Array(vec![Value::from("x")]),
            Some("boolean") => Value::Bool(false),
            Some("integer" | "number") => Value::from(1),
            _ => Value::from("x"),
        }
    }

    /// Every argument marked `x-snapshot` (one that names snapshots) is among the
    /// request's named snapshots, so a remote can supply it, unless listed here as not
    /// fetched, with why; and only such arguments are. An argument whose name says it takes
    /// snapshots must be marked. So a verb that takes a snapshot and lacks its
    /// `VerbSpec::named_snapshots` fails here.
    #[test]
    fn every_snapshot_argument_is_a_named_snapshot() {
        let not_fetched: &[(&str, &str, &str)] = &[
            ("push", "snapshots", "to send, not to fetch first"),
            ("pull", "snapshots", "to get, which is the verb itself"),
            (
                "ref_set",
                "expect",
                "compared with the remote's ref, never fetched",
            ),
            (
                "ref_rm",
                "expect",
                "compared with the remote's ref, never fetched",
            ),
        ];
        let mut checked = 0;
        for verb in Verb::all() {
            let schema = verb.annotated();
            let Some(Value::Object(properties)) = schema.get("properties") else {
                continue;
            };
            let base: JsonObject = required(schema)
                .into_iter()
                .map(|name| {
                    let value = stand_in(&properties[&name]);
                    (name, value)
                })
                .collect();
            for (name, property) in properties {
                let snapshot = marked(property, "x-snapshot");
                assert!(
                    snapshot || !name.contains("snapshot"),
                    "{}'s {name} names snapshots but is not marked x-snapshot",
                    verb.name()
                );
                let mut args = base.clone();
                let given = match stand_in(property) {
                    Value::Array(_) => Value::Array(vec![Value::from("the-snapshot")]),
                    Value::String(_) => Value::from("the-snapshot"),
                    _ => continue,
                };
                args.insert(name.clone(), given);
                let request = match (verb.parse)(Value::Object(args)) {
                    Ok(request) => request,
                    // Not free text (a choice among names, a path): no snapshot.
                    Err(_) if !snapshot => continue,
                    Err(e) => panic!("{} {name}: {e}", verb.name()),
                };
                let named = request.named_snapshots().contains(&"the-snapshot");
                let fetched = !not_fetched
                    .iter()
                    .any(|(v, a, _)| *v == verb.name() && a == name);
                assert_eq!(
                    named,
                    snapshot && fetched,
                    "{}'s {name}: marked x-snapshot {snapshot}, named by its \
                     VerbSpec::named_snapshots {named} (an argument that names snapshots \
                     a remote could supply is both; list it here if it is not fetched)",
                    verb.name()
                );
                checked += usize::from(named);
            }
        }
        assert!(checked >= 10, "only {checked} snapshot arguments found");
    }

    /// Every route's example (its `VerbSpec::EXAMPLE`, shown in `docs/openapi.yaml`) is a
    /// request its route takes, and only routes have one.
    #[test]
    fn every_route_has_an_example_it_takes() {
        for verb in Verb::all() {
            let Some(example) = verb.example() else {
                assert!(
                    !verb.on(Face::Route),
                    "{}: a route without its VerbSpec::EXAMPLE",
                    verb.name()
                );
                continue;
            };
            assert!(
                verb.on(Face::Route),
                "{}: an example but no route",
                verb.name()
            );
            let mut args: JsonObject = serde_json::from_str(example)
                .unwrap_or_else(|e| panic!("{}'s example: {e}", verb.name()));
            args.remove("cwd");
            let request = verb
                .request(args)
                .unwrap_or_else(|e| panic!("{}'s example is refused: {e}", verb.name()));
            assert_eq!(request.verb(), verb.name());
        }
    }
}
