//! `cairn merge`: bring a snapshot back into the git repository it came from.

use camino::Utf8Path;
use merge_back::{MergeOptions, MergeSnapshotError};

use crate::commands::worktrees::path_arg;
use crate::context::Ctx;
use crate::error::CliError;
use crate::output::{Report, json_path, quote_path};

/// How a failed merge (or its recovery) exits.
pub(crate) fn merge_error(e: MergeSnapshotError) -> CliError {
    let text = e.to_string();
    match e {
        MergeSnapshotError::Store(e) => e.into(),
        MergeSnapshotError::Export(merge_back::ExportError::Store(e)) => e.into(),
        MergeSnapshotError::Git { .. }
        | MergeSnapshotError::Checkout { .. }
        | MergeSnapshotError::Export(_)
        | MergeSnapshotError::Merge(merge_back::MergeError::Git { .. }) => {
            CliError::store("git", text)
        }
        MergeSnapshotError::Interrupted { .. } => CliError::store("interrupted", text),
        MergeSnapshotError::BranchExists { .. } | MergeSnapshotError::BranchConflict { .. } => {
            CliError::usage("branch_exists", text)
        }
        MergeSnapshotError::InProgress { .. } => CliError::usage("repository_busy", text),
        MergeSnapshotError::NoBase { .. } => CliError::usage("no_base", text),
        MergeSnapshotError::InvalidBranch { .. } => CliError::usage("invalid_name", text),
        _ => CliError::usage("invalid_input", text),
    }
}

/// `cairn merge SNAP --into REPO [--base SNAP] [--branch B] [--checkout] [-m MSG]`.
pub fn merge(
    ctx: &Ctx,
    snap: &str,
    into: &Utf8Path,
    base: Option<&str>,
    branch: Option<&str>,
    checkout: bool,
    message: Option<&str>,
) -> Result<Report, CliError> {
    let repo = path_arg(into)?;
    let repo = std::fs::canonicalize(&repo)
        .ok()
        .and_then(|p| camino::Utf8PathBuf::from_path_buf(p).ok())
        .ok_or_else(|| CliError::usage("invalid_path", format!("{repo}: no such directory")))?;
    let store = ctx.open_existing()?;
    let (snapshot, base) = {
        let reader = store.reader()?;
        let snapshot = crate::context::resolve_snapshot(&reader, snap)?;
        let base = base
            .map(|b| crate::context::resolve_snapshot(&reader, b))
            .transpose()?;
        (snapshot, base)
    };
    // Merging into an onboarded repository's files: capture them first, so edits never
    // snapshotted are kept and `undo` of the merge restores exactly them.
    let registered = checkout
        && fs_manager::find_worktree(&store.reader()?, &repo)?.is_some_and(|r| r.root == repo);
    if registered {
        let capture = fs_manager::CaptureOptions {
            message: "live state before merge",
            ..fs_manager::CaptureOptions::default()
        };
        ctx.worktrees()
            .record_change(&store, &repo, "capture", &capture)?;
    }
    let options = MergeOptions {
        repo: &repo,
        snapshot,
        base,
        branch,
        message,
        checkout,
    };
    let out = merge_back::merge_snapshot(&store, &options).map_err(merge_error)?;
    // The merge changed an onboarded repository's files: record that in its op log.
    let mut recorded = None;
    if registered && out.commit.is_some() {
        {
            let message = format!("merge of {}", snapshot.short(12));
            let capture = fs_manager::CaptureOptions {
                message: &message,
                ..fs_manager::CaptureOptions::default()
            };
            recorded = Some(
                ctx.worktrees()
                    .record_change(&store, &repo, "merge", &capture)?
                    .snapshot,
            );
        }
    }
    let conflicts: Vec<_> = out
        .conflicts
        .iter()
        .map(|c| serde_json::json!({ "path": json_path(&c.path), "kind": c.kind }))
        .collect();
    let (commit, branch) = match &out.commit {
        Some((c, b)) => (Some(c.as_str()), Some(b.as_str())),
        None => (None, None),
    };
    let json = serde_json::json!({
        "merged": out.commit.is_some(),
        "commit": commit,
        "branch": branch,
        "base": out.base,
        "conflicts": conflicts,
        "dirty": out.dirty.iter().map(|p| json_path(p)).collect::<Vec<_>>(),
        "worktree_snapshot": recorded,
    });
    match (commit, branch) {
        (Some(commit), Some(branch)) => Ok(Report::new(
            json,
            format!("merged {snapshot} into {repo}: branch {branch} at {commit}\n"),
        )),
        _ if !out.dirty.is_empty() => {
            let human: String = out
                .dirty
                .iter()
                .map(|p| format!("dirty: {}\n", quote_path(p)))
                .collect();
            let message = format!(
                "{repo}: {} path(s) the merge must change have uncommitted changes; nothing was written",
                out.dirty.len()
            );
            Ok(Report::new(json, human).refused(message))
        }
        _ => {
            let human: String = out
                .conflicts
                .iter()
                .map(|c| {
                    let kind = serde_json::to_value(c.kind)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default();
                    format!("CONFLICT ({kind}): {}\n", quote_path(&c.path))
                })
                .collect();
            let message = format!(
                "{repo}: merging snapshot {snapshot} conflicts in {} path(s); the repository is unchanged",
                out.conflicts.len()
            );
            Ok(Report::new(json, human).refused(message))
        }
    }
}
