//! The verbs other programs call by name (MCP tools, the HTTP API of `cairn serve`): each
//! takes JSON arguments, checked against the table in `cairn-client` (the fuzz targets reach
//! it there), and is the engine request of the same name; the MCP schema is here.

use rmcp::model::JsonObject;
use serde_json::{Value, json};

pub use cairn_client::verbs::{Arg, TOOLS, ToolSpec, check, required};

pub fn schema(spec: &ToolSpec) -> JsonObject {
    use cairn_engine::limits::{MAX_COUNT, MAX_LIST_ITEMS, text_limit};
    let mut properties = serde_json::Map::new();
    for (arg, doc) in spec.args {
        let text =
            |n: &str| json!({ "type": "string", "maxLength": text_limit(n), "description": doc });
        let (name, ty) = match arg {
            Arg::Positional(n, _) => (*n, text(n)),
            Arg::Option("max_count", _) => (
                "max_count",
                json!({ "type": "integer", "minimum": 1, "maximum": MAX_COUNT, "description": doc }),
            ),
            Arg::Option(n, _) => (*n, text(n)),
            Arg::Switch(n, _) => (*n, json!({ "type": "boolean", "description": doc })),
            Arg::Number(n, _, max) => (
                *n,
                json!({ "type": "integer", "minimum": 0, "maximum": max, "description": doc }),
            ),
            Arg::Paths(n) => (
                *n,
                json!({
                    "type": "array",
                    "maxItems": MAX_LIST_ITEMS,
                    "items": { "type": "string", "maxLength": text_limit(n) },
                    "description": doc,
                }),
            ),
        };
        properties.insert(name.to_owned(), ty);
    }
    let mut out = serde_json::Map::new();
    out.insert("type".into(), json!("object"));
    out.insert("properties".into(), Value::Object(properties));
    out.insert("required".into(), json!(required(spec)));
    out.insert("additionalProperties".into(), json!(false));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_client::verbs::arg_name;

    fn spec(name: &str) -> &'static ToolSpec {
        TOOLS.iter().find(|t| t.name == name).expect("tool")
    }

    /// Every verb's arguments, as checked, are its engine request's.
    fn request(verb: &str, args: Value) -> Result<cairn_engine::Request, String> {
        let Value::Object(args) = args else { panic!() };
        check(spec(verb), &args).and_then(|a| cairn_engine::Request::from_verb(verb, a))
    }

    #[test]
    fn tool_arguments_become_the_request() {
        let args = json!({ "worktree": "wt", "snapshot": "abc123", "dry_run": true, "paths": ["a", "b/c"] });
        let Ok(cairn_engine::Request::Rollback(r)) = request("rollback", args) else {
            panic!("a rollback")
        };
        assert_eq!(
            (r.worktree.as_str(), r.snapshot.as_str(), r.dry_run),
            ("wt", "abc123", true)
        );
        assert_eq!(r.paths, vec!["a".into(), "b/c".into()]);
        assert!(
            request("snapshot", json!({ "worktree": "wt", "bogus": 1 }))
                .unwrap_err()
                .contains("bogus")
        );
        assert!(
            request("merge", json!({ "snapshot": "s" }))
                .unwrap_err()
                .contains("into")
        );
        assert!(
            request("status", json!({ "worktree": "--help" }))
                .unwrap_err()
                .contains("--help")
        );
        let Ok(cairn_engine::Request::Undo(u)) = request("undo", json!({})) else {
            panic!("an undo")
        };
        assert_eq!(u.worktree, None);
    }

    #[test]
    fn every_verb_of_the_table_is_an_engine_request() {
        for t in TOOLS {
            let mut args = serde_json::Map::new();
            for name in required(t) {
                args.insert(name.to_owned(), json!("x"));
            }
            let req = check(t, &args).and_then(|a| cairn_engine::Request::from_verb(t.name, a));
            assert_eq!(req.expect(t.name).verb(), t.name);
        }
    }

    /// What `docs/openapi.yaml` must say a verb's request is: written from `TOOLS`, so the
    /// file cannot drift from what `argv` accepts.
    fn openapi_request(spec: &ToolSpec) -> String {
        use cairn_engine::limits::{MAX_COUNT, MAX_LIST_ITEMS, text_limit};
        let quoted = |s: &str| serde_json::to_string(s).expect("a string");
        let required = required(spec);
        let directory = spec.args.iter().find_map(|(arg, _)| match arg {
            Arg::Positional(n, true) => Some(*n),
            _ => None,
        });
        let mut out = format!("    {}Request:\n", capitalized(spec.name));
        out.push_str("      type: object\n      additionalProperties: false\n");
        if !required.is_empty() {
            out.push_str(&format!("      required: [{}]\n", required.join(", ")));
        }
        if let Some(dir) = directory {
            // The server's `missing_directory`: no cwd to default to.
            out.push_str(&format!(
                "      anyOf:\n        - required: [cwd]\n        - {{ required: [{dir}], properties: {{ {dir}: {{ type: string }} }} }}\n"
            ));
        }
        out.push_str("      properties:\n");
        for (arg, doc) in spec.args {
            let name = arg_name(arg);
            // A `null` argument counts as left out, so optional ones may be null.
            let ty = |t: &str| {
                if required.contains(&name) {
                    t.to_owned()
                } else {
                    format!("[{t}, \"null\"]")
                }
            };
            let text = |n: &str| format!("maxLength: {}", text_limit(n));
            let schema = match arg {
                Arg::Positional(n, _) => {
                    format!("type: {}, pattern: \"^(?!-)\", {}", ty("string"), text(n))
                }
                Arg::Option("max_count", _) => {
                    format!("type: {}, minimum: 1, maximum: {MAX_COUNT}", ty("integer"))
                }
                Arg::Option(n, _) => format!("type: {}, {}", ty("string"), text(n)),
                Arg::Switch(..) => format!("type: {}", ty("boolean")),
                Arg::Number(_, _, max) => {
                    format!("type: {}, minimum: 0, maximum: {max}", ty("integer"))
                }
                Arg::Paths(n) => format!(
                    "type: {}, maxItems: {MAX_LIST_ITEMS}, items: {{ type: string, {} }}",
                    ty("array"),
                    text(n)
                ),
            };
            out.push_str(&format!(
                "        {name}: {{ {schema}, description: {} }}\n",
                quoted(doc)
            ));
        }
        out.push_str("        cwd: { $ref: \"#/components/schemas/Cwd\" }\n");
        out
    }

    fn capitalized(name: &str) -> String {
        let mut chars = name.chars();
        chars
            .next()
            .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
            .unwrap_or_default()
    }

    #[test]
    fn the_openapi_file_documents_every_verb() {
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/openapi.yaml"
        ))
        .expect("docs/openapi.yaml");
        for t in TOOLS {
            assert!(
                doc.contains(&format!("\n  /v1/{}:\n", t.name)),
                "docs/openapi.yaml lacks /v1/{}",
                t.name
            );
            let reference = format!(
                "schema: {{ $ref: \"#/components/schemas/{}Request\" }}",
                capitalized(t.name)
            );
            let section = doc
                .split(&format!("\n  /v1/{}:\n", t.name))
                .nth(1)
                .and_then(|rest| rest.split("\n  /v1/").next())
                .unwrap_or_default();
            assert!(
                section.contains(&reference),
                "docs/openapi.yaml: /v1/{} must take {reference}",
                t.name
            );
            let expected = openapi_request(t);
            assert!(
                doc.contains(&expected),
                "docs/openapi.yaml must describe /v1/{}'s arguments as TOOLS does:\n{expected}",
                t.name
            );
        }
    }

    #[test]
    fn the_openapi_file_documents_every_verb_of_the_call_route() {
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/openapi.yaml"
        ))
        .expect("docs/openapi.yaml");
        for verb in cairn_engine::Request::VERBS {
            let variant = format!(
                "properties: {{ verb: {{ const: {verb} }}, args: {{ $ref: \"#/components/schemas/CallArgs_{verb}\" }} }}"
            );
            assert!(
                doc.contains(&variant),
                "docs/openapi.yaml: /v1/call's request lacks the verb {verb}"
            );
            assert!(
                doc.contains(&format!("\n    CallArgs_{verb}:\n")),
                "docs/openapi.yaml lacks CallArgs_{verb}"
            );
        }
    }

    #[test]
    fn verb_arguments_of_the_wrong_type_or_range_are_refused() {
        let refused = |verb: &str, args: Value| {
            request(verb, args.clone()).expect_err(&format!("{verb} {args:?}"))
        };
        assert!(refused("snapshot", json!({ "worktree": 5 })).contains("worktree"));
        assert!(refused("snapshot", json!({ "worktree": "w", "message": 1 })).contains("message"));
        assert!(refused("log", json!({ "target": "w", "max_count": 0 })).contains("max_count"));
        assert!(refused("log", json!({ "target": "w", "max_count": -3 })).contains("max_count"));
        assert!(refused("log", json!({ "target": "w", "max_count": 1.5 })).contains("max_count"));
        assert!(refused("log", json!({ "target": "w", "max_count": "5" })).contains("max_count"));
        assert!(refused("merge", json!({ "snapshot": "s", "into": null })).contains("into"));
        // A count past 64 bits is past any limit (it was once taken as "every one").
        assert!(refused("log", json!({ "target": "w", "max_count": 1e30 })).contains("max_count"));
        // An option's value may start with '-'.
        let Ok(cairn_engine::Request::Snapshot(s)) =
            request("snapshot", json!({ "worktree": "w", "message": "-m" }))
        else {
            panic!("a snapshot")
        };
        assert_eq!(s.message.as_deref(), Some("-m"));
    }

    #[test]
    fn every_tool_is_a_real_command() {
        use clap::CommandFactory;
        let cli = crate::Cli::command();
        for t in TOOLS {
            assert!(
                cli.find_subcommand(t.command[0]).is_some(),
                "{} is not a cairn command",
                t.name
            );
            let s = schema(t);
            assert_eq!(s["type"], "object");
        }
    }
}
