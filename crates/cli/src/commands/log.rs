use camino::Utf8Path;
use cas::{Reader, Snapshot, SnapshotId};

use crate::commands::diff::{Depth, Side, compare, json, stat_text};
use crate::context::{Ctx, absolute, current_dir};
use crate::error::CliError;
use crate::output::Report;

/// `cairn log [WORKTREE|SNAP] [-n N] [--stat]`.
pub fn run(
    ctx: &Ctx,
    target: Option<&str>,
    limit: Option<usize>,
    stat: bool,
) -> Result<Report, CliError> {
    let store = ctx.open_read_only()?;
    let reader = store.reader()?;
    let start = match target {
        Some(t) if absolute(&current_dir()?, Utf8Path::new(t)).is_dir() => {
            worktree_head(&reader, &absolute(&current_dir()?, Utf8Path::new(t)), true)?
        }
        Some(t) => Some(crate::context::resolve_snapshot(&reader, t)?),
        None => worktree_head(&reader, &current_dir()?, false)?,
    };
    let history = match start {
        Some(id) => reader.log(id, limit)?,
        None => Vec::new(),
    };
    let mut human = String::new();
    let mut items = Vec::new();
    for (id, snap) in &history {
        human.push_str(&render(*id, snap));
        let mut item = serde_json::json!({
            "id": id,
            "tree": snap.tree,
            "parents": snap.parents,
            "message": snap.message,
            "labels": snap.labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
            "created": snap.created.to_string(),
            "source": snap.source,
        });
        if stat {
            // Against the first parent; a root snapshot against the empty tree.
            let empty = cas::Tree::default();
            let parent_tree = match snap.parents.first() {
                Some(p) => reader.snapshot(*p)?.tree,
                None => empty.id(),
            };
            let side = |tree| Side {
                tree,
                memory: [(empty.id(), empty.clone())].into(),
                root: None,
            };
            let changes = compare(
                &reader,
                &side(parent_tree),
                &side(snap.tree),
                &[],
                Depth::Counts,
            )?;
            human.push_str(&stat_text(&changes));
            human.push('\n');
            if let Some(obj) = item.as_object_mut() {
                obj.insert("stat".into(), json(&changes));
            }
        }
        items.push(item);
    }
    Ok(Report::new(
        serde_json::json!({ "snapshots": items }),
        human,
    ))
}

/// The head of the worktree at `dir` (exactly, or the registered worktree containing it).
fn worktree_head(
    reader: &Reader,
    dir: &Utf8Path,
    exact: bool,
) -> Result<Option<SnapshotId>, CliError> {
    let worktrees = reader.worktrees()?;
    let found = worktrees
        .iter()
        .filter(|w| {
            if exact {
                w.root == dir
            } else {
                dir.starts_with(&w.root)
            }
        })
        .max_by_key(|w| w.root.as_str().len());
    match found {
        Some(w) => Ok(w.head),
        None if exact => Err(CliError::usage(
            "not_a_worktree",
            format!("{dir} is not a registered worktree"),
        )),
        None => Err(CliError::usage(
            "not_a_worktree",
            format!("{dir} is not inside a registered worktree; name a snapshot or a worktree"),
        )),
    }
}

fn render(id: SnapshotId, snap: &Snapshot) -> String {
    let mut out = format!("snapshot {id}\n");
    for p in &snap.parents {
        out.push_str(&format!("Parent:  {}\n", p.short(12)));
    }
    out.push_str(&format!("Date:    {}\n", snap.created));
    if !snap.labels.is_empty() {
        let labels: Vec<String> = snap
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        out.push_str(&format!("Labels:  {}\n", labels.join(" ")));
    }
    if let Some(src) = &snap.source {
        match &src.git {
            Some(g) => out.push_str(&format!(
                "Source:  {} (git {}{})\n",
                src.path,
                &g.commit[..g.commit.len().min(12)],
                if g.dirty { ", dirty" } else { "" }
            )),
            None => out.push_str(&format!("Source:  {}\n", src.path)),
        }
    }
    out.push('\n');
    for line in snap.message.lines() {
        out.push_str(&format!("    {line}\n"));
    }
    if !snap.message.is_empty() {
        out.push('\n');
    }
    out
}
