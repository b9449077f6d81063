//! Reversible work: `checkpoint`, `rewind`, `undo`, `redo`, `op log`, `review`, `accept`,
//! `discard`, `recover`.

use std::collections::HashMap;
use std::io::{BufRead, IsTerminal, Write};

use camino::{Utf8Path, Utf8PathBuf};
use cas::{Reader, SnapshotId, WorktreeRecord};
use clap::Subcommand;
use fs_manager::{CaptureOptions, CheckpointOptions, RollbackOptions};

use crate::commands::diff::{self as diffcmd, Depth, Side};
use crate::commands::worktrees::{path_arg, rollback_report, skipped_json};
use crate::context::{Ctx, current_dir, resolve_in};
use crate::error::CliError;
use crate::output::{Report, json_path, quote_path};
use crate::progress::Bar;

fn dir_arg(dir: Option<&Utf8Path>) -> Result<Utf8PathBuf, CliError> {
    match dir {
        Some(d) => path_arg(d),
        None => current_dir(),
    }
}

fn registered(reader: &Reader, dir: &Utf8Path) -> Result<WorktreeRecord, CliError> {
    fs_manager::find_worktree(reader, dir)?.ok_or_else(|| {
        CliError::usage(
            "not_a_worktree",
            format!("{dir} is not a registered worktree"),
        )
    })
}

fn paths_json(paths: &[Vec<u8>]) -> Vec<String> {
    paths.iter().map(|p| json_path(p)).collect()
}

/// `cairn checkpoint [DIR] [--name NAME]`.
pub fn checkpoint(
    ctx: &Ctx,
    dir: Option<&Utf8Path>,
    name: Option<&str>,
    message: Option<&str>,
    max_file_size: Option<u64>,
) -> Result<Report, CliError> {
    let dir = dir_arg(dir)?;
    let store = ctx.open_or_create()?;
    let bar = Bar::new();
    let message = message.map(str::to_owned).unwrap_or_else(|| {
        format!(
            "checkpoint{}",
            name.map(|n| format!(" {n}")).unwrap_or_default()
        )
    });
    let options = CheckpointOptions {
        name,
        capture: CaptureOptions {
            message: &message,
            progress: &bar,
            ..CaptureOptions::default()
        },
        max_file_size,
        git: Some(&merge_back::git_source),
    };
    let out = ctx.worktrees().checkpoint(&store, &dir, &options)?;
    let s = &out.snapshot;
    let json = serde_json::json!({
        "worktree": s.root,
        "snapshot": s.snapshot,
        "tree": s.tree,
        "parent": s.parent,
        "changed": s.changed,
        "added": s.added,
        "modified": s.modified,
        "removed": s.removed,
        "skipped": skipped_json(&s.skipped),
        "name": out.name,
        "onboarded": out.onboarded,
        "task_started": out.task_started,
    });
    let mut human: String = s
        .skipped
        .iter()
        .map(|k| format!("skipped {}: {}\n", quote_path(&k.path), k.reason))
        .collect();
    if out.onboarded {
        human.push_str(&format!("onboarded {} in place\n", s.root));
    }
    let label = out
        .name
        .as_deref()
        .map(|n| format!(" {n}"))
        .unwrap_or_default();
    human.push_str(&format!(
        "checkpoint{label} {} ({} added, {} modified, {} removed{})\n",
        s.snapshot,
        s.added,
        s.modified,
        s.removed,
        if out.task_started {
            "; task started"
        } else {
            ""
        }
    ));
    Ok(Report::new(json, human))
}

/// `cairn rewind [DIR] [--to SNAP] [--dry-run]`.
pub fn rewind(
    ctx: &Ctx,
    dir: Option<&Utf8Path>,
    to: Option<&str>,
    dry_run: bool,
) -> Result<Report, CliError> {
    let dir = dir_arg(dir)?;
    let store = ctx.open_existing()?;
    let target = {
        let reader = store.reader()?;
        let record = registered(&reader, &dir)?;
        to.map(|spec| resolve_in(&reader, &record, spec))
            .transpose()?
    };
    let bar = Bar::new();
    let options = RollbackOptions {
        dry_run,
        progress: &bar,
        ..RollbackOptions::default()
    };
    let out = ctx.worktrees().rewind(&store, &dir, target, &options)?;
    Ok(rollback_report(&out, dry_run, "rewind"))
}

/// `cairn undo [DIR]` / `cairn redo [DIR]`.
pub fn undo(ctx: &Ctx, dir: Option<&Utf8Path>, redo: bool) -> Result<Report, CliError> {
    let dir = dir_arg(dir)?;
    let store = ctx.open_existing()?;
    let field = if redo { "reapplied" } else { "reverted" };
    let result = if redo {
        ctx.worktrees().redo(&store, &dir)
    } else {
        ctx.worktrees().undo(&store, &dir)
    };
    let out = match result {
        Ok(out) => out,
        Err(
            e @ (fs_manager::UndoError::NothingToUndo { .. }
            | fs_manager::UndoError::NothingToRedo { .. }),
        ) => {
            let json = serde_json::json!({ field: [], "refused": [] });
            return Ok(Report::new(json, String::new()).refused_verbatim(e.to_string()));
        }
        Err(e) => return Err(e.into()),
    };
    let refused: Vec<_> = out
        .refused
        .iter()
        .map(|r| serde_json::json!({ "path": json_path(&r.path), "reason": r.reason }))
        .collect();
    let json = serde_json::json!({
        "worktree": out.root,
        field: paths_json(&out.paths),
        "refused": refused,
        "op": out.change,
        "snapshot": out.snapshot,
    });
    let verb = if redo { "redo" } else { "undo" };
    if !out.refused.is_empty() {
        let human: String = out
            .refused
            .iter()
            .map(|r| format!("refused {}: {}\n", quote_path(&r.path), r.reason))
            .collect();
        let n = out.refused.len();
        let message = format!(
            "{verb} of op {} refused: {n} file{} changed since; nothing was changed in {}",
            out.change,
            if n == 1 { "" } else { "s" },
            out.root
        );
        return Ok(Report::new(json, human).refused(message));
    }
    let mut human: String = out
        .paths
        .iter()
        .map(|p| format!("{field} {}\n", quote_path(p)))
        .collect();
    human.push_str(&format!(
        "{verb} of op {}: {} file{}\n",
        out.change,
        out.paths.len(),
        if out.paths.len() == 1 { "" } else { "s" }
    ));
    Ok(Report::new(json, human))
}

#[derive(Subcommand, Debug)]
pub enum OpAction {
    /// The worktree's operation log, newest first.
    Log {
        /// The worktree (default: the one holding the current directory).
        dir: Option<Utf8PathBuf>,
    },
}

/// `cairn op log [DIR]`.
pub fn op(ctx: &Ctx, action: OpAction) -> Result<Report, CliError> {
    let OpAction::Log { dir } = action;
    let dir = dir_arg(dir.as_deref())?;
    let store = ctx.open_read_only()?;
    let reader = store.reader()?;
    let record = registered(&reader, &dir)?;
    let ops = reader.ops(&record.root)?;
    let stacks = fs_manager::undo_stacks(&ops);
    let mut human = String::new();
    let mut items = Vec::new();
    for op in ops.iter().rev() {
        let state = if stacks.redo.contains(&op.seq) {
            "undone"
        } else if stacks.undo.contains(&op.seq) {
            "undoable"
        } else {
            ""
        };
        let short = |s: Option<SnapshotId>| s.map(|s| s.short(12)).unwrap_or_else(|| "-".into());
        let target = op
            .undoes
            .map(|s| format!(" (of op {s})"))
            .or(op.redoes.map(|s| format!(" (of op {s})")))
            .unwrap_or_default();
        human.push_str(&format!(
            "{:>4}  {}  {:<10} {} -> {}{target}{}\n",
            op.seq,
            op.time.strftime("%Y-%m-%d %H:%M:%S"),
            op.op,
            short(op.before),
            short(op.after),
            if state.is_empty() {
                String::new()
            } else {
                format!("  [{state}]")
            }
        ));
        items.push(serde_json::json!({
            "seq": op.seq,
            "time": op.time,
            "op": op.op,
            "before": op.before,
            "after": op.after,
            "undoes": op.undoes,
            "redoes": op.redoes,
            "undone": stacks.redo.contains(&op.seq),
        }));
    }
    Ok(Report::new(
        serde_json::json!({ "worktree": record.root, "ops": items }),
        human,
    ))
}

/// `cairn review [DIR]`: the task's changes against its baseline.
pub fn review(ctx: &Ctx, dir: Option<&Utf8Path>) -> Result<Report, CliError> {
    let dir = dir_arg(dir)?;
    let store = ctx.open_read_only()?;
    let record = registered(&store.reader()?, &dir)?;
    let task = record.task.clone().ok_or_else(|| {
        CliError::from(fs_manager::TaskError::NoTask {
            root: record.root.clone(),
        })
    })?;
    let live = ctx
        .worktrees()
        .live_state(&store, &record.root, &CaptureOptions::default())?;
    let reader = store.reader()?;
    let base = Side {
        tree: reader.snapshot(task.baseline)?.tree,
        memory: HashMap::new(),
        root: None,
    };
    let now = Side {
        tree: live.tree,
        memory: live.trees,
        root: Some(live.root.clone()),
    };
    let changes = diffcmd::compare(
        &reader,
        &base,
        &now,
        &[],
        if ctx.json {
            Depth::Counts
        } else {
            Depth::Bytes
        },
    )?;
    let mut json = diffcmd::json(&changes);
    if let Some(obj) = json.as_object_mut() {
        obj.insert("worktree".into(), record.root.as_str().into());
        obj.insert("baseline".into(), task.baseline.to_string().into());
    }
    let mut human = if changes.is_empty() {
        format!(
            "No changes since the task's baseline {}\n",
            task.baseline.short(12)
        )
        .into_bytes()
    } else {
        diffcmd::summary(&changes).into_bytes()
    };
    if !changes.is_empty() {
        human.push(b'\n');
        let palette = if diffcmd::colour() {
            &diff::text::Palette::COLOR
        } else {
            &diff::text::Palette::PLAIN
        };
        human.extend(diffcmd::patch(&changes, 3, palette));
    }
    Ok(Report::new(json, String::from_utf8_lossy(&human).into_owned()).with_bytes(human))
}

/// `cairn accept [DIR] [-- PATH…]`.
pub fn accept(
    ctx: &Ctx,
    dir: Option<&Utf8Path>,
    paths: &[std::ffi::OsString],
) -> Result<Report, CliError> {
    let dir = dir_arg(dir)?;
    let store = ctx.open_existing()?;
    let record = registered(&store.reader()?, &dir)?;
    let paths = crate::context::tree_paths(Some(&record.root), paths)?;
    let out = ctx
        .worktrees()
        .accept(&store, &record.root, &paths, &CaptureOptions::default())?;
    let json = serde_json::json!({
        "worktree": out.root,
        "accepted": paths_json(&out.accepted),
        "baseline": out.baseline,
        "task_ended": out.baseline.is_none(),
    });
    let mut human: String = out
        .accepted
        .iter()
        .map(|p| format!("accepted {}\n", quote_path(p)))
        .collect();
    human.push_str(&match out.baseline {
        None => format!("task ended: {} change(s) kept\n", out.accepted.len()),
        Some(b) => format!(
            "{} path(s) accepted; baseline now {}\n",
            out.accepted.len(),
            b.short(12)
        ),
    });
    Ok(Report::new(json, human))
}

/// `cairn discard [DIR] [--yes] [-- PATH…]`.
pub fn discard(
    ctx: &Ctx,
    dir: Option<&Utf8Path>,
    yes: bool,
    paths: &[std::ffi::OsString],
) -> Result<Report, CliError> {
    let dir = dir_arg(dir)?;
    let store = ctx.open_existing()?;
    let record = registered(&store.reader()?, &dir)?;
    let paths = crate::context::tree_paths(Some(&record.root), paths)?;
    if paths.is_empty() && !yes {
        confirm(&record.root)?;
    }
    let bar = Bar::new();
    let options = RollbackOptions {
        paths: &paths,
        progress: &bar,
        ..RollbackOptions::default()
    };
    let out = ctx.worktrees().discard(&store, &record.root, &options)?;
    let json = serde_json::json!({
        "worktree": out.restored.root,
        "discarded": paths_json(&out.discarded),
        "snapshot": out.restored.snapshot,
        "captured": out.restored.captured,
        "skipped": skipped_json(&out.restored.skipped),
        "task_ended": paths.is_empty(),
    });
    let mut human: String = out
        .discarded
        .iter()
        .map(|p| format!("discarded {}\n", quote_path(p)))
        .collect();
    human.push_str(&format!(
        "{} path(s) back to the baseline{}; `cairn undo` brings them back\n",
        out.discarded.len(),
        if paths.is_empty() { ", task ended" } else { "" }
    ));
    Ok(Report::new(json, human))
}

/// Asks on the terminal before throwing away every change; refuses without one.
pub fn confirm(root: &Utf8Path) -> Result<(), CliError> {
    if crate::context::serving_request() || !std::io::stdin().is_terminal() {
        return Err(CliError::usage(
            "confirmation_needed",
            format!("discarding every change in {root} needs --yes when not run from a terminal"),
        ));
    }
    eprint!("Discard every change of the task in {root}? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| CliError::store("io", format!("reading the answer: {e}")))?;
    if matches!(answer.trim(), "y" | "Y" | "yes") {
        Ok(())
    } else {
        Err(CliError::usage(
            "not_confirmed",
            format!("nothing discarded in {root}"),
        ))
    }
}

/// `cairn recover [DIR]`.
pub fn recover(ctx: &Ctx, dir: Option<&Utf8Path>) -> Result<Report, CliError> {
    let dir = dir_arg(dir)?;
    let store = ctx.open_existing()?;
    // A repository left half way by `merge --checkout` (registered as a worktree or not).
    if let Some(done) =
        merge_back::recover_checkout(&store, &dir).map_err(crate::commands::merge::merge_error)?
    {
        let onboarded = fs_manager::find_worktree(&store.reader()?, &done.workdir)?
            .is_some_and(|r| r.root == done.workdir);
        if onboarded {
            let capture = fs_manager::CaptureOptions {
                message: "merge, finished by recover",
                ..fs_manager::CaptureOptions::default()
            };
            ctx.worktrees()
                .record_change(&store, &done.workdir, "merge", &capture)?;
        }
        let json = serde_json::json!({
            "worktree": done.workdir,
            "recovered": "merge --checkout",
            "paths": done.paths,
            "commit": done.commit,
        });
        let human = format!(
            "finished the interrupted merge --checkout in {} ({} paths); HEAD is at {}\n",
            done.workdir, done.paths, done.commit
        );
        return Ok(Report::new(json, human));
    }
    let out = ctx.worktrees().recover(&store, &dir)?;
    let json = serde_json::json!({
        "worktree": out.root,
        "recovered": out.op,
        "paths": out.paths,
    });
    let human = match &out.op {
        Some(op) => format!(
            "finished the interrupted {op} in {} ({} paths)\n",
            out.root, out.paths
        ),
        None => format!("nothing to recover in {}\n", out.root),
    };
    Ok(Report::new(json, human))
}
