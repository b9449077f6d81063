use cas::{EntryKind, ObjectId, ObjectKind, Reader, Tree, TreeId};

use crate::context::Ctx;
use crate::error::CliError;
use crate::output::{Report, json_path, quote_path};

/// `cairn show SNAP[:PATH]`: a file's bytes or a tree listing; any object id also works.
pub fn run(ctx: &Ctx, object: &str) -> Result<Report, CliError> {
    let (spec, path) = match object.split_once(':') {
        Some((s, p)) => (s, Some(p)),
        None => (object, None),
    };
    let store = ctx.open_read_only()?;
    let reader = store.reader()?;
    // A checkpoint name of the current worktree comes first, as everywhere.
    let checkpoint = match crate::context::current_dir() {
        Ok(cwd) => fs_manager::find_worktree(&reader, &cwd)?
            .and_then(|r| r.checkpoint(spec).map(|c| c.snapshot)),
        Err(_) => None,
    };
    let (kind, id) = match checkpoint {
        Some(s) => (ObjectKind::Snapshot, s.into()),
        None => reader.resolve_object(spec)?,
    };
    let tree = match kind {
        ObjectKind::Snapshot => reader.snapshot(id.as_snapshot())?.tree,
        ObjectKind::Tree => id.as_tree(),
        ObjectKind::Blob => {
            if path.is_some_and(|p| !p.is_empty()) {
                return Err(CliError::usage(
                    "invalid_path",
                    format!("{spec} is a blob, not a tree"),
                ));
            }
            return show_blob(ctx, &reader, id, "");
        }
    };
    let path = path.unwrap_or("").trim_matches('/');
    let mut current = tree;
    let mut walked = String::new();
    let components: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    for (i, name) in components.iter().enumerate() {
        let listing = reader.tree(current)?;
        let Some(entry) = listing.get(name.as_bytes()) else {
            return Err(CliError::usage(
                "invalid_path",
                format!("{spec}:{path}: no such path"),
            ));
        };
        if !walked.is_empty() {
            walked.push('/');
        }
        walked.push_str(name);
        match entry.tree() {
            Some(t) => current = t,
            None if i + 1 == components.len() => return show_blob(ctx, &reader, entry.id, &walked),
            None => {
                return Err(CliError::usage(
                    "invalid_path",
                    format!("{spec}:{walked}: not a directory"),
                ));
            }
        }
    }
    Ok(listing(&reader.tree(current)?, current, &walked))
}

fn show_blob(ctx: &Ctx, reader: &Reader, id: ObjectId, path: &str) -> Result<Report, CliError> {
    if ctx.json {
        let size = reader.blob_size(id.as_blob())?;
        // Verify before reporting, as every read does.
        reader.blob(id.as_blob())?;
        return Ok(Report::new(
            serde_json::json!({ "blob": id, "path": path, "size": size }),
            "",
        ));
    }
    // Verified in full before a byte is printed.
    let bytes = reader.blob(id.as_blob())?;
    Ok(Report::new(serde_json::Value::Null, "").with_bytes(bytes))
}

fn kind_name(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::File => "file",
        EntryKind::Executable => "exec",
        EntryKind::Symlink => "link",
        EntryKind::Tree => "tree",
    }
}

fn listing(tree: &Tree, id: TreeId, path: &str) -> Report {
    let mut human = String::new();
    let mut entries = Vec::new();
    for e in tree.entries() {
        human.push_str(&format!(
            "{} {} {:>10}\t{}\n",
            kind_name(e.kind),
            e.id,
            e.size,
            quote_path(&e.name)
        ));
        entries.push(serde_json::json!({
            "name": json_path(&e.name),
            "kind": e.kind,
            "id": e.id,
            "size": e.size,
        }));
    }
    Report::new(
        serde_json::json!({ "tree": id, "path": path, "entries": entries }),
        human,
    )
}
