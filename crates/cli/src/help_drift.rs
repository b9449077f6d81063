//! The command line's help for an option and the engine's doc comment on the options field
//! it fills (which is also the field's description in the MCP tool schemas and
//! `docs/openapi.yaml`) must not drift apart. Where both faces say the same, they must
//! keep saying the same; where the command line words it for its own syntax (`--remote`,
//! "(repeatable)", BYTES, which directory is the default), the pair is listed in
//! [`WORDED_APART`], so a new option, or an edit making the two agree, shows up here.
//! Pairs are found by the verb's name (`ref_set` is `cairn ref set`, `import` is
//! `cairn onboard --git`) and the field's name; an argument named otherwise on the
//! command line (`undo`'s DIR, `mount`'s SNAP DIR) has no pair.

use clap::CommandFactory;

/// `verb.field` pairs whose two texts are deliberately worded apart.
const WORDED_APART: &[&str] = &[
    "onboard.include_denied",
    "onboard.labels",
    "onboard.max_file_size",
    "onboard.message",
    "import.include_denied",
    "import.labels",
    "import.message",
    "import.src",
    "snapshot.labels",
    "snapshot.worktree",
    "checkout.snapshot",
    "rollback.dry_run",
    "rollback.snapshot",
    "rollback.worktree",
    "merge.base",
    "merge.branch",
    "merge.checkout",
    "merge.message",
    "merge.snapshot",
    "diff.a",
    "diff.b",
    "diff.exit_code",
    "diff.paths",
    "diff.patch",
    "status.worktree",
    "review.dir",
    "log.max_count",
    "log.stat",
    "log.target",
    "show.object",
    "verify.env",
    "ref_set.expect",
    "ref_set.name",
    "ref_set.snapshot",
    "ref_rm.expect",
    "ref_rm.name",
    "ref_list.remote",
    "gc.grace",
    "gc.keep_within",
    "gc.max_size",
    "gc.remote",
    "checkpoint.dir",
    "checkpoint.max_file_size",
    "checkpoint.name",
    "rewind.dir",
    "rewind.dry_run",
    "rewind.to",
    "op_log.dir",
    "accept.dir",
    "accept.paths",
    "discard.dir",
    "discard.paths",
    "discard.yes",
    "recover.dir",
    "remote_add.endpoint",
    "remote_add.name",
    "push.remote",
    "push.snapshots",
    "pull.remote",
    "pull.snapshots",
    "unmount.materialize",
    "policy.worktree",
    "policy_allow.confirm",
    "policy_allow.network",
    "policy_allow.reason",
    "policy_allow.request",
    "policy_allow.write",
    "policy_allow.yes",
    "policy_revoke.network",
    "policy_revoke.once",
    "policy_revoke.request",
    "policy_revoke.write",
    "run.worktree",
    "run.also",
    "run.allow_write",
];

/// A help text as compared: one line, without the closing full stop clap drops.
fn plain(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    joined.trim_end_matches('.').to_owned()
}

/// Every option the command line and the engine both describe: `verb.field`, the
/// engine's text and the command line's.
fn pairs() -> Vec<(String, String, String)> {
    let mut cli = crate::Cli::command();
    cli.build();
    let mut out = Vec::new();
    for verb in cairn_engine::Verb::all() {
        let words: Vec<&str> = match verb.name() {
            "import" => vec!["onboard"],
            name => name.split('_').collect(),
        };
        let Some(command) = words
            .iter()
            .try_fold(&cli, |command, word| command.find_subcommand(word))
        else {
            continue;
        };
        let schema = verb.options_schema();
        let Some(properties) = schema.get("properties").and_then(|p| p.as_object()) else {
            continue;
        };
        for (field, property) in properties {
            let engine = property.get("description").and_then(|d| d.as_str());
            let arg = command
                .get_arguments()
                .find(|a| a.get_id() == field.as_str());
            let help = arg.and_then(|a| a.get_help()).map(|h| h.to_string());
            if let (Some(engine), Some(help)) = (engine, help) {
                out.push((
                    format!("{}.{field}", verb.name()),
                    plain(engine),
                    plain(&help),
                ));
            }
        }
    }
    out
}

#[test]
fn the_command_line_help_says_what_the_engine_says_or_is_listed_as_worded_apart() {
    let pairs = pairs();
    let mut same = 0;
    for (name, engine, help) in &pairs {
        if WORDED_APART.contains(&name.as_str()) {
            assert_ne!(
                engine, help,
                "{name}: both faces say the same now; take it off WORDED_APART"
            );
        } else {
            assert_eq!(
                engine, help,
                "{name}: the command line's help and the engine's doc comment differ; make them one text, or list it in WORDED_APART if the command line must word it apart"
            );
            same += 1;
        }
    }
    for listed in WORDED_APART {
        assert!(
            pairs.iter().any(|(name, _, _)| name == listed),
            "{listed}: no such option on both faces; take it off WORDED_APART"
        );
    }
    // The pairs are found at all (a renamed verb or field would silently drop them).
    assert!(same >= 17, "only {same} texts are shared");
}
