//! `onboard`, `snapshot`, `checkout`, `rollback`, `worktree list|remove|rebind`.

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};
use clap::Subcommand;
use fs_manager::{CaptureOptions, CheckoutOptions, OnboardOptions, RollbackOptions, Skipped};

use crate::context::{Ctx, absolute, current_dir};
use crate::error::CliError;
use crate::output::{Report, json_path, quote_path};
use crate::progress::Bar;

fn labels(raw: &[String]) -> Result<BTreeMap<String, String>, CliError> {
    let mut out = BTreeMap::new();
    for label in raw {
        let (k, v) =
            cas::parse_label(label).map_err(|e| CliError::usage("invalid_label", e.to_string()))?;
        out.insert(k, v);
    }
    Ok(out)
}

pub fn skipped_json(skipped: &[Skipped]) -> serde_json::Value {
    skipped
        .iter()
        .map(|s| serde_json::json!({ "path": json_path(&s.path), "reason": s.reason }))
        .collect()
}

fn skipped_human(skipped: &[Skipped]) -> String {
    skipped
        .iter()
        .map(|s| format!("skipped {}: {}\n", quote_path(&s.path), s.reason))
        .collect()
}

pub(crate) fn path_arg(p: &Utf8Path) -> Result<Utf8PathBuf, CliError> {
    Ok(absolute(&current_dir()?, p))
}

/// `cairn onboard SRC [-m MSG] [--label K=V]… [--include-denied]`.
pub fn onboard(
    ctx: &Ctx,
    src: &Utf8Path,
    message: Option<&str>,
    raw_labels: &[String],
    include_denied: bool,
    max_file_size: Option<u64>,
) -> Result<Report, CliError> {
    let labels = labels(raw_labels)?;
    let store = ctx.open_or_create()?;
    let bar = Bar::new();
    let message = message.unwrap_or("onboard");
    let options = OnboardOptions {
        capture: CaptureOptions {
            message,
            labels: &labels,
            progress: &bar,
            ..CaptureOptions::default()
        },
        include_denied,
        max_file_size,
        git: Some(&merge_back::git_source),
    };
    let out = ctx.worktrees().onboard(&store, &path_arg(src)?, &options)?;
    let source = out
        .source
        .as_ref()
        .map(|g| serde_json::json!({ "git_commit": g.commit, "dirty": g.dirty }));
    let json = serde_json::json!({
        "worktree": out.root,
        "snapshot": out.snapshot,
        "tree": out.tree,
        "changed": out.changed,
        "files": out.files,
        "bytes": out.bytes,
        "skipped": skipped_json(&out.skipped),
        "source": source,
    });
    let mut human = skipped_human(&out.skipped);
    human.push_str(&format!(
        "onboarded {} ({} files, {} bytes)\nsnapshot {}\n",
        out.root, out.files, out.bytes, out.snapshot
    ));
    Ok(Report::new(json, human))
}

/// `cairn onboard SRC --git REV`: the tree of a commit as a snapshot.
pub fn import(
    ctx: &Ctx,
    src: &Utf8Path,
    rev: &str,
    message: Option<&str>,
    raw_labels: &[String],
    include_denied: bool,
) -> Result<Report, CliError> {
    let labels = labels(raw_labels)?;
    let repo = path_arg(src)?;
    let repo = std::fs::canonicalize(&repo)
        .ok()
        .and_then(|p| Utf8PathBuf::from_path_buf(p).ok())
        .ok_or_else(|| CliError::usage("invalid_path", format!("{repo}: no such directory")))?;
    let store = ctx.open_or_create()?;
    let message = message
        .map(str::to_owned)
        .unwrap_or_else(|| format!("import of {rev}"));
    let deny = if include_denied {
        path_policy::DenyList::nothing()
    } else {
        path_policy::DenyList::load(store.root().as_std_path(), repo.as_std_path())
            .map_err(|e| CliError::usage("invalid_config", e.to_string()))?
    };
    let out = merge_back::import(&store, &repo, rev, &message, &labels, &deny).map_err(|e| {
        let text = e.to_string();
        match e {
            merge_back::ImportError::Store(e) => e.into(),
            merge_back::ImportError::Git { .. } => CliError::store("git", text),
            _ => CliError::usage("invalid_input", text),
        }
    })?;
    let skipped: Vec<_> = out
        .skipped
        .iter()
        .map(|(p, r)| serde_json::json!({ "path": json_path(p), "reason": r }))
        .collect();
    let json = serde_json::json!({
        "snapshot": out.snapshot,
        "tree": out.tree,
        "files": out.files,
        "bytes": out.bytes,
        "skipped": skipped,
        "source": { "git_commit": out.commit, "dirty": false },
    });
    let mut human: String = out
        .skipped
        .iter()
        .map(|(p, r)| format!("skipped {}: {r}\n", quote_path(p)))
        .collect();
    human.push_str(&format!(
        "imported {} of {repo} ({} files, {} bytes)\nsnapshot {}\n",
        out.commit, out.files, out.bytes, out.snapshot
    ));
    Ok(Report::new(json, human))
}

/// `cairn snapshot WORKTREE [-m MSG] [--label K=V]…`.
pub fn snapshot(
    ctx: &Ctx,
    worktree: &Utf8Path,
    message: Option<&str>,
    raw_labels: &[String],
) -> Result<Report, CliError> {
    let labels = labels(raw_labels)?;
    let store = ctx.open_or_create()?;
    let bar = Bar::new();
    let options = CaptureOptions {
        message: message.unwrap_or(""),
        labels: &labels,
        progress: &bar,
        ..CaptureOptions::default()
    };
    let out = ctx
        .worktrees()
        .snapshot(&store, &path_arg(worktree)?, &options)?;
    let json = serde_json::json!({
        "snapshot": out.snapshot,
        "tree": out.tree,
        "parent": out.parent,
        "changed": out.changed,
        "added": out.added,
        "modified": out.modified,
        "removed": out.removed,
        "skipped": skipped_json(&out.skipped),
    });
    let mut human = skipped_human(&out.skipped);
    if out.changed {
        human.push_str(&format!(
            "snapshot {} ({} added, {} modified, {} removed)\n",
            out.snapshot, out.added, out.modified, out.removed
        ));
    } else {
        human.push_str(&format!("unchanged: snapshot {}\n", out.snapshot));
    }
    Ok(Report::new(json, human))
}

/// `cairn checkout SNAP DEST`.
pub fn checkout(ctx: &Ctx, snap: &str, dest: &Utf8Path) -> Result<Report, CliError> {
    let store = ctx.open_existing()?;
    let id = crate::context::resolve_snapshot(&store.reader()?, snap)?;
    let bar = Bar::new();
    let out = ctx.worktrees().checkout(
        &store,
        id,
        &path_arg(dest)?,
        &CheckoutOptions { progress: &bar },
    )?;
    let json = serde_json::json!({
        "worktree": out.worktree,
        "snapshot": out.snapshot,
        "files": out.files,
        "bytes": out.bytes,
    });
    let human = format!(
        "checked out {} into {} ({} files, {} bytes)\n",
        out.snapshot, out.worktree, out.files, out.bytes
    );
    Ok(Report::new(json, human))
}

/// `cairn rollback WORKTREE SNAP [--dry-run] [-- PATH…]`.
pub fn rollback(
    ctx: &Ctx,
    worktree: &Utf8Path,
    snap: &str,
    dry_run: bool,
    paths: &[std::ffi::OsString],
) -> Result<Report, CliError> {
    let store = ctx.open_existing()?;
    let worktree = path_arg(worktree)?;
    let reader = store.reader()?;
    let record = fs_manager::find_worktree(&reader, &worktree)?.ok_or_else(|| {
        CliError::usage(
            "not_a_worktree",
            format!("{worktree} is not a registered worktree"),
        )
    })?;
    let target = crate::context::resolve_in(&reader, &record, snap)?;
    drop(reader);
    let paths = crate::context::tree_paths(Some(&record.root), paths)?;
    let bar = Bar::new();
    let options = RollbackOptions {
        paths: &paths,
        dry_run,
        progress: &bar,
        ..RollbackOptions::default()
    };
    let out = ctx
        .worktrees()
        .rollback(&store, &record.root, target, &options)?;
    Ok(rollback_report(&out, dry_run, "rollback"))
}

/// The report of a `rollback`, `rewind` (or their dry runs).
pub fn rollback_report(out: &fs_manager::RollbackOutcome, dry_run: bool, verb: &str) -> Report {
    let list = |v: &[Vec<u8>]| v.iter().map(|p| json_path(p)).collect::<Vec<_>>();
    let json = serde_json::json!({
        "worktree": out.root,
        "snapshot": out.snapshot,
        "captured": out.captured,
        "written": list(&out.written),
        "deleted": list(&out.deleted),
        "skipped": skipped_json(&out.skipped),
        "dry_run": dry_run,
    });
    let mut human = String::new();
    let would = if dry_run { "would " } else { "" };
    for p in &out.written {
        human.push_str(&format!("{would}write  {}\n", quote_path(p)));
    }
    for p in &out.deleted {
        human.push_str(&format!("{would}delete {}\n", quote_path(p)));
    }
    let done = if verb == "rewind" {
        "rewound"
    } else {
        "rolled back"
    };
    human.push_str(&format!(
        "{} {}: {} written, {} deleted\n",
        if dry_run {
            format!("dry run of {verb} to")
        } else {
            format!("{done} to")
        },
        out.snapshot.short(12),
        out.written.len(),
        out.deleted.len()
    ));
    Report::new(json, human)
}

#[derive(Subcommand, Debug)]
pub enum WorktreeAction {
    /// List registered worktrees.
    List,
    /// Forget a worktree (its files are left as they are).
    Remove {
        /// The worktree's root.
        path: Utf8PathBuf,
    },
    /// Accept that a worktree's root is now another directory (moved, restored, replaced);
    /// every file is read afresh at the next capture.
    Rebind {
        /// The worktree's root.
        path: Utf8PathBuf,
    },
}

pub fn worktree(ctx: &Ctx, action: WorktreeAction) -> Result<Report, CliError> {
    match action {
        WorktreeAction::List => {
            let store = ctx.open_read_only()?;
            let records = fs_manager::list_worktrees(&store)?;
            let mut human = String::new();
            let mut items = Vec::new();
            for r in &records {
                let kind = match r.kind {
                    cas::WorktreeKind::InPlace => "in-place",
                    cas::WorktreeKind::Isolated => "isolated",
                };
                let head = r.head.map(|h| h.short(12)).unwrap_or_else(|| "-".into());
                human.push_str(&format!("{}\t{kind}\t{head}\n", r.root));
                items.push(serde_json::json!({ "path": r.root, "kind": kind, "head": r.head }));
            }
            Ok(Report::new(
                serde_json::json!({ "worktrees": items }),
                human,
            ))
        }
        WorktreeAction::Remove { path } => {
            let store = ctx.open_existing()?;
            let record = ctx.worktrees().remove(&store, &path_arg(&path)?)?;
            let human = format!("removed worktree {} (files left in place)\n", record.root);
            Ok(Report::new(
                serde_json::json!({ "worktrees": [{ "path": record.root, "head": record.head }] }),
                human,
            ))
        }
        WorktreeAction::Rebind { path } => {
            let store = ctx.open_existing()?;
            let record = ctx.worktrees().rebind(&store, &path_arg(&path)?)?;
            let human = format!("worktree {} is the directory there now\n", record.root);
            Ok(Report::new(
                serde_json::json!({ "worktrees": [{ "path": record.root, "head": record.head }] }),
                human,
            ))
        }
    }
}
