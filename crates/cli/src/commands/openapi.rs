//! `docs/openapi.yaml` is generated where the engine's verbs describe it ([`Verb`]): each
//! route's path entry (summary and description from its doc comment, its example and
//! what its 409 refusal means from its `VerbSpec`, its result schema named for the verb or
//! its outcome type), each route's request body, each verb's `/v1/call` options and
//! `/v1/call`'s list of verbs, written between the file's `BEGIN generated` and `END
//! generated` lines. The rest (the other routes, the responses, the result schemas) is
//! kept by hand. The test fails on any difference; `CAIRN_WRITE_OPENAPI=1 cargo test -p
//! cairn-cli openapi` writes the file again.

use cairn_engine::{Face, Verb};
use serde_json::{Value, json};

const FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.yaml");
const BEGIN: &str = "    # BEGIN generated";
const END: &str = "    # END generated";
const BEGIN_ROUTES: &str = "  # BEGIN generated routes";
const END_ROUTES: &str = "  # END generated routes";

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

/// The result schema of `verb`'s route: the one named for the verb (`RedoResult`), else
/// the one named for its outcome type (`rewind`'s `RollbackResult`); `None` if the file
/// has neither.
fn result_schema(verb: &Verb, file: &str) -> Option<String> {
    let by_verb = format!("{}Result", capitalized(verb.name()));
    let by_type = verb.outcome_type().replace("Outcome", "Result");
    [by_verb, by_type]
        .into_iter()
        .find(|name| file.contains(&format!("\n    {name}:\n")))
}

/// The path entries of the verbs' routes.
fn routes(file: &str) -> String {
    let mut out = String::new();
    for verb in Verb::all().iter().filter(|v| v.on(Face::Route)) {
        let name = verb.name();
        let summary = verb.summary();
        let description = verb.description();
        let result = result_schema(verb, file).unwrap_or_else(|| {
            panic!("docs/openapi.yaml has no result schema for /v1/{name} (a {}Result or {}), to write by hand", capitalized(name), verb.outcome_type().replace("Outcome", "Result"))
        });
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

/// `file` with what lies between the line `begin` and the line `end` replaced by `with`.
fn between(file: &str, begin: &str, end: &str, with: &str) -> String {
    let (Some(start), Some(stop)) = (file.find(begin), file.find(end)) else {
        panic!("docs/openapi.yaml lacks its {begin:?} and {end:?} lines")
    };
    let after_begin = start + file[start..].find('\n').expect("a line") + 1;
    format!("{}{}{}", &file[..after_begin], with, &file[stop..])
}

/// What goes between the markers.
fn generated() -> String {
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

#[test]
fn the_openapi_file_is_generated_from_the_engine_types() {
    let file = std::fs::read_to_string(FILE).expect("docs/openapi.yaml");
    let want = between(&file, BEGIN_ROUTES, END_ROUTES, &routes(&file));
    let want = between(&want, BEGIN, END, &generated());
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
