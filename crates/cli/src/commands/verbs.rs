//! The verbs other programs call by name (MCP tools, the HTTP API of `cairn serve`): each
//! is the engine's [`Verb`] of the same name, which describes it and reads its JSON
//! arguments into the engine request (the fuzz targets reach it there); the MCP schema is
//! its arguments' schema.

use cairn_engine::Verb;
use rmcp::model::JsonObject;
use serde_json::{Value, json};

/// The MCP tool's input schema of `verb`.
pub fn schema(verb: &Verb) -> JsonObject {
    let mut out = verb.args_schema(false);
    out.entry("required").or_insert_with(|| json!([]));
    out.insert("type".into(), Value::from("object"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_engine::Face;

    fn spec(name: &str) -> &'static Verb {
        Verb::named(name).expect("a verb")
    }

    /// The arguments of a route or tool call, as the engine request they become.
    fn request(verb: &str, args: Value) -> Result<cairn_engine::Request, String> {
        let Value::Object(args) = args else { panic!() };
        spec(verb).request(args).map_err(|e| e.to_string())
    }

    fn required(verb: &Verb) -> Vec<String> {
        verb.args_schema(false)
            .get("required")
            .and_then(Value::as_array)
            .map(|names| {
                names
                    .iter()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn offered() -> impl Iterator<Item = &'static Verb> {
        Verb::all()
            .iter()
            .filter(|v| v.on(Face::Route) || v.on(Face::Tool))
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
        // JSON has no option syntax: a value starting with '-' is that value, as on
        // `/v1/call` and after `--` on the command line (once refused here only).
        let Ok(cairn_engine::Request::Status(s)) =
            request("status", json!({ "worktree": "--help" }))
        else {
            panic!("a status")
        };
        assert_eq!(s.worktree.as_deref().map(|w| w.as_str()), Some("--help"));
        let Ok(cairn_engine::Request::Undo(u)) = request("undo", json!({})) else {
            panic!("an undo")
        };
        assert_eq!(u.worktree, None);
    }

    /// What only the command line sets is no argument of a route or tool.
    #[test]
    fn options_only_the_command_line_sets_are_refused() {
        for (verb, args) in [
            ("snapshot", json!({ "worktree": "w", "labels": ["a=b"] })),
            ("diff", json!({ "a": "x", "b": "y", "detail": "names" })),
            ("policy", json!({ "take_once": true })),
            ("policy_allow", json!({ "worktree": "w", "yes": true })),
        ] {
            let refused = request(verb, args).expect_err(verb);
            assert!(refused.starts_with("unknown argument"), "{verb}: {refused}");
            assert!(
                !schema(spec(verb))["properties"]
                    .as_object()
                    .expect("properties")
                    .keys()
                    .any(|k| ["labels", "detail", "take_once", "yes"].contains(&k.as_str())),
                "{verb}"
            );
        }
    }

    #[test]
    fn every_verb_of_the_table_is_an_engine_request() {
        for t in offered() {
            let mut args = serde_json::Map::new();
            for name in required(t) {
                // A value of the argument's type: a list (`run`'s command) or a string.
                let list = schema(t)["properties"][&name]["type"] == "array";
                args.insert(name, if list { json!(["x"]) } else { json!("x") });
            }
            let req = t
                .request(args)
                .unwrap_or_else(|e| panic!("{}: {e}", t.name()));
            assert_eq!(req.verb(), t.name());
        }
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
        for t in Verb::all().iter().filter(|v| v.on(Face::Route)) {
            assert!(
                doc.contains(&format!("\n  /v1/{}:\n", t.name())),
                "docs/openapi.yaml lacks /v1/{}",
                t.name()
            );
            let reference = format!(
                "schema: {{ $ref: \"#/components/schemas/{}Request\" }}",
                capitalized(t.name())
            );
            let section = doc
                .split(&format!("\n  /v1/{}:\n", t.name()))
                .nth(1)
                .and_then(|rest| rest.split("\n  /v1/").next())
                .unwrap_or_default();
            assert!(
                section.contains(&reference),
                "docs/openapi.yaml: /v1/{} must take {reference}",
                t.name()
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
        for t in offered() {
            let command = match t.name() {
                // The list `rewind -i` draws.
                "timeline" => "rewind",
                name => name.split('_').next().unwrap_or_default(),
            };
            assert!(
                cli.find_subcommand(command).is_some(),
                "{} is not a cairn command",
                t.name()
            );
            let s = schema(t);
            assert_eq!(s["type"], "object");
        }
    }
}
