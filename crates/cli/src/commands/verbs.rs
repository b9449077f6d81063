//! The verbs other programs call by name (MCP tools, the HTTP API of `cairn serve`): each
//! maps JSON arguments to a cairn command line run with `--json`. The table and the mapping
//! live in `cairn-client` (the fuzz targets reach them there); the MCP schema is here.

use rmcp::model::JsonObject;
use serde_json::{Value, json};

pub use cairn_client::verbs::{Arg, TOOLS, ToolSpec, argv};

pub fn schema(spec: &ToolSpec) -> JsonObject {
    let mut properties = serde_json::Map::new();
    let mut required = Vec::new();
    for (arg, doc) in spec.args {
        let (name, ty) = match arg {
            Arg::Positional(n, optional) => {
                if !optional {
                    required.push(json!(n));
                }
                (*n, json!({ "type": "string", "description": doc }))
            }
            Arg::Option("max_count", _) => (
                "max_count",
                json!({ "type": "integer", "minimum": 1, "description": doc }),
            ),
            Arg::Option(n, _) => (*n, json!({ "type": "string", "description": doc })),
            Arg::Switch(n, _) => (*n, json!({ "type": "boolean", "description": doc })),
            Arg::Paths(n) => (
                *n,
                json!({ "type": "array", "items": { "type": "string" }, "description": doc }),
            ),
        };
        properties.insert(name.to_owned(), ty);
    }
    if spec.name == "merge" {
        required.push(json!("into"));
    }
    let mut out = serde_json::Map::new();
    out.insert("type".into(), json!("object"));
    out.insert("properties".into(), Value::Object(properties));
    out.insert("required".into(), Value::Array(required));
    out.insert("additionalProperties".into(), json!(false));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> &'static ToolSpec {
        TOOLS.iter().find(|t| t.name == name).expect("tool")
    }

    #[test]
    fn tool_arguments_become_the_command_line() {
        let args = json!({ "worktree": "wt", "snapshot": "abc123", "dry_run": true, "paths": ["a", "b/c"] });
        let Value::Object(args) = args else { panic!() };
        assert_eq!(
            argv(spec("rollback"), &args).expect("valid"),
            [
                "--json",
                "rollback",
                "wt",
                "abc123",
                "--dry-run",
                "--",
                "a",
                "b/c"
            ]
        );
        let Value::Object(bad) = json!({ "worktree": "wt", "bogus": 1 }) else {
            panic!()
        };
        assert!(argv(spec("snapshot"), &bad).unwrap_err().contains("bogus"));
        let Value::Object(missing) = json!({ "snapshot": "s" }) else {
            panic!()
        };
        assert!(argv(spec("merge"), &missing).unwrap_err().contains("into"));
        let Value::Object(flag) = json!({ "worktree": "--help" }) else {
            panic!()
        };
        assert!(argv(spec("status"), &flag).unwrap_err().contains("--help"));
        let Value::Object(none) = json!({}) else {
            panic!()
        };
        assert_eq!(
            argv(spec("undo"), &none).expect("valid"),
            ["--json", "undo"]
        );
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
        }
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
