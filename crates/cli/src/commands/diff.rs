//! `cairn diff`, `cairn status`, and the stats `cairn log --stat` prints.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::os::unix::ffi::OsStrExt;

use camino::{Utf8Path, Utf8PathBuf};
use cas::{EntryKind, Reader, Store, Tree, TreeId};
use diff::text::{LineDiff, Palette};
use diff::{FileDiff, FileEntry, Status};
use fs_manager::CaptureOptions;

use crate::context::{Ctx, absolute, current_dir};
use crate::error::CliError;
use crate::output::{Report, json_path, quote_path};

/// One side of a comparison: a stored snapshot, or a worktree's live files.
pub struct Side {
    pub tree: TreeId,
    /// Trees of a live state that the store does not hold.
    pub memory: HashMap<TreeId, Tree>,
    /// For a live side, where its files are.
    pub root: Option<Utf8PathBuf>,
}

/// What to print.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Patch,
    Stat,
    NameStatus,
}

/// Resolves `spec`: an existing directory is a worktree's live files; anything else a
/// snapshot (ref name or id prefix).
pub fn side(ctx: &Ctx, store: &Store, reader: &Reader, spec: &str) -> Result<Side, CliError> {
    let path = absolute(&current_dir()?, Utf8Path::new(spec));
    if path.is_dir() {
        let live = ctx
            .worktrees()
            .live_state(store, &path, &CaptureOptions::default())?;
        return Ok(Side {
            tree: live.tree,
            memory: live.trees,
            root: Some(live.root),
        });
    }
    let id = crate::context::resolve_snapshot(reader, spec)?;
    Ok(Side {
        tree: reader.snapshot(id)?.tree,
        memory: HashMap::new(),
        root: None,
    })
}

fn mode(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::File => "100644",
        EntryKind::Executable => "100755",
        EntryKind::Symlink => "120000",
        EntryKind::Tree => "040000",
    }
}

fn kind_name(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::File | EntryKind::Executable => "file",
        EntryKind::Symlink => "symlink",
        EntryKind::Tree => "directory",
    }
}

/// A file's bytes: from the store when it has them (verified), else from the live worktree.
fn content(
    reader: &Reader,
    side: &Side,
    path: &[u8],
    entry: &FileEntry,
) -> Result<Vec<u8>, CliError> {
    if reader.has_blob(entry.id.as_blob())? {
        return Ok(reader.blob(entry.id.as_blob())?);
    }
    let Some(root) = &side.root else {
        return Err(CliError::store(
            "corrupt",
            format!("blob {} is missing from the store", entry.id),
        ));
    };
    let full = root.as_std_path().join(std::ffi::OsStr::from_bytes(path));
    let io = |e: std::io::Error| CliError::store("io", format!("{}: {e}", full.display()));
    if entry.kind == EntryKind::Symlink {
        Ok(std::fs::read_link(&full)
            .map_err(io)?
            .as_os_str()
            .as_bytes()
            .to_vec())
    } else {
        std::fs::read(&full).map_err(io)
    }
}

/// A classified change with its line counts (or sizes, for binary files).
pub struct Counted {
    pub diff: FileDiff,
    pub insertions: u64,
    pub deletions: u64,
    pub binary: bool,
    old_bytes: Vec<u8>,
    new_bytes: Vec<u8>,
}

/// How much of each changed file `compare` reads.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Paths and entries only (`--name-status`).
    Names,
    /// Line counts too.
    Counts,
    /// Counts, and the bytes kept for a patch.
    Bytes,
}

/// Everything that differs between two sides, filtered by `paths` (tree paths; a
/// directory names everything below it), read as deep as `depth` says.
pub fn compare(
    reader: &Reader,
    a: &Side,
    b: &Side,
    paths: &[Vec<u8>],
    depth: Depth,
) -> Result<Vec<Counted>, CliError> {
    let mut memory = a.memory.clone();
    memory.extend(b.memory.iter().map(|(k, v)| (*k, v.clone())));
    let trees = diff::Overlay {
        memory: &memory,
        store: reader,
    };
    let changes = diff::tree_changes(&trees, Some(a.tree), Some(b.tree))?;
    let under = |p: &[u8]| paths.is_empty() || paths.iter().any(|f| diff::path_is_under(p, f));
    let mut out = Vec::new();
    for d in diff::classify(changes) {
        let hit =
            d.old_path.as_deref().is_some_and(under) || d.new_path.as_deref().is_some_and(under);
        if !hit {
            continue;
        }
        if depth == Depth::Names {
            let none = Vec::new;
            out.push(Counted {
                diff: d,
                insertions: 0,
                deletions: 0,
                binary: false,
                old_bytes: none(),
                new_bytes: none(),
            });
            continue;
        }
        let old_bytes = match (&d.old, &d.old_path) {
            (Some(e), Some(p)) => content(reader, a, p, e)?,
            _ => Vec::new(),
        };
        let new_bytes = match (&d.new, &d.new_path) {
            (Some(e), Some(p)) => content(reader, b, p, e)?,
            _ => Vec::new(),
        };
        let binary = diff::text::is_binary(&old_bytes) || diff::text::is_binary(&new_bytes);
        let (insertions, deletions) = if binary || d.status == Status::Renamed {
            (0, 0)
        } else {
            let ld = LineDiff::new(&old_bytes, &new_bytes);
            (ld.insertions(), ld.deletions())
        };
        let (old_bytes, new_bytes) = if depth == Depth::Bytes {
            (old_bytes, new_bytes)
        } else {
            (Vec::new(), Vec::new())
        };
        out.push(Counted {
            diff: d,
            insertions,
            deletions,
            binary,
            old_bytes,
            new_bytes,
        });
    }
    Ok(out)
}

/// Display name of a change for `--stat` and summaries.
fn display_name(d: &FileDiff) -> String {
    match (&d.old_path, &d.new_path) {
        (Some(a), Some(b)) if a != b => diff::stat::rename_name(&quote_path(a), &quote_path(b)),
        _ => quote_path(d.path()),
    }
}

/// `--stat` rows and summary.
pub fn stat_text(changes: &[Counted]) -> String {
    let rows: Vec<diff::stat::StatRow> = changes
        .iter()
        .map(|c| diff::stat::StatRow {
            name: display_name(&c.diff),
            insertions: c.insertions,
            deletions: c.deletions,
            binary: c.binary.then(|| {
                (
                    c.diff.old.map_or(0, |e| e.size),
                    c.diff.new.map_or(0, |e| e.size),
                )
            }),
        })
        .collect();
    diff::stat::render(&rows, 80)
}

fn name_status(changes: &[Counted]) -> String {
    let mut out = String::new();
    for c in changes {
        let d = &c.diff;
        match d.status {
            Status::Renamed => out.push_str(&format!(
                "R100\t{}\t{}\n",
                quote_path(d.old_path.as_deref().unwrap_or_default()),
                quote_path(d.new_path.as_deref().unwrap_or_default())
            )),
            s => out.push_str(&format!("{}\t{}\n", s.letter(), quote_path(d.path()))),
        }
    }
    out
}

pub fn patch(changes: &[Counted], context: u32, palette: &Palette) -> Vec<u8> {
    let mut out = Vec::new();
    let (m, r) = (palette.meta, palette.reset);
    for c in changes {
        let d = &c.diff;
        let old_path = d.old_path.as_deref().unwrap_or_else(|| d.path());
        let new_path = d.new_path.as_deref().unwrap_or_else(|| d.path());
        let a = |p: &[u8]| quote_path(&[b"a/".as_slice(), p].concat());
        let b = |p: &[u8]| quote_path(&[b"b/".as_slice(), p].concat());
        let mut head = format!("{m}diff --git {} {}{r}\n", a(old_path), b(new_path));
        let short =
            |e: &Option<FileEntry>| e.map(|e| e.id.short(7)).unwrap_or_else(|| "0000000".into());
        match (d.old, d.new) {
            (None, Some(n)) => head.push_str(&format!(
                "{m}new file mode {}{r}\n{m}index 0000000..{}{r}\n",
                mode(n.kind),
                short(&d.new)
            )),
            (Some(o), None) => head.push_str(&format!(
                "{m}deleted file mode {}{r}\n{m}index {}..0000000{r}\n",
                mode(o.kind),
                short(&d.old)
            )),
            (Some(o), Some(n)) => {
                if d.status == Status::Renamed {
                    head.push_str(&format!(
                        "{m}similarity index 100%{r}\n{m}rename from {}{r}\n{m}rename to {}{r}\n",
                        quote_path(old_path),
                        quote_path(new_path)
                    ));
                }
                if o.kind != n.kind {
                    head.push_str(&format!(
                        "{m}old mode {}{r}\n{m}new mode {}{r}\n",
                        mode(o.kind),
                        mode(n.kind)
                    ));
                }
                if o.id != n.id {
                    let keep = if o.kind == n.kind {
                        format!(" {}", mode(n.kind))
                    } else {
                        String::new()
                    };
                    head.push_str(&format!(
                        "{m}index {}..{}{keep}{r}\n",
                        short(&d.old),
                        short(&d.new)
                    ));
                }
            }
            (None, None) => {}
        }
        out.extend_from_slice(head.as_bytes());
        if d.old.map(|e| e.id) == d.new.map(|e| e.id) {
            continue;
        }
        let from = if d.old.is_some() {
            a(old_path)
        } else {
            "/dev/null".into()
        };
        let to = if d.new.is_some() {
            b(new_path)
        } else {
            "/dev/null".into()
        };
        if c.binary {
            let (os, ns) = (d.old.map_or(0, |e| e.size), d.new.map_or(0, |e| e.size));
            out.extend_from_slice(
                format!("Binary files {from} and {to} differ ({os} -> {ns} bytes)\n").as_bytes(),
            );
            continue;
        }
        out.extend_from_slice(format!("{m}--- {from}{r}\n{m}+++ {to}{r}\n").as_bytes());
        LineDiff::new(&c.old_bytes, &c.new_bytes).write_hunks(context, palette, &mut out);
    }
    out
}

fn entry_json(d: &FileDiff, c: &Counted) -> serde_json::Value {
    let side = |e: &Option<FileEntry>| {
        e.map(|e| serde_json::json!({ "blob": e.id, "mode": mode(e.kind), "kind": kind_name(e.kind), "size": e.size }))
    };
    let mut v = serde_json::json!({
        "path": json_path(d.path()),
        "status": d.status.letter(),
        "old": side(&d.old),
        "new": side(&d.new),
        "old_blob": d.old.map(|e| e.id),
        "new_blob": d.new.map(|e| e.id),
        "old_mode": d.old.map(|e| mode(e.kind)),
        "new_mode": d.new.map(|e| mode(e.kind)),
        "kind": d.new.or(d.old).map(|e| kind_name(e.kind)),
        "size": d.new.or(d.old).map(|e| e.size),
        "binary": c.binary,
        "insertions": c.insertions,
        "deletions": c.deletions,
    });
    if d.status == Status::Renamed
        && let Some(obj) = v.as_object_mut()
    {
        obj.insert(
            "from".into(),
            json_path(d.old_path.as_deref().unwrap_or_default()).into(),
        );
        obj.insert(
            "to".into(),
            json_path(d.new_path.as_deref().unwrap_or_default()).into(),
        );
    }
    v
}

/// The SPEC's diff object: `added`, `removed`, `modified`, `renamed`, `stats`.
pub fn json(changes: &[Counted]) -> serde_json::Value {
    let mut groups: [Vec<serde_json::Value>; 4] = Default::default();
    for c in changes {
        let i = match c.diff.status {
            Status::Added => 0,
            Status::Deleted => 1,
            Status::Modified | Status::TypeChanged => 2,
            Status::Renamed => 3,
        };
        groups[i].push(entry_json(&c.diff, c));
    }
    let [added, removed, modified, renamed] = groups;
    let (ins, del) = totals(changes);
    serde_json::json!({
        "added": added,
        "removed": removed,
        "modified": modified,
        "renamed": renamed,
        "stats": { "files": changes.len(), "insertions": ins, "deletions": del },
    })
}

fn totals(changes: &[Counted]) -> (u64, u64) {
    changes
        .iter()
        .fold((0, 0), |(i, d), c| (i + c.insertions, d + c.deletions))
}

pub fn colour() -> bool {
    if crate::context::serving_request() {
        return crate::context::request_color();
    }
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Options of `cairn diff`.
pub struct DiffArgs<'a> {
    pub a: &'a str,
    pub b: &'a str,
    pub format: Format,
    pub context: u32,
    pub exit_code: bool,
    pub paths: &'a [std::ffi::OsString],
}

fn unmatched(paths: &[Vec<u8>], changes: &[Counted]) -> Vec<String> {
    paths
        .iter()
        .filter(|f| {
            !changes.iter().any(|c| {
                [c.diff.old_path.as_deref(), c.diff.new_path.as_deref()]
                    .into_iter()
                    .flatten()
                    .any(|p| diff::path_is_under(p, f))
            })
        })
        .map(|f| quote_path(f))
        .collect()
}

/// `cairn diff A B [--stat|--name-status] [-U N] [--exit-code] [-- PATH…]`.
pub fn run(ctx: &Ctx, args: &DiffArgs<'_>) -> Result<Report, CliError> {
    let store = ctx.open_read_only()?;
    let reader = store.reader()?;
    let a = side(ctx, &store, &reader, args.a)?;
    let b = side(ctx, &store, &reader, args.b)?;
    let root = a.root.as_deref().or(b.root.as_deref());
    let paths = crate::context::tree_paths(root, args.paths)?;
    let changes = compare(
        &reader,
        &a,
        &b,
        &paths,
        match args.format {
            _ if ctx.json => Depth::Counts,
            Format::NameStatus => Depth::Names,
            Format::Stat => Depth::Counts,
            Format::Patch => Depth::Bytes,
        },
    )?;
    let human = match args.format {
        Format::NameStatus => name_status(&changes).into_bytes(),
        Format::Stat => stat_text(&changes).into_bytes(),
        Format::Patch => patch(
            &changes,
            args.context,
            if colour() {
                &Palette::COLOR
            } else {
                &Palette::PLAIN
            },
        ),
    };
    let mut report = Report::new(json(&changes), String::from_utf8_lossy(&human).into_owned());
    let missing = unmatched(&paths, &changes);
    if !missing.is_empty() {
        let note = format!("no changes under {}", missing.join(", "));
        eprintln!("cairn: {note}");
        if let Some(obj) = report.json.as_object_mut() {
            obj.insert("message".into(), note.into());
        }
    }
    if args.exit_code && !changes.is_empty() {
        let n = changes.len();
        report = report.refused(format!("{n} file{} differ", if n == 1 { "" } else { "s" }));
    }
    Ok(report.with_bytes(human))
}

/// `cairn status [WORKTREE] [--short]`: changes since the head snapshot.
pub fn status(ctx: &Ctx, worktree: Option<&Utf8Path>, short: bool) -> Result<Report, CliError> {
    let store = ctx.open_read_only()?;
    let path = match worktree {
        Some(p) => absolute(&current_dir()?, p),
        None => current_dir()?,
    };
    let live = ctx
        .worktrees()
        .live_state(&store, &path, &CaptureOptions::default())?;
    let reader = store.reader()?;
    let base = match live.head {
        Some(h) => Side {
            tree: reader.snapshot(h)?.tree,
            memory: HashMap::new(),
            root: None,
        },
        None => Side {
            tree: Tree::default().id(),
            memory: [(Tree::default().id(), Tree::default())].into(),
            root: None,
        },
    };
    let now = Side {
        tree: live.tree,
        memory: live.trees,
        root: Some(live.root.clone()),
    };
    let changes = compare(&reader, &base, &now, &[], Depth::Counts)?;
    let n = changes.len();
    let human = if short {
        format!(
            "[checkpoint: {n} file{} changed]\n",
            if n == 1 { "" } else { "s" }
        )
    } else if n == 0 {
        match live.head {
            Some(h) => format!("No changes since snapshot {}\n", h.short(12)),
            None => "No snapshot yet; nothing in scope\n".to_owned(),
        }
    } else {
        summary(&changes)
    };
    let mut json = json(&changes);
    if let Some(obj) = json.as_object_mut() {
        obj.insert("worktree".into(), live.root.as_str().into());
        obj.insert(
            "head".into(),
            serde_json::to_value(live.head).unwrap_or_default(),
        );
        obj.insert(
            "skipped".into(),
            crate::commands::worktrees::skipped_json(&live.skipped),
        );
    }
    Ok(Report::new(json, human))
}

/// `Modified: a, b · Created: c · Deleted: d` and `+142 -38 across 6 files`.
pub fn summary(changes: &[Counted]) -> String {
    let mut groups: Vec<(&str, Vec<String>)> = vec![
        ("Modified", vec![]),
        ("Created", vec![]),
        ("Deleted", vec![]),
        ("Renamed", vec![]),
    ];
    for c in changes {
        let i = match c.diff.status {
            Status::Modified | Status::TypeChanged => 0,
            Status::Added => 1,
            Status::Deleted => 2,
            Status::Renamed => 3,
        };
        groups[i].1.push(display_name(&c.diff));
    }
    let parts: Vec<String> = groups
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(label, v)| format!("{label}: {}", v.join(", ")))
        .collect();
    let (ins, del) = totals(changes);
    let n = changes.len();
    format!(
        "{}\n+{ins} -{del} across {n} file{}\n",
        parts.join(" · "),
        if n == 1 { "" } else { "s" }
    )
}
