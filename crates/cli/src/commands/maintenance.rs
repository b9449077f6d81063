use cas::{FsckOptions, GcOptions, ObjectKind};

use crate::context::Ctx;
use crate::error::CliError;
use crate::output::Report;

/// `cairn fsck`: exit 1 when anything is wrong, listing every problem.
pub fn fsck(ctx: &Ctx) -> Result<Report, CliError> {
    let store = ctx.open_read_only()?;
    let out = store.fsck(&FsckOptions::default())?;
    let mut human: String = out.problems.iter().map(|p| format!("{p}\n")).collect();
    let summary = format!(
        "checked {} blobs, {} trees, {} snapshots, {} references",
        out.blobs, out.trees, out.snapshots, out.references
    );
    let json = serde_json::json!({
        "problems": out.problems,
        "checked": { "blobs": out.blobs, "trees": out.trees, "snapshots": out.snapshots, "references": out.references },
    });
    if out.problems.is_empty() {
        human.push_str(&format!("{summary}: no problems\n"));
        Ok(Report::new(json, human))
    } else {
        human.push_str(&format!("{summary}\n"));
        let n = out.problems.len();
        let message = format!(
            "fsck found {n} problem{} in store {}",
            if n == 1 { "" } else { "s" },
            store.root()
        );
        Ok(Report::new(json, human).refused(message))
    }
}

/// `cairn gc [--dry-run] [--prune-ops DAYS]`.
pub fn gc(ctx: &Ctx, dry_run: bool, prune_ops_days: Option<u32>) -> Result<Report, CliError> {
    let prune_ops_before = prune_ops_days
        .map(|days| {
            jiff::Timestamp::now()
                .checked_sub(jiff::SignedDuration::from_hours(24 * i64::from(days)))
                .map_err(|_| {
                    CliError::usage(
                        "usage",
                        format!("--prune-ops {days}: that many days ago is before any time cairn can represent"),
                    )
                })
        })
        .transpose()?;
    let mut store = ctx.open_exclusive()?;
    let out = store.gc(&GcOptions {
        dry_run,
        prune_ops_before,
    })?;
    let count = |k: ObjectKind| out.removed.iter().filter(|(kind, _)| *kind == k).count();
    let verb = if dry_run { "would remove" } else { "removed" };
    let mut human = format!(
        "{verb} {} objects ({} snapshots, {} trees, {} blobs), {} bytes\n",
        out.removed.len(),
        count(ObjectKind::Snapshot),
        count(ObjectKind::Tree),
        count(ObjectKind::Blob),
        out.bytes_freed,
    );
    if prune_ops_before.is_some() {
        human.push_str(&format!(
            "{} {} op-log entries\n",
            if dry_run { "would prune" } else { "pruned" },
            out.ops_pruned
        ));
    }
    if !dry_run {
        human.push_str(&format!(
            "store file {} -> {} bytes\n",
            out.file_bytes_before, out.file_bytes_after
        ));
    }
    let removed: Vec<_> = out
        .removed
        .iter()
        .map(|(kind, id)| serde_json::json!({ "kind": kind, "id": id.to_hex() }))
        .collect();
    let json = serde_json::json!({
        "removed": removed,
        "bytes_freed": out.bytes_freed,
        "ops_pruned": out.ops_pruned,
        "dry_run": dry_run,
        "file_bytes_before": out.file_bytes_before,
        "file_bytes_after": out.file_bytes_after,
    });
    Ok(Report::new(json, human))
}
