//! The verbs other programs call by name (MCP tools, the HTTP API of `cairn serve`): each
//! maps JSON arguments to a cairn command line run with `--json`.

use rmcp::model::JsonObject;
use serde_json::{Value, json};

/// How a tool's arguments become a command line.
pub enum Arg {
    /// A positional argument (required unless `optional`).
    Positional(&'static str, bool),
    /// `--flag VALUE`.
    Option(&'static str, &'static str),
    /// `--flag` when true.
    Switch(&'static str, &'static str),
    /// `-- PATH…` from a list of strings.
    Paths(&'static str),
}

pub struct ToolSpec {
    pub name: &'static str,
    pub command: &'static [&'static str],
    pub description: &'static str,
    pub args: &'static [(Arg, &'static str)],
    /// Also an MCP tool.
    pub mcp: bool,
}

pub const TOOLS: &[ToolSpec] = &[
    ToolSpec {
        name: "snapshot",
        command: &["snapshot"],
        description: "Snapshot a worktree: a new immutable snapshot whose parent is its head (changed: false if nothing changed). Returns the snapshot id to pass to other agents.",
        args: &[
            (
                Arg::Positional("worktree", false),
                "The worktree directory.",
            ),
            (Arg::Option("message", "--message"), "Snapshot message."),
        ],
        mcp: true,
    },
    ToolSpec {
        name: "checkout",
        command: &["checkout"],
        description: "Hydrate a snapshot into a new or empty directory and register it as an isolated worktree.",
        args: &[
            (
                Arg::Positional("snapshot", false),
                "Snapshot id prefix, ref or checkpoint name.",
            ),
            (Arg::Positional("dest", false), "The destination directory."),
        ],
        mcp: true,
    },
    ToolSpec {
        name: "rollback",
        command: &["rollback"],
        description: "Make a worktree equal a snapshot (only the given paths, if any). The live state is captured first, so `undo` brings it back.",
        args: &[
            (
                Arg::Positional("worktree", false),
                "The worktree directory.",
            ),
            (
                Arg::Positional("snapshot", false),
                "Snapshot id prefix, ref or checkpoint name.",
            ),
            (
                Arg::Switch("dry_run", "--dry-run"),
                "Only list what would change.",
            ),
            (Arg::Paths("paths"), "Paths relative to the worktree root."),
        ],
        mcp: true,
    },
    ToolSpec {
        name: "diff",
        command: &["diff"],
        description: "Compare two snapshots or worktrees (a directory means its live files): added, removed, modified and renamed files with line counts.",
        args: &[
            (
                Arg::Positional("a", false),
                "A snapshot or a worktree directory.",
            ),
            (
                Arg::Positional("b", false),
                "A snapshot or a worktree directory.",
            ),
            (Arg::Paths("paths"), "Only these paths."),
        ],
        mcp: true,
    },
    ToolSpec {
        name: "status",
        command: &["status"],
        description: "Changes in a worktree since its head snapshot.",
        args: &[(Arg::Positional("worktree", true), "The worktree directory.")],
        mcp: true,
    },
    ToolSpec {
        name: "undo",
        command: &["undo"],
        description: "Revert the newest change set of the worktree that is not undone yet. Refuses, changing nothing, if any file it would touch changed since; each such file is listed with the reason.",
        args: &[(Arg::Positional("worktree", true), "The worktree directory.")],
        mcp: true,
    },
    ToolSpec {
        name: "redo",
        command: &["redo"],
        description: "Re-apply the newest undone change set of the worktree.",
        args: &[(Arg::Positional("worktree", true), "The worktree directory.")],
        mcp: true,
    },
    ToolSpec {
        name: "checkpoint",
        command: &["checkpoint"],
        description: "Snapshot a directory onto its checkpoint stack, optionally named (onboards it in place if new; nothing git owns is touched). The first checkpoint starts a task.",
        args: &[
            (Arg::Positional("dir", true), "The directory."),
            (Arg::Option("name", "--name"), "A name for the checkpoint."),
        ],
        mcp: true,
    },
    ToolSpec {
        name: "rewind",
        command: &["rewind"],
        description: "Roll the worktree back to a checkpoint (default: the latest); later checkpoints stay reachable.",
        args: &[
            (Arg::Positional("dir", true), "The worktree directory."),
            (
                Arg::Option("to", "--to"),
                "Checkpoint name, ref or snapshot id prefix.",
            ),
            (
                Arg::Switch("dry_run", "--dry-run"),
                "Only list what would change.",
            ),
        ],
        mcp: true,
    },
    ToolSpec {
        name: "merge",
        command: &["merge"],
        description: "Three-way merge a snapshot into the git repository it came from, as a commit on a new branch (or with checkout: the current branch, index and files). Conflicts are reported and the repository is left exactly as it was.",
        args: &[
            (Arg::Positional("snapshot", false), "The snapshot to merge."),
            (Arg::Option("into", "--into"), "The git repository."),
            (Arg::Option("branch", "--branch"), "The branch to create."),
            (
                Arg::Switch("checkout", "--checkout"),
                "Commit to the current branch and update its files.",
            ),
            (Arg::Option("message", "--message"), "Commit message."),
        ],
        mcp: true,
    },
    ToolSpec {
        name: "log",
        command: &["log"],
        description: "Snapshot history, newest first, of a worktree or from a snapshot.",
        args: &[
            (
                Arg::Positional("target", true),
                "A worktree directory or a snapshot.",
            ),
            (
                Arg::Option("max_count", "--max-count"),
                "At most this many.",
            ),
        ],
        mcp: true,
    },
    ToolSpec {
        name: "review",
        command: &["review"],
        description: "The task's changes against its baseline (the first checkpoint).",
        args: &[(Arg::Positional("dir", true), "The worktree directory.")],
        mcp: true,
    },
    ToolSpec {
        name: "show",
        command: &["show"],
        description: "A snapshot's (or tree's) listing, SNAP or SNAP:PATH.",
        args: &[(
            Arg::Positional("object", false),
            "SNAP, SNAP:PATH, or an object id.",
        )],
        mcp: false,
    },
    ToolSpec {
        name: "fsck",
        command: &["fsck"],
        description: "Verify every object and reference of the store.",
        args: &[],
        mcp: false,
    },
];

/// Arguments a call must give: the required positionals, and `merge`'s repository.
pub fn required(spec: &ToolSpec) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = spec
        .args
        .iter()
        .filter_map(|(arg, _)| match arg {
            Arg::Positional(n, false) => Some(*n),
            _ => None,
        })
        .collect();
    if spec.name == "merge" {
        out.push("into");
    }
    out
}

pub fn schema(spec: &ToolSpec) -> JsonObject {
    let mut properties = serde_json::Map::new();
    for (arg, doc) in spec.args {
        let (name, ty) = match arg {
            Arg::Positional(n, _) => (*n, json!({ "type": "string", "description": doc })),
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
    let mut out = serde_json::Map::new();
    out.insert("type".into(), json!("object"));
    out.insert("properties".into(), Value::Object(properties));
    out.insert("required".into(), json!(required(spec)));
    out.insert("additionalProperties".into(), json!(false));
    out
}

/// The command line for a tool call, or why the arguments are wrong. A `null` argument
/// counts as left out.
pub fn argv(spec: &ToolSpec, args: &JsonObject) -> Result<Vec<String>, String> {
    for key in args.keys() {
        if !spec.args.iter().any(|(a, _)| arg_name(a) == key) {
            return Err(format!("unknown argument {key:?}"));
        }
    }
    let text = |name: &str| -> Result<Option<String>, String> {
        match args.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(format!("{name} must be a string, not {other}")),
        }
    };
    let mut out: Vec<String> = vec!["--json".into()];
    out.extend(spec.command.iter().map(|s| (*s).to_owned()));
    let mut paths = Vec::new();
    for (arg, _) in spec.args {
        match arg {
            Arg::Positional(name, optional) => match text(name)? {
                // It would be read as an option.
                Some(v) if v.starts_with('-') => {
                    return Err(format!("{name} must not start with '-': {v:?}"));
                }
                Some(v) => out.push(v),
                None if *optional => {}
                None => return Err(format!("missing argument {name:?}")),
            },
            Arg::Option("max_count", flag) => {
                if let Some(n) = count(args.get("max_count"))? {
                    out.push(format!("{flag}={n}"));
                }
            }
            // `--flag=VALUE`: a value that starts with '-' is still the value.
            Arg::Option(name, flag) => {
                if let Some(v) = text(name)? {
                    out.push(format!("{flag}={v}"));
                }
            }
            Arg::Switch(name, flag) => match args.get(*name) {
                None | Some(Value::Null) | Some(Value::Bool(false)) => {}
                Some(Value::Bool(true)) => out.push((*flag).to_owned()),
                Some(other) => return Err(format!("{name} must be a boolean, not {other}")),
            },
            Arg::Paths(name) => match args.get(*name) {
                None | Some(Value::Null) => {}
                Some(Value::Array(items)) => {
                    for item in items {
                        match item {
                            Value::String(s) => paths.push(s.clone()),
                            other => {
                                return Err(format!("{name} items must be strings, not {other}"));
                            }
                        }
                    }
                }
                Some(other) => {
                    return Err(format!("{name} must be a list of strings, not {other}"));
                }
            },
        }
    }
    for name in required(spec) {
        if text(name)?.is_none() {
            return Err(format!("missing argument {name:?}"));
        }
    }
    if !paths.is_empty() {
        out.push("--".into());
        out.extend(paths);
    }
    Ok(out)
}

/// A count of at least 1 (`log`'s `--max-count`); a larger one than `usize` holds means
/// the same as the largest ("at most this many").
fn count(value: Option<&Value>) -> Result<Option<usize>, String> {
    let n = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n,
        Some(other) => return Err(format!("max_count must be an integer, not {other}")),
    };
    if let Some(n) = n.as_u64() {
        return match usize::try_from(n) {
            Ok(0) => Err("max_count must be at least 1, not 0".into()),
            Ok(n) => Ok(Some(n)),
            Err(_) => Ok(Some(usize::MAX)),
        };
    }
    // serde_json reads an integer past u64 (or one written as 5.0) as a float.
    match n.as_f64() {
        Some(f) if f.fract() == 0.0 && f >= 1.0 => Ok(Some(if f >= usize::MAX as f64 {
            usize::MAX
        } else {
            f as usize
        })),
        _ => Err(format!(
            "max_count must be a whole number of at least 1, not {n}"
        )),
    }
}

fn arg_name(arg: &Arg) -> &'static str {
    match arg {
        Arg::Positional(n, _) | Arg::Option(n, _) | Arg::Switch(n, _) | Arg::Paths(n) => n,
    }
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

    /// What `docs/openapi.yaml` must say a verb's request is: written from `TOOLS`, so the
    /// file cannot drift from what `argv` accepts.
    fn openapi_request(spec: &ToolSpec) -> String {
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
            let schema = match arg {
                Arg::Positional(..) => format!("type: {}, pattern: \"^(?!-)\"", ty("string")),
                Arg::Option("max_count", _) => format!("type: {}, minimum: 1", ty("integer")),
                Arg::Option(..) => format!("type: {}", ty("string")),
                Arg::Switch(..) => format!("type: {}", ty("boolean")),
                Arg::Paths(_) => format!("type: {}, items: {{ type: string }}", ty("array")),
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
    fn verb_arguments_of_the_wrong_type_or_range_are_refused() {
        let refused = |verb: &str, args: Value| {
            let Value::Object(args) = args else { panic!() };
            argv(spec(verb), &args).expect_err(&format!("{verb} {args:?}"))
        };
        assert!(refused("snapshot", json!({ "worktree": 5 })).contains("worktree"));
        assert!(refused("snapshot", json!({ "worktree": "w", "message": 1 })).contains("message"));
        assert!(refused("log", json!({ "target": "w", "max_count": 0 })).contains("max_count"));
        assert!(refused("log", json!({ "target": "w", "max_count": -3 })).contains("max_count"));
        assert!(refused("log", json!({ "target": "w", "max_count": 1.5 })).contains("max_count"));
        assert!(refused("log", json!({ "target": "w", "max_count": "5" })).contains("max_count"));
        assert!(refused("merge", json!({ "snapshot": "s", "into": null })).contains("into"));
        let Value::Object(huge) = json!({ "target": "w", "max_count": 1e30 }) else {
            panic!()
        };
        assert_eq!(
            argv(spec("log"), &huge).expect("valid"),
            ["--json", "log", "w", &format!("--max-count={}", usize::MAX)]
        );
        // An option's value may start with '-': it is joined to its flag.
        let Value::Object(dash) = json!({ "worktree": "w", "message": "-m" }) else {
            panic!()
        };
        assert_eq!(
            argv(spec("snapshot"), &dash).expect("valid"),
            ["--json", "snapshot", "w", "--message=-m"]
        );
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
