//! `docs/openapi.yaml` is generated whole: `openapi.template.yaml` beside this file (the
//! prose, the routes that are no verb's, the shared responses and the schemas of the
//! client's wire types) with the parts the engine's types describe put in. From the verbs
//! ([`Verb`]): each route's path entry (summary and description from its doc comment, its
//! example and what its 409 refusal means from its `VerbSpec`, its result schema its
//! outcome type's), each route's request body, each verb's `/v1/call` options and
//! `/v1/call`'s list of verbs. From the engine's types, derived (`schemars`, as serde writes
//! them): every outcome and what it holds, `/v1/call`'s reply, and the error body with
//! every code ([`Code`] and the server's own, [`crate::http::ROUTE_CODES`]). The test fails
//! on any difference; `CAIRN_WRITE_OPENAPI=1 cargo test -p cairn-cli openapi` writes the
//! file again.

use cairn_engine::wire::CallReply;
use cairn_engine::{Code, Face, Verb};
use schemars::SchemaGenerator;
use serde_json::{Value, json};

const FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.yaml");
const TEMPLATE: &str = include_str!("openapi.template.yaml");
/// The template's line where the verbs' routes go.
const ROUTES: &str = "  # generated: routes\n";
/// The template's line where the generated schemas go.
const SCHEMAS: &str = "    # generated: schemas\n";
/// Where the generated schemas are, for `$ref`.
const DEFINITIONS: &str = "/components/schemas";

/// A value in YAML's flow style; names and words plain, other text quoted as JSON (a
/// subset of YAML's double-quoted style).
fn flow(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let items: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", plain_or_quoted(k), flow(v)))
                .collect();
            format!("{{ {} }}", items.join(", "))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(flow).collect();
            format!("[{}]", items.join(", "))
        }
        Value::String(s) => plain_or_quoted(s),
        other => other.to_string(),
    }
}

fn plain_or_quoted(s: &str) -> String {
    let word = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    // Words YAML 1.1 reads as booleans or null.
    let special = matches!(
        s.to_ascii_lowercase().as_str(),
        "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "y" | "n"
    );
    if word && !special {
        s.to_owned()
    } else {
        serde_json::to_string(s).expect("a string encodes")
    }
}

/// A schema under `components/schemas`: its keywords as block lines, each property and
/// each item of a list of schemas on its own line.
fn schema(name: &str, schema: &serde_json::Map<String, Value>) -> String {
    let mut out = format!("    {name}:\n");
    for (key, value) in schema {
        match value {
            Value::Object(properties) if key == "properties" && !properties.is_empty() => {
                out.push_str("      properties:\n");
                for (name, property) in properties {
                    out.push_str(&format!("        {name}: {}\n", flow(property)));
                }
            }
            Value::Array(items) if items.iter().any(Value::is_object) => {
                out.push_str(&format!("      {key}:\n"));
                for item in items {
                    out.push_str(&format!("        - {}\n", flow(item)));
                }
            }
            _ => out.push_str(&format!("      {key}: {}\n", flow(value))),
        }
    }
    out
}

fn capitalized(name: &str) -> String {
    let mut chars = name.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// `text` as a YAML single-quoted scalar.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The errors every route may answer with; a route that can refuse answers 409 with its
/// refusal instead of a conflict alone.
const ERRORS: &[(&str, &str)] = &[
    ("400", "BadRequest"),
    ("403", "Forbidden"),
    ("404", "NotFound"),
    ("409", "Conflict"),
    ("413", "TooLarge"),
    ("422", "Unprocessable"),
    ("500", "StoreFailure"),
    ("502", "RemoteFailed"),
    ("504", "RemoteTimedOut"),
    ("507", "NoSpace"),
];

/// The path entries of the verbs' routes; `generator` gains their outcomes' schemas.
fn routes(generator: &mut SchemaGenerator) -> String {
    let mut out = String::new();
    for verb in Verb::all().iter().filter(|v| v.on(Face::Route)) {
        let name = verb.name();
        let summary = verb.summary();
        let description = verb.description();
        let result = verb.outcome_schema(generator);
        let result = result
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix(&format!("#{DEFINITIONS}/")))
            .unwrap_or_else(|| {
                panic!("/v1/{name}: its outcome's schema is no named type ({result:?})")
            })
            .to_owned();
        let example: Value = verb
            .example()
            .map(|e| serde_json::from_str(e).expect("every route's example is JSON"))
            .unwrap_or_else(|| panic!("/v1/{name} lacks its VerbSpec::EXAMPLE"));
        let required = verb
            .args_schema(false)
            .get("required")
            .is_some_and(|r| r.as_array().is_some_and(|r| !r.is_empty()))
            || verb.default_directory().is_some();
        out.push_str(&format!(
            "  /v1/{name}:\n    post:\n      summary: {}\n",
            quoted(&summary)
        ));
        if description != summary {
            out.push_str(&format!("      description: {}\n", quoted(&description)));
        }
        out.push_str(&format!(
            "      requestBody:\n        required: {required}\n        content:\n          application/json:\n            schema: {{ $ref: \"#/components/schemas/{}Request\" }}\n            example: {}\n",
            capitalized(name),
            flow(&example)
        ));
        out.push_str(&format!(
            "      responses:\n        \"200\":\n          description: Success; the command's `--json` object.\n          content:\n            application/json:\n              schema: {{ $ref: \"#/components/schemas/{result}\" }}\n"
        ));
        if let Some(refused) = verb.refused() {
            out.push_str(&format!(
                "        \"409\":\n          description: {}\n          content:\n            application/json:\n              schema:\n                anyOf:\n                  - allOf: [{{ $ref: \"#/components/schemas/{result}\" }}, {{ $ref: \"#/components/schemas/Refusal\" }}]\n                  - {{ $ref: \"#/components/schemas/Error\" }}\n",
                quoted(refused)
            ));
        }
        for (status, response) in ERRORS {
            if *status == "409" && verb.refused().is_some() {
                continue;
            }
            out.push_str(&format!(
                "        \"{status}\": {{ $ref: \"#/components/responses/{response}\" }}\n"
            ));
        }
    }
    out
}

/// The error body of every route, `{"error": {"code", "message"}}`, with every code.
fn error_schema() -> serde_json::Map<String, Value> {
    let codes: Vec<&str> = Code::all()
        .iter()
        .map(|c| c.as_str())
        .chain(crate::http::ROUTE_CODES.iter().copied())
        .collect();
    let Value::Object(schema) = json!({
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": { "enum": codes, "description": "Stable, snake_case: the engine's codes and the server's own (a malformed request, an object refused)." },
                    "message": { "type": "string", "description": "Names the path or id involved." },
                },
            },
        },
    }) else {
        unreachable!("an object")
    };
    schema
}

/// The schemas of the engine's types: the error body, every definition `generator` holds
/// (each route's outcome and what it holds) and `/v1/call`'s reply with every verb's
/// outcome.
fn type_schemas(mut generator: SchemaGenerator) -> String {
    generator.subschema_for::<CallReply>();
    let mut out = schema("Error", &error_schema());
    for (name, definition) in generator.take_definitions(true) {
        let Value::Object(definition) = definition else {
            panic!("{name}: a schema that is no object")
        };
        assert!(
            !TEMPLATE.contains(&format!("\n    {name}:\n")),
            "the type {name} is named as a schema of openapi.template.yaml too"
        );
        out.push_str(&schema(&name, &definition));
    }
    out
}

/// The request schemas: each route's body, `/v1/call`'s request and each verb's options.
fn request_schemas() -> String {
    let mut out = String::new();
    for verb in Verb::all().iter().filter(|v| v.on(Face::Route)) {
        let mut body = verb.args_schema(true);
        if let Some(dir) = verb.default_directory() {
            // The server's `missing_argument`: no cwd to default to.
            body.insert(
                "anyOf".into(),
                json!([
                    { "required": ["cwd"] },
                    { "required": [dir], "properties": { dir.clone(): { "type": "string" } } },
                ]),
            );
        }
        if let Some(Value::Object(properties)) = body.get_mut("properties") {
            properties.insert("cwd".into(), json!({ "$ref": "#/components/schemas/Cwd" }));
        }
        body.insert(
            "description".into(),
            Value::from(format!(
                "The arguments of `/v1/{}`: {}",
                verb.name(),
                verb.description()
            )),
        );
        out.push_str(&schema(
            &format!("{}Request", capitalized(verb.name())),
            &body,
        ));
    }
    // Written by hand, not through `flow`: a JSON object's keys come out sorted, and a
    // variant reads best as its verb, then its options.
    out.push_str(
        "    TypedRequest:\n      description: \"A cairn-engine Request: the verb and its options (every option of the command, not only those of the verb's route).\"\n      oneOf:\n",
    );
    for verb in Verb::all() {
        out.push_str(&format!(
            "        - {{ type: object, additionalProperties: false, required: [verb, args], properties: {{ verb: {{ const: {name} }}, args: {{ $ref: \"#/components/schemas/CallArgs_{name}\" }} }} }}\n",
            name = verb.name()
        ));
    }
    for verb in Verb::all() {
        let mut options = verb.options_schema();
        options.insert("description".into(), Value::from(verb.description()));
        out.push_str(&schema(&format!("CallArgs_{}", verb.name()), &options));
    }
    out
}

/// The whole file.
fn document() -> String {
    let mut generator = cairn_engine::output_schemas(DEFINITIONS);
    let routes = routes(&mut generator);
    let schemas = type_schemas(generator) + &request_schemas();
    for line in [ROUTES, SCHEMAS] {
        assert_eq!(
            TEMPLATE.matches(line).count(),
            1,
            "openapi.template.yaml must have the line {line:?} once"
        );
    }
    format!(
        "# Generated by crates/cli/src/commands/openapi.rs from openapi.template.yaml beside it and\n\
         # cairn-engine's types: edit those, then CAIRN_WRITE_OPENAPI=1 cargo test -p cairn-cli openapi.\n{}",
        TEMPLATE.replace(ROUTES, &routes).replace(SCHEMAS, &schemas)
    )
}

#[test]
fn the_openapi_file_is_generated_from_the_engine_types() {
    let file = std::fs::read_to_string(FILE).expect("docs/openapi.yaml");
    let want = document();
    if std::env::var_os("CAIRN_WRITE_OPENAPI").is_some() {
        std::fs::write(FILE, &want).expect("docs/openapi.yaml written");
        return;
    }
    if want != file {
        let first = want
            .lines()
            .zip(file.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        panic!(
            "docs/openapi.yaml is not what the engine's types say (first difference at line {}:\n  file: {:?}\n  want: {:?}).\nWrite it again with: CAIRN_WRITE_OPENAPI=1 cargo test -p cairn-cli openapi",
            first + 1,
            file.lines().nth(first).unwrap_or_default(),
            want.lines().nth(first).unwrap_or_default(),
        );
    }
}
