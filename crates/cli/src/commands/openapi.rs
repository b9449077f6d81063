//! `docs/openapi.yaml`'s request schemas are generated: each route's request body, each
//! verb's `/v1/call` options and `/v1/call`'s list of verbs come from the engine's verbs and
//! options types ([`Verb`]), written between the file's `BEGIN generated` and `END
//! generated` lines; the rest of the file (paths, responses, results) is kept by hand.
//! The test fails on any difference; `CAIRN_WRITE_OPENAPI=1 cargo test -p cairn-cli
//! openapi` writes the file again.

use cairn_engine::{Face, Verb};
use serde_json::{Value, json};

const FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.yaml");
const BEGIN: &str = "    # BEGIN generated";
const END: &str = "    # END generated";

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
    let (Some(start), Some(end)) = (file.find(BEGIN), file.find(END)) else {
        panic!("docs/openapi.yaml lacks its {BEGIN:?} and {END:?} lines")
    };
    let after_begin = start + file[start..].find('\n').expect("a line") + 1;
    let want = format!("{}{}{}", &file[..after_begin], generated(), &file[end..]);
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
