//! `cairn mcp`: a Model Context Protocol server on stdio. Each tool runs the cairn command
//! of the same name with `--json` (through `cairn serve` when one holds the store) and
//! returns its JSON object; a refusal or error comes back as a tool error with the same
//! object, so the model sees the message.

use camino::Utf8PathBuf;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use crate::error::CliError;
use crate::output::Report;

/// How a tool's arguments become a command line.
enum Arg {
    /// A positional argument (required unless `optional`).
    Positional(&'static str, bool),
    /// `--flag VALUE`.
    Option(&'static str, &'static str),
    /// `--flag` when true.
    Switch(&'static str, &'static str),
    /// `-- PATH…` from a list of strings.
    Paths(&'static str),
}

struct ToolSpec {
    name: &'static str,
    command: &'static [&'static str],
    description: &'static str,
    args: &'static [(Arg, &'static str)],
}

const TOOLS: &[ToolSpec] = &[
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
    },
    ToolSpec {
        name: "status",
        command: &["status"],
        description: "Changes in a worktree since its head snapshot.",
        args: &[(Arg::Positional("worktree", true), "The worktree directory.")],
    },
    ToolSpec {
        name: "undo",
        command: &["undo"],
        description: "Revert the newest change set of the worktree that is not undone yet. Refuses, changing nothing, if any file it would touch changed since; each such file is listed with the reason.",
        args: &[(Arg::Positional("worktree", true), "The worktree directory.")],
    },
    ToolSpec {
        name: "redo",
        command: &["redo"],
        description: "Re-apply the newest undone change set of the worktree.",
        args: &[(Arg::Positional("worktree", true), "The worktree directory.")],
    },
    ToolSpec {
        name: "checkpoint",
        command: &["checkpoint"],
        description: "Snapshot a directory onto its checkpoint stack, optionally named (onboards it in place if new; nothing git owns is touched). The first checkpoint starts a task.",
        args: &[
            (Arg::Positional("dir", true), "The directory."),
            (Arg::Option("name", "--name"), "A name for the checkpoint."),
        ],
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
    },
    ToolSpec {
        name: "review",
        command: &["review"],
        description: "The task's changes against its baseline (the first checkpoint).",
        args: &[(Arg::Positional("dir", true), "The worktree directory.")],
    },
];

fn schema(spec: &ToolSpec) -> JsonObject {
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

/// The command line for a tool call, or why the arguments are wrong.
fn argv(spec: &ToolSpec, args: &JsonObject) -> Result<Vec<String>, String> {
    for key in args.keys() {
        if !spec.args.iter().any(|(a, _)| arg_name(a) == key) {
            return Err(format!("unknown argument {key:?}"));
        }
    }
    let text = |name: &str| -> Result<Option<String>, String> {
        match args.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(other) => Err(format!("{name} must be a string, not {other}")),
        }
    };
    let mut out: Vec<String> = vec!["--json".into()];
    out.extend(spec.command.iter().map(|s| (*s).to_owned()));
    let mut paths = Vec::new();
    for (arg, _) in spec.args {
        match arg {
            Arg::Positional(name, optional) => match text(name)? {
                Some(v) => out.push(v),
                None if *optional => {}
                None => return Err(format!("missing argument {name:?}")),
            },
            Arg::Option(name, flag) => {
                if let Some(v) = text(name)? {
                    out.push((*flag).to_owned());
                    out.push(v);
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
    if spec.name == "merge" && !out.iter().any(|a| a == "--into") {
        return Err("missing argument \"into\"".into());
    }
    if !paths.is_empty() {
        out.push("--".into());
        out.extend(paths);
    }
    Ok(out)
}

fn arg_name(arg: &Arg) -> &'static str {
    match arg {
        Arg::Positional(n, _) | Arg::Option(n, _) | Arg::Switch(n, _) | Arg::Paths(n) => n,
    }
}

#[derive(Clone)]
struct Server {
    /// `--store` given to `cairn mcp`, passed on to every command.
    store: Option<Utf8PathBuf>,
    cwd: Utf8PathBuf,
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("cairn", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "cairn: content-addressed snapshots of worktrees. Snapshot after every change; \
                 pass snapshot ids between agents; undo, rewind or roll back any change; merge \
                 the result into the user's git repository.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = TOOLS
            .iter()
            .map(|t| Tool::new(t.name, t.description, schema(t)))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(spec) = TOOLS.iter().find(|t| t.name == request.name.as_ref()) else {
            return Err(ErrorData::invalid_params(
                format!("no such tool: {}", request.name),
                None,
            ));
        };
        let args = request.arguments.unwrap_or_default();
        let mut line = match argv(spec, &args) {
            Ok(line) => line,
            Err(e) => {
                let text = format!("invalid arguments for {}: {e}", spec.name);
                return Ok(CallToolResult::error(vec![ContentBlock::text(text)]).into());
            }
        };
        if let Some(store) = &self.store {
            line.splice(0..0, ["--store".to_owned(), store.to_string()]);
        }
        let cwd = self.cwd.clone();
        let out = tokio::task::spawn_blocking(move || crate::dispatch(&line, cwd))
            .await
            .map_err(|e| {
                ErrorData::internal_error(format!("the command failed to run: {e}"), None)
            })?;
        let text = String::from_utf8_lossy(&out.stdout).trim_end().to_owned();
        let result = if out.code == 0 {
            CallToolResult::success(vec![ContentBlock::text(text)])
        } else {
            CallToolResult::error(vec![ContentBlock::text(text)])
        };
        Ok(result.into())
    }
}

/// `cairn mcp`: serves until the client closes stdin.
pub fn run(store: Option<Utf8PathBuf>) -> Result<Report, CliError> {
    let cwd = crate::context::current_dir()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::store("io", format!("starting the MCP server: {e}")))?;
    runtime.block_on(async {
        let server = Server { store, cwd };
        let service = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| CliError::store("mcp", format!("MCP handshake on stdio: {e}")))?;
        service
            .waiting()
            .await
            .map_err(|e| CliError::store("mcp", format!("MCP server: {e}")))?;
        Ok::<(), CliError>(())
    })?;
    Ok(Report::new(json!({}), String::new()))
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
        let Value::Object(none) = json!({}) else {
            panic!()
        };
        assert_eq!(
            argv(spec("undo"), &none).expect("valid"),
            ["--json", "undo"]
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
