//! The verbs of `cairn serve`'s HTTP API (`POST /v1/{verb}`) and of `cairn mcp`'s tools:
//! their arguments as the API documents them (MCP schemas, `docs/openapi.yaml`). The
//! request bodies are untrusted: [`check`] refuses anything that is not one of the verb's
//! arguments with the right type, and a positional value that starts with '-' (the
//! documented contract: it is the same verb as the command line's), and gives the arguments
//! in their typed form (a `null` dropped). How large an argument may be is the engine's to
//! check (`cairn_engine::limits`), for every face alike.

use serde_json::Value;

/// A verb's JSON arguments: an object.
pub type JsonObject = serde_json::Map<String, Value>;

/// A verb's argument, as the command line takes it.
pub enum Arg {
    /// A positional argument (required unless `optional`).
    Positional(&'static str, bool),
    /// `--flag VALUE`.
    Option(&'static str, &'static str),
    /// `--flag` when true.
    Switch(&'static str, &'static str),
    /// `--flag N`: a whole number from 0 to the given largest.
    Number(&'static str, &'static str, u64),
    /// A list of strings: `-- PATH…`, or repeated positionals (`push SNAP…`).
    Paths(&'static str),
}

/// One verb: its name, the command it runs and its arguments.
pub struct ToolSpec {
    /// The verb (`/v1/{name}`, the MCP tool's name).
    pub name: &'static str,
    /// The cairn command it runs.
    pub command: &'static [&'static str],
    /// What it does, for MCP clients.
    pub description: &'static str,
    /// Its arguments, each with its description.
    pub args: &'static [(Arg, &'static str)],
    /// Also an MCP tool.
    pub mcp: bool,
}

/// Every verb.
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
        name: "mount",
        command: &["mount"],
        description: "Mount a snapshot as a copy-on-write worktree, ready at once: files are read from the store when first opened and writes stay in the worktree's own layer; snapshot, status, diff and rollback work on it as on any worktree. Without a snapshot, attaches a registered mount again (its layer keeps every change).",
        args: &[
            (
                Arg::Positional("dir", false),
                "The mount point: a new or empty directory, or a registered mount to attach again.",
            ),
            (
                Arg::Option("snapshot", "SNAP"),
                "Snapshot id prefix, ref or checkpoint name (leave out to attach a registered mount again).",
            ),
            (
                Arg::Switch("read_only", "--read-only"),
                "Refuse every write.",
            ),
        ],
        mcp: true,
    },
    ToolSpec {
        name: "unmount",
        command: &["unmount"],
        description: "Unmount a mounted worktree; its layer stays, so a later mount brings every change back. With materialize: leave an ordinary directory with the worktree's current files instead.",
        args: &[
            (Arg::Positional("dir", false), "The mounted worktree."),
            (
                Arg::Switch("materialize", "--materialize"),
                "Leave an ordinary directory with the current files.",
            ),
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
    ToolSpec {
        name: "push",
        command: &["push"],
        description: "Copy snapshots (with their history) to a remote so other machines can check them out by id, sending only what it lacks; a ref also sets REF@REMOTE if nobody moved it meanwhile.",
        args: &[
            (
                Arg::Paths("snapshots"),
                "Snapshot ids or local refs (none: every local ref).",
            ),
            (
                Arg::Option("remote", "--remote"),
                "The remote (default origin).",
            ),
        ],
        mcp: true,
    },
    ToolSpec {
        name: "pull",
        command: &["pull"],
        description: "Copy snapshots (with their history) from a remote, verifying every object; updates NAME@REMOTE, never a local ref.",
        args: &[
            (
                Arg::Paths("snapshots"),
                "Snapshot ids or refs of the remote (none: every remote ref).",
            ),
            (
                Arg::Option("remote", "--remote"),
                "The remote (default origin).",
            ),
        ],
        mcp: true,
    },
    ToolSpec {
        name: "remote_add",
        command: &["remote", "add"],
        description: "Add a remote (s3://BUCKET[/PREFIX] or file:///PATH), checking it is reachable and whether it enforces conditional writes.",
        args: &[
            (Arg::Positional("name", false), "Its name here."),
            (
                Arg::Positional("url", false),
                "s3://BUCKET[/PREFIX] or file:///PATH.",
            ),
            (
                Arg::Option("endpoint", "--endpoint"),
                "The S3 endpoint (engines other than AWS).",
            ),
            (Arg::Option("region", "--region"), "The S3 region."),
        ],
        mcp: false,
    },
    ToolSpec {
        name: "remote_rm",
        command: &["remote", "rm"],
        description: "Forget a remote (nothing on it changes).",
        args: &[(Arg::Positional("name", false), "Its name.")],
        mcp: false,
    },
    ToolSpec {
        name: "ref_set",
        command: &["ref", "set"],
        description: "Point a ref at a snapshot; NAME@REMOTE sets a ref on a remote, only if it still holds `expect` (or does not exist), so two machines never overwrite each other.",
        args: &[
            (Arg::Positional("name", false), "The ref, or NAME@REMOTE."),
            (Arg::Positional("snapshot", false), "The snapshot."),
            (
                Arg::Option("expect", "--expect"),
                "For NAME@REMOTE: the snapshot it must still hold.",
            ),
        ],
        mcp: true,
    },
    ToolSpec {
        name: "ref_rm",
        command: &["ref", "rm"],
        description: "Remove a ref (NAME@REMOTE: on the remote; ID@REMOTE: unpin a snapshot pushed by id).",
        args: &[
            (
                Arg::Positional("name", false),
                "The ref, NAME@REMOTE or ID@REMOTE.",
            ),
            (
                Arg::Option("expect", "--expect"),
                "For NAME@REMOTE: the snapshot it must still hold.",
            ),
        ],
        mcp: false,
    },
    ToolSpec {
        name: "ref_list",
        command: &["ref", "list"],
        description: "The refs of the store, or of a remote.",
        args: &[(
            Arg::Option("remote", "--remote"),
            "List this remote's refs.",
        )],
        mcp: true,
    },
    ToolSpec {
        name: "gc",
        command: &["gc"],
        description: "Drop what nothing reaches and shrink the store file. keep_within drops op-log entries older than that many days; max_size then drops older history (op-log entries, unnamed checkpoints, snapshot ancestry), oldest first, until the store's database file takes at most that many bytes (mount layers are not counted); refs, worktree heads, named checkpoints, task baselines, each worktree's newest undoable change and what is within keep_within always stay, and `retained` says what they keep. Waits until no other call uses the store.",
        args: &[
            (
                Arg::Switch("dry_run", "--dry-run"),
                "Report what would be removed; change nothing.",
            ),
            (
                Arg::Number("keep_within", "--keep-within", u32::MAX as u64),
                "Days: drop op-log entries older than this; newer ones are never dropped.",
            ),
            (
                Arg::Number("max_size", "--max-size", u64::MAX),
                "Bytes the store's database file may take (mount layers and other files in the store folder are not counted): older history goes, oldest first, until it fits.",
            ),
            (
                Arg::Option("remote", "--remote"),
                "Collect this remote's garbage instead (packs no remote ref or pinned snapshot reaches).",
            ),
            (
                Arg::Number("grace", "--grace", u32::MAX as u64),
                "With remote: hours a pack stays condemned before it is deleted (default 24).",
            ),
        ],
        mcp: true,
    },
    ToolSpec {
        name: "remote_list",
        command: &["remote", "list"],
        description: "The remotes this store knows, and whether refs can be updated on each.",
        args: &[],
        mcp: true,
    },
    ToolSpec {
        name: "policy",
        command: &["policy"],
        description: "A worktree's remembered sandbox grants: the paths `cairn run` of it may write beyond the worktree, and whether it may use the network; `once` holds those for the next run only; `requests` lists the grants asked for that wait for a person. Reading is allowed everywhere.",
        args: &[(
            Arg::Positional("worktree", true),
            "The worktree (default: the caller's directory).",
        )],
        mcp: true,
    },
    ToolSpec {
        name: "policy_allow",
        command: &["policy", "allow"],
        description: "Ask for a grant: writing beneath paths, or the network, for every later `cairn run` of a worktree (or, with once, the next one only). Granting is the user's decision: this records a request (who asked, what, why) that `cairn policy` lists and a person grants or denies on a terminal; an MCP client that supports elicitation asks its user at once. Ask for exactly what a run's `denied` listed, and say why. A path must be absolute, existing and canonical, never the store's folder; /proc, /sys and /dev are never granted; system directories and the user's credentials are granted only when the person names them.",
        args: &[
            (Arg::Positional("worktree", false), "The worktree."),
            (
                Arg::Paths("write"),
                "Absolute, existing, canonical paths to make writable.",
            ),
            (
                Arg::Switch("network", "--network"),
                "Allow TCP bind and connect.",
            ),
            (Arg::Switch("once", "--once"), "For the next run only."),
            (
                Arg::Option("reason", "--reason"),
                "Why the grant is needed, shown to the person who decides (at most 1000 bytes).",
            ),
        ],
        mcp: true,
    },
    ToolSpec {
        name: "policy_revoke",
        command: &["policy", "revoke"],
        description: "Take back grants of a worktree (with once: next-run-only grants), recorded in its op log; one that was not granted is an error.",
        args: &[
            (Arg::Positional("worktree", false), "The worktree."),
            (Arg::Paths("write"), "Writable paths, as granted."),
            (Arg::Switch("network", "--network"), "The network."),
            (Arg::Switch("once", "--once"), "Next-run-only grants."),
        ],
        mcp: true,
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

/// The arguments of a call of `spec`, checked and in their typed form, or why they are
/// wrong. A `null` argument counts as left out.
pub fn check(spec: &ToolSpec, args: &JsonObject) -> Result<JsonObject, String> {
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
    let mut out = JsonObject::new();
    for (arg, _) in spec.args {
        match arg {
            Arg::Positional(name, optional) => match text(name)? {
                // The command line would read it as an option.
                Some(v) if v.starts_with('-') => {
                    return Err(format!("{name} must not start with '-': {v:?}"));
                }
                Some(v) => {
                    out.insert((*name).to_owned(), Value::String(v));
                }
                None if *optional => {}
                None => return Err(format!("missing argument {name:?}")),
            },
            Arg::Option("max_count", _) => {
                if let Some(n) = count(args.get("max_count"))? {
                    out.insert("max_count".to_owned(), Value::from(n));
                }
            }
            Arg::Option(name, _) => {
                if let Some(v) = text(name)? {
                    out.insert((*name).to_owned(), Value::String(v));
                }
            }
            Arg::Number(name, _, max) => {
                if let Some(n) = whole_number(name, args.get(*name), *max)? {
                    out.insert((*name).to_owned(), Value::from(n));
                }
            }
            Arg::Switch(name, _) => match args.get(*name) {
                None | Some(Value::Null) => {}
                Some(Value::Bool(b)) => {
                    out.insert((*name).to_owned(), Value::Bool(*b));
                }
                Some(other) => return Err(format!("{name} must be a boolean, not {other}")),
            },
            Arg::Paths(name) => match args.get(*name) {
                None | Some(Value::Null) => {}
                Some(Value::Array(items)) => {
                    for item in items {
                        if !item.is_string() {
                            return Err(format!("{name} items must be strings, not {item}"));
                        }
                    }
                    out.insert((*name).to_owned(), Value::Array(items.clone()));
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
    Ok(out)
}

/// A whole number from 0 to `max` (given as a JSON number; a whole float counts).
fn whole_number(name: &str, value: Option<&Value>, max: u64) -> Result<Option<u64>, String> {
    let n = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n,
        Some(other) => return Err(format!("{name} must be an integer, not {other}")),
    };
    let whole = n.as_u64().or_else(|| {
        // serde_json reads an integer past u64 (or one written as 5.0) as a float; below
        // 2^64, which is exact.
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(f))
            .map(|f| f as u64)
    });
    match whole {
        Some(w) if w <= max => Ok(Some(w)),
        _ => Err(format!(
            "{name} must be a whole number from 0 to {max}, not {n}"
        )),
    }
}

/// A count of at least 1 (`log`'s `--max-count`), passed on as given: how large it may be
/// is the engine's to check (`cairn_engine::limits::MAX_COUNT`), for every face alike.
fn count(value: Option<&Value>) -> Result<Option<u64>, String> {
    let n = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n,
        Some(other) => return Err(format!("max_count must be an integer, not {other}")),
    };
    match whole_number("max_count", value, u64::MAX) {
        Ok(Some(0)) => Err("max_count must be at least 1, not 0".into()),
        Ok(count) => Ok(count),
        // Past 64 bits: past any limit.
        Err(_) if n.as_f64().is_some_and(|f| f >= 1.0 && f.fract() == 0.0) => {
            Err(format!("max_count is {n}, more than the largest count"))
        }
        Err(_) => Err(format!(
            "max_count must be a whole number of at least 1, not {n}"
        )),
    }
}

/// The JSON name of an argument.
pub fn arg_name(arg: &Arg) -> &'static str {
    match arg {
        Arg::Positional(n, _)
        | Arg::Option(n, _)
        | Arg::Switch(n, _)
        | Arg::Number(n, _, _)
        | Arg::Paths(n) => n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(name: &str) -> &'static ToolSpec {
        TOOLS.iter().find(|t| t.name == name).expect("a verb")
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
            let refused = check(log, &args(bad.clone())).expect_err("refused");
            assert!(refused.contains("max_count"), "{bad}: {refused}");
        }
        for (good, n) in [(json!(3), 3), (json!(5.0), 5)] {
            let checked = check(log, &args(good.clone())).expect("accepted");
            assert_eq!(checked["max_count"], json!(n), "{good}");
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
            let refused = check(gc, &args(key, bad.clone())).expect_err("refused");
            assert!(refused.starts_with(key), "{bad}: {refused}");
        }
        let checked = check(gc, &args("max_size", json!(5e6))).expect("accepted");
        assert_eq!(checked["max_size"], json!(5_000_000));
        let checked = check(gc, &args("keep_within", json!(0))).expect("accepted");
        assert_eq!(checked["keep_within"], json!(0));
    }

    /// A name, message or id is a JSON string; a number there is refused naming the
    /// argument, as the command-line table always did.
    #[test]
    fn numbers_are_not_text() {
        let args: JsonObject = [("to".to_owned(), json!(2096))].into_iter().collect();
        let refused = check(spec("rewind"), &args).expect_err("refused");
        assert_eq!(refused, "to must be a string, not 2096");
    }

    /// Found by the `serve_verb_args` fuzz target: `--branch -` (and `--message -x`) put
    /// the value where a command-line parser reads a flag, so a message or branch starting
    /// with '-' was refused as bad usage, or taken for another flag.
    #[test]
    fn option_values_starting_with_a_dash_stay_values() {
        let crash = br#"{"branch":"-","into":"","snapshot":""}"#;
        let args: JsonObject = serde_json::from_slice(crash).expect("an object");
        let checked = check(spec("merge"), &args).expect("valid arguments");
        assert_eq!(checked["branch"], "-");
        assert_eq!(checked["into"], "");

        let args: JsonObject =
            serde_json::from_str(r#"{"dir": "/w", "to": "--dry-run"}"#).expect("an object");
        let checked = check(spec("rewind"), &args).expect("valid arguments");
        assert_eq!(checked["to"], "--dry-run");
        assert!(checked.get("dry_run").is_none());
    }
}
