//! Human text for each verb's outcome (the JSON is the outcome itself): the same bytes
//! whether the engine ran in this process or in `cairn serve`.

use cairn_engine::{
    AcceptOutcome, CheckoutOutcome, CheckpointOutcome, DiffOutcome, DiscardOutcome, FileChange,
    FsckOutcome, GcOutcome, ImportOutcome, LogEntry, LogOutcome, MergeOutcome, OnboardOutcome,
    OpLogOutcome, Outcome, PolicyOutcome, PullOutcome, PushOutcome, RecoverOutcome, RefsOutcome,
    RemotesOutcome, ReviewOutcome, RollbackOutcome, ShowOutcome, SkippedPath, SnapshotOutcome,
    StatusOutcome, UndoOutcome, WorktreeListOutcome, WorktreesChanged,
};
use diff::text::{LineDiff, Palette};

use crate::output::{Report, quote_path};

/// What to print for a diff.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Format {
    /// A patch.
    #[default]
    Patch,
    /// `--stat`.
    Stat,
    /// `--name-status`.
    NameStatus,
}

/// Display options that are the CLI's alone (the engine computes the same either way).
#[derive(Clone, Copy, Debug, Default)]
pub struct View {
    /// `diff`'s format.
    pub format: Format,
    /// `diff -U N`.
    pub context: u32,
    /// `status --short`.
    pub short: bool,
    /// `gc --keep-within` or `--max-size` was given.
    pub pruning: bool,
    /// `gc --max-size`.
    pub max_size: Option<u64>,
    /// Colour on stdout.
    pub color: bool,
}

/// The report of `outcome`, with exit status `exit` (0, or 1 for a refusal).
pub fn report(outcome: &Outcome, view: &View) -> Report {
    let json = outcome.to_json();
    let mut report = match outcome {
        Outcome::Onboard(o) => Report::new(json, onboard(o)),
        Outcome::Import(o) => Report::new(json, import(o)),
        Outcome::Snapshot(o) => Report::new(json, snapshot(o)),
        Outcome::Checkout(o) => Report::new(json, checkout(o)),
        Outcome::Rollback(o) => Report::new(json, rollback(o, "rollback")),
        Outcome::Rewind(o) => Report::new(json, rollback(o, "rewind")),
        Outcome::Merge(o) => Report::new(json, merge(o)),
        Outcome::WorktreeList(o) => Report::new(json, worktree_list(o)),
        Outcome::Mount(o) => Report::new(
            json,
            format!(
                "mounted {} at {}{}\n",
                o.snapshot
                    .map(|s| s.short(12))
                    .unwrap_or_else(|| "-".into()),
                o.worktree,
                if o.read_only { " (read-only)" } else { "" }
            ),
        ),
        Outcome::Timeline(o) => Report::new(
            json,
            o.entries
                .iter()
                .map(|e| {
                    format!(
                        "{} {}{}\n",
                        e.snapshot.id.short(12),
                        e.checkpoint
                            .as_deref()
                            .map(|n| format!("[{n}] "))
                            .unwrap_or_default(),
                        e.snapshot.message.lines().next().unwrap_or("")
                    )
                })
                .collect::<String>(),
        ),
        Outcome::Unmount(o) => Report::new(
            json,
            if o.materialized {
                format!(
                    "unmounted {}; its files are an ordinary directory now\n",
                    o.worktree
                )
            } else {
                format!("unmounted {}\n", o.worktree)
            },
        ),
        Outcome::WorktreeRemove(o) => Report::new(json, worktree_changed(o, true)),
        Outcome::WorktreeRebind(o) => Report::new(json, worktree_changed(o, false)),
        Outcome::Diff(o) => {
            let human = diff_text(o, view);
            let mut report =
                Report::new(json, String::from_utf8_lossy(&human).into_owned()).with_bytes(human);
            if let (Some(note), false) = (&o.message, o.differ) {
                report.notes.push(note.clone());
            }
            report
        }
        Outcome::Status(o) => Report::new(json, status(o, view)),
        Outcome::Review(o) => {
            let human = review(o, view);
            Report::new(json, String::from_utf8_lossy(&human).into_owned()).with_bytes(human)
        }
        Outcome::Log(o) => Report::new(json, log(o)),
        Outcome::Show(o) => match o {
            ShowOutcome::Blob { contents, .. } => {
                Report::new(json, "").with_bytes(contents.clone().unwrap_or_default())
            }
            ShowOutcome::Tree { entries, .. } => {
                let human = entries
                    .iter()
                    .map(|e| {
                        let kind = match e.kind.as_str() {
                            "executable" => "exec",
                            "symlink" => "link",
                            other => other,
                        };
                        format!(
                            "{kind} {} {:>10}\t{}\n",
                            e.id,
                            e.size,
                            quote_path(e.name.as_bytes())
                        )
                    })
                    .collect::<String>();
                Report::new(json, human)
            }
        },
        Outcome::RefSet(o) => {
            Report::new(json, refs(o, |r| format!("{} -> {}\n", r.name, r.snapshot)))
        }
        Outcome::RefRm(o) => Report::new(
            json,
            refs(o, |r| {
                format!("removed ref {} (was {})\n", r.name, r.snapshot)
            }),
        ),
        Outcome::RefList(o) => {
            Report::new(json, refs(o, |r| format!("{}\t{}\n", r.snapshot, r.name)))
        }
        Outcome::Fsck(o) => Report::new(json, fsck(o)),
        Outcome::Gc(o) => Report::new(json, gc(o, view)),
        Outcome::Checkpoint(o) => Report::new(json, checkpoint(o)),
        Outcome::Undo(o) => undo(json, o, "undo", "reverted"),
        Outcome::Redo(o) => undo(json, o, "redo", "reapplied"),
        Outcome::OpLog(o) => Report::new(json, op_log(o)),
        Outcome::Accept(o) => Report::new(json, accept(o)),
        Outcome::Discard(o) => Report::new(json, discard(o)),
        Outcome::Recover(o) => Report::new(json, recover(o)),
        Outcome::RemoteAdd(o) => Report::new(json, remotes(o, "added ")),
        Outcome::RemoteRm(o) => Report::new(json, remotes(o, "removed ")),
        Outcome::RemoteList(o) => Report::new(json, remotes(o, "")),
        Outcome::Push(o) => Report::new(json, push(o)),
        Outcome::Pull(o) => Report::new(json, pull(o)),
        Outcome::Run(o) => Report::new(json, run(o)).with_exit(o.exit_code),
        Outcome::Policy(o)
        | Outcome::PolicyAllow(o)
        | Outcome::PolicyRevoke(o)
        | Outcome::PolicyRequest(o) => Report::new(json, policy(o)),
    };
    if let Some(message) = outcome.refusal() {
        let verbatim = matches!(
            outcome,
            Outcome::Undo(UndoOutcome::Nothing(_)) | Outcome::Redo(UndoOutcome::Nothing(_))
        );
        report = if verbatim {
            report.refused_verbatim(message)
        } else {
            report.refused(message)
        };
    }
    report
}

/// `run`'s human text: each denied path put back, or where its copy was kept.
fn run(o: &cairn_engine::RunOutcome) -> String {
    let first = o.snapshots.first().map(|s| &s.worktree);
    let mut human = String::new();
    for v in &o.violations {
        let path = crate::output::json_path(v.path.as_bytes());
        let shown = if Some(&v.worktree) == first {
            path
        } else {
            format!("{}/{path}", v.worktree)
        };
        let change = &v.change;
        match &v.kept {
            None => human.push_str(&format!("put back {shown} ({change}; denied path)\n")),
            Some(kept) => human.push_str(&format!(
                "could not put back {shown} ({change}; denied path): something that is not a directory stands in its way; its saved copy is at {kept}\n"
            )),
        }
    }
    human
}

fn skipped_human(skipped: &[SkippedPath]) -> String {
    skipped
        .iter()
        .map(|s| format!("skipped {}: {}\n", quote_path(s.path.as_bytes()), s.reason))
        .collect()
}

fn onboard(o: &OnboardOutcome) -> String {
    let mut human = skipped_human(&o.skipped);
    human.push_str(&format!(
        "onboarded {} ({} files, {} bytes)\nsnapshot {}\n",
        o.worktree, o.files, o.bytes, o.snapshot
    ));
    human
}

fn import(o: &ImportOutcome) -> String {
    let mut human = skipped_human(&o.skipped);
    human.push_str(&format!(
        "imported {} of {} ({} files, {} bytes)\nsnapshot {}\n",
        o.source.git_commit, o.repository, o.files, o.bytes, o.snapshot
    ));
    human
}

fn snapshot(o: &SnapshotOutcome) -> String {
    let mut human = skipped_human(&o.skipped);
    if o.changed {
        human.push_str(&format!(
            "snapshot {} ({} added, {} modified, {} removed)\n",
            o.snapshot, o.added, o.modified, o.removed
        ));
    } else {
        human.push_str(&format!("unchanged: snapshot {}\n", o.snapshot));
    }
    human
}

fn checkout(o: &CheckoutOutcome) -> String {
    format!(
        "checked out {} into {} ({} files, {} bytes)\n",
        o.snapshot, o.worktree, o.files, o.bytes
    )
}

/// The text of a `rollback` or `rewind` (or their dry runs).
fn rollback(o: &RollbackOutcome, verb: &str) -> String {
    let mut human = String::new();
    let would = if o.dry_run { "would " } else { "" };
    for p in &o.written {
        human.push_str(&format!("{would}write  {}\n", quote_path(p.as_bytes())));
    }
    for p in &o.deleted {
        human.push_str(&format!("{would}delete {}\n", quote_path(p.as_bytes())));
    }
    let done = if verb == "rewind" {
        "rewound"
    } else {
        "rolled back"
    };
    human.push_str(&format!(
        "{} {}: {} written, {} deleted\n",
        if o.dry_run {
            format!("dry run of {verb} to")
        } else {
            format!("{done} to")
        },
        o.snapshot.short(12),
        o.written.len(),
        o.deleted.len()
    ));
    human
}

fn merge(o: &MergeOutcome) -> String {
    match (&o.commit, &o.branch) {
        (Some(commit), Some(branch)) => format!(
            "merged {} into {}: branch {branch} at {commit}\n",
            o.snapshot, o.repository
        ),
        _ if !o.dirty.is_empty() => o
            .dirty
            .iter()
            .map(|p| format!("dirty: {}\n", quote_path(p.as_bytes())))
            .collect(),
        _ => o
            .conflicts
            .iter()
            .map(|c| format!("CONFLICT ({}): {}\n", c.kind, quote_path(c.path.as_bytes())))
            .collect(),
    }
}

fn worktree_list(o: &WorktreeListOutcome) -> String {
    o.worktrees
        .iter()
        .map(|w| {
            let head = w.head.map(|h| h.short(12)).unwrap_or_else(|| "-".into());
            let live = match w.live {
                Some(true) => "\tlive",
                Some(false) => "\tnot mounted",
                None => "",
            };
            let read_only = if w.read_only == Some(true) {
                "\tread-only"
            } else {
                ""
            };
            format!("{}\t{}\t{head}{live}{read_only}\n", w.path, w.kind)
        })
        .collect()
}

fn worktree_changed(o: &WorktreesChanged, removed: bool) -> String {
    o.worktrees
        .iter()
        .map(|w| {
            if removed {
                format!("removed worktree {} (files left in place)\n", w.path)
            } else {
                format!("worktree {} is the directory there now\n", w.path)
            }
        })
        .collect()
}

/// Display name of a change for `--stat` and summaries.
fn display_name(c: &FileChange) -> String {
    match (c.old_path(), c.new_path()) {
        (Some(a), Some(b)) if a != b => diff::stat::rename_name(&quote_path(a), &quote_path(b)),
        _ => quote_path(c.path.as_bytes()),
    }
}

/// `--stat` rows and summary.
pub fn stat_text(changes: &[&FileChange]) -> String {
    let rows: Vec<diff::stat::StatRow> = changes
        .iter()
        .map(|c| diff::stat::StatRow {
            name: display_name(c),
            insertions: c.insertions,
            deletions: c.deletions,
            binary: c.binary.then(|| {
                (
                    c.old.as_ref().map_or(0, |e| e.size),
                    c.new.as_ref().map_or(0, |e| e.size),
                )
            }),
        })
        .collect();
    diff::stat::render(&rows, 80)
}

fn name_status(changes: &[&FileChange]) -> String {
    let mut out = String::new();
    for c in changes {
        if c.status == "R100" {
            out.push_str(&format!(
                "R100\t{}\t{}\n",
                quote_path(c.old_path().unwrap_or_default()),
                quote_path(c.new_path().unwrap_or_default())
            ));
        } else {
            out.push_str(&format!(
                "{}\t{}\n",
                c.status,
                quote_path(c.path.as_bytes())
            ));
        }
    }
    out
}

/// A git-style patch of `changes` (their contents must have been read).
pub fn patch(changes: &[&FileChange], context: u32, palette: &Palette) -> Vec<u8> {
    let mut out = Vec::new();
    let (m, r) = (palette.meta, palette.reset);
    for c in changes {
        let old_path = c.old_path().unwrap_or_else(|| c.path.as_bytes());
        let new_path = c.new_path().unwrap_or_else(|| c.path.as_bytes());
        let a = |p: &[u8]| quote_path(&[b"a/".as_slice(), p].concat());
        let b = |p: &[u8]| quote_path(&[b"b/".as_slice(), p].concat());
        let mut head = format!("{m}diff --git {} {}{r}\n", a(old_path), b(new_path));
        let short = |e: &Option<cairn_engine::EntrySide>| {
            e.as_ref()
                .map(|e| e.blob.short(7))
                .unwrap_or_else(|| "0000000".into())
        };
        match (&c.old, &c.new) {
            (None, Some(n)) => head.push_str(&format!(
                "{m}new file mode {}{r}\n{m}index 0000000..{}{r}\n",
                n.mode,
                short(&c.new)
            )),
            (Some(o), None) => head.push_str(&format!(
                "{m}deleted file mode {}{r}\n{m}index {}..0000000{r}\n",
                o.mode,
                short(&c.old)
            )),
            (Some(o), Some(n)) => {
                if c.status == "R100" {
                    head.push_str(&format!(
                        "{m}similarity index 100%{r}\n{m}rename from {}{r}\n{m}rename to {}{r}\n",
                        quote_path(old_path),
                        quote_path(new_path)
                    ));
                }
                if o.mode != n.mode {
                    head.push_str(&format!(
                        "{m}old mode {}{r}\n{m}new mode {}{r}\n",
                        o.mode, n.mode
                    ));
                }
                if o.blob != n.blob {
                    let keep = if o.mode == n.mode {
                        format!(" {}", n.mode)
                    } else {
                        String::new()
                    };
                    head.push_str(&format!(
                        "{m}index {}..{}{keep}{r}\n",
                        short(&c.old),
                        short(&c.new)
                    ));
                }
            }
            (None, None) => {}
        }
        out.extend_from_slice(head.as_bytes());
        if c.old.as_ref().map(|e| e.blob) == c.new.as_ref().map(|e| e.blob) {
            continue;
        }
        let from = if c.old.is_some() {
            a(old_path)
        } else {
            "/dev/null".into()
        };
        let to = if c.new.is_some() {
            b(new_path)
        } else {
            "/dev/null".into()
        };
        if c.binary {
            let (os, ns) = (
                c.old.as_ref().map_or(0, |e| e.size),
                c.new.as_ref().map_or(0, |e| e.size),
            );
            out.extend_from_slice(
                format!("Binary files {from} and {to} differ ({os} -> {ns} bytes)\n").as_bytes(),
            );
            continue;
        }
        out.extend_from_slice(format!("{m}--- {from}{r}\n{m}+++ {to}{r}\n").as_bytes());
        let none = Vec::new();
        LineDiff::new(
            c.old_content.as_ref().unwrap_or(&none),
            c.new_content.as_ref().unwrap_or(&none),
        )
        .write_hunks(context, palette, &mut out);
    }
    out
}

fn palette(view: &View) -> &'static Palette {
    if view.color {
        &Palette::COLOR
    } else {
        &Palette::PLAIN
    }
}

fn diff_text(o: &DiffOutcome, view: &View) -> Vec<u8> {
    let changes = o.changes();
    match view.format {
        Format::NameStatus => name_status(&changes).into_bytes(),
        Format::Stat => stat_text(&changes).into_bytes(),
        Format::Patch => patch(&changes, view.context, palette(view)),
    }
}

/// `Modified: a, b · Created: c · Deleted: d` and `+142 -38 across 6 files`.
fn summary(o: &DiffOutcome) -> String {
    let mut groups: Vec<(&str, Vec<String>)> = vec![
        ("Modified", vec![]),
        ("Created", vec![]),
        ("Deleted", vec![]),
        ("Renamed", vec![]),
    ];
    for c in o.changes() {
        let i = match c.status.as_str() {
            "A" => 1,
            "D" => 2,
            "R100" => 3,
            _ => 0,
        };
        groups[i].1.push(display_name(c));
    }
    let parts: Vec<String> = groups
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(label, v)| format!("{label}: {}", v.join(", ")))
        .collect();
    let n = o.stats.files;
    format!(
        "{}\n+{} -{} across {n} file{}\n",
        parts.join(" · "),
        o.stats.insertions,
        o.stats.deletions,
        if n == 1 { "" } else { "s" }
    )
}

fn status(o: &StatusOutcome, view: &View) -> String {
    let mut human = status_summary(o, view);
    if !view.short {
        human.push_str(&skipped_human(&o.skipped));
    }
    human
}

fn status_summary(o: &StatusOutcome, view: &View) -> String {
    let n = o.changes.stats.files;
    if view.short {
        format!(
            "[checkpoint: {n} file{} changed]\n",
            if n == 1 { "" } else { "s" }
        )
    } else if n == 0 {
        match o.head {
            Some(h) => format!("No changes since snapshot {}\n", h.short(12)),
            None => "No snapshot yet; nothing in scope\n".to_owned(),
        }
    } else {
        summary(&o.changes)
    }
}

fn review(o: &ReviewOutcome, view: &View) -> Vec<u8> {
    if o.changes.is_empty() {
        return format!(
            "No changes since the task's baseline {}\n",
            o.baseline.short(12)
        )
        .into_bytes();
    }
    let mut human = summary(&o.changes).into_bytes();
    human.push(b'\n');
    human.extend(patch(&o.changes.changes(), 3, palette(view)));
    human
}

fn log(o: &LogOutcome) -> String {
    let mut human = String::new();
    for entry in &o.snapshots {
        human.push_str(&log_entry(entry));
        if let Some(stat) = &entry.stat {
            human.push_str(&stat_text(&stat.changes()));
            human.push('\n');
        }
    }
    human
}

fn log_entry(e: &LogEntry) -> String {
    let mut out = format!("snapshot {}\n", e.id);
    for p in &e.parents {
        out.push_str(&format!("Parent:  {}\n", p.short(12)));
    }
    out.push_str(&format!("Date:    {}\n", e.created));
    if !e.labels.is_empty() {
        out.push_str(&format!("Labels:  {}\n", e.labels.join(" ")));
    }
    if let Some(src) = &e.source {
        match &src.git {
            Some(g) => out.push_str(&format!(
                "Source:  {} (git {}{})\n",
                src.path,
                g.commit.get(..g.commit.len().min(12)).unwrap_or(&g.commit),
                if g.dirty { ", dirty" } else { "" }
            )),
            None => out.push_str(&format!("Source:  {}\n", src.path)),
        }
    }
    out.push('\n');
    for line in e.message.lines() {
        out.push_str(&format!("    {line}\n"));
    }
    if !e.message.is_empty() {
        out.push('\n');
    }
    out
}

fn refs(o: &RefsOutcome, line: impl Fn(&cairn_engine::RefEntry) -> String) -> String {
    o.refs.iter().map(line).collect()
}

fn fsck(o: &FsckOutcome) -> String {
    let mut human: String = o.problems.iter().map(|p| format!("{p}\n")).collect();
    let c = &o.checked;
    let summary = format!(
        "checked {} blobs, {} trees, {} snapshots, {} references",
        c.blobs, c.trees, c.snapshots, c.references
    );
    if o.problems.is_empty() {
        human.push_str(&format!("{summary}: no problems\n"));
    } else {
        human.push_str(&format!("{summary}\n"));
    }
    human
}

fn gc(o: &GcOutcome, view: &View) -> String {
    let verb = if o.dry_run { "would remove" } else { "removed" };
    if let Some(r) = &o.remote {
        return format!(
            "{verb} {} packs ({} bytes); {} packs condemned, waiting for the grace period; {} rescued; {} old ref entries dropped; {} objects reachable\n",
            r.packs_removed,
            r.bytes_freed,
            r.packs_condemned,
            r.packs_rescued,
            r.ref_entries_dropped,
            r.reachable
        );
    }
    let count = |k: &str| o.removed.iter().filter(|r| r.kind == k).count();
    let mut human = format!(
        "{verb} {} objects ({} snapshots, {} trees, {} blobs), {} bytes\n",
        o.removed.len(),
        count("snapshot"),
        count("tree"),
        count("blob"),
        o.bytes_freed,
    );
    if view.pruning {
        human.push_str(&format!(
            "{} {} op-log entries, {} unnamed checkpoints\n",
            if o.dry_run { "would prune" } else { "pruned" },
            o.ops_pruned,
            o.checkpoints_pruned
        ));
        for r in &o.retained {
            let mut what = r.reason.clone();
            for part in [&r.name, &r.worktree].into_iter().flatten() {
                what.push(' ');
                what.push_str(part);
            }
            human.push_str(&format!(
                "kept by {what}: {} bytes (snapshot {})\n",
                r.bytes, r.snapshot
            ));
        }
    }
    if !o.dry_run {
        human.push_str(&format!(
            "store file {} -> {} bytes; store folder {} bytes\n",
            o.file_bytes_before, o.file_bytes_after, o.store_bytes
        ));
        if let Some(max) = view.max_size.filter(|max| o.file_bytes_after > *max) {
            human.push_str(&format!(
                "store file still past --max-size {max}: what is kept above, and the file's own overhead, take more\n"
            ));
        }
    }
    human
}

fn checkpoint(o: &CheckpointOutcome) -> String {
    let mut human = skipped_human(&o.capture.skipped);
    if o.onboarded {
        human.push_str(&format!("onboarded {} in place\n", o.worktree));
    }
    let label = o
        .name
        .as_deref()
        .map(|n| format!(" {n}"))
        .unwrap_or_default();
    human.push_str(&format!(
        "checkpoint{label} {} ({} added, {} modified, {} removed{})\n",
        o.capture.snapshot,
        o.capture.added,
        o.capture.modified,
        o.capture.removed,
        if o.task_started { "; task started" } else { "" }
    ));
    human
}

fn undo(json: serde_json::Value, o: &UndoOutcome, verb: &str, field: &str) -> Report {
    let UndoOutcome::Done(done) = o else {
        return Report::new(json, String::new());
    };
    if !done.refused.is_empty() {
        let human: String = done
            .refused
            .iter()
            .map(|r| format!("refused {}: {}\n", quote_path(r.path.as_bytes()), r.reason))
            .collect();
        return Report::new(json, human);
    }
    let paths = done
        .reverted
        .as_ref()
        .or(done.reapplied.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut human: String = paths
        .iter()
        .map(|p| format!("{field} {}\n", quote_path(p.as_bytes())))
        .collect();
    human.push_str(&format!(
        "{verb} of op {}: {} file{}\n",
        done.op,
        paths.len(),
        if paths.len() == 1 { "" } else { "s" }
    ));
    Report::new(json, human)
}

fn op_log(o: &OpLogOutcome) -> String {
    let mut human = String::new();
    for op in &o.ops {
        let state = if op.undone {
            "undone"
        } else if op.undoable {
            "undoable"
        } else {
            ""
        };
        let short =
            |s: Option<cas::SnapshotId>| s.map(|s| s.short(12)).unwrap_or_else(|| "-".into());
        let target = op
            .undoes
            .map(|s| format!(" (of op {s})"))
            .or(op.redoes.map(|s| format!(" (of op {s})")))
            .unwrap_or_default();
        let detail = match (&op.detail, &op.by) {
            (Some(d), Some(by)) => format!(" {d} (by {by})"),
            (Some(d), None) => format!(" {d}"),
            _ => String::new(),
        };
        human.push_str(&format!(
            "{:>4}  {}  {:<10} {} -> {}{target}{detail}{}\n",
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
    }
    human
}

/// A worktree's sandbox grants, one per line.
pub fn policy(o: &PolicyOutcome) -> String {
    let mut human = format!(
        "{}: writable: the worktree; readable: everything\n",
        o.worktree
    );
    for (set, when) in [(&o.policy.always, ""), (&o.policy.once, " (next run only)")] {
        for path in &set.writable {
            human.push_str(&format!("  write {path}{when}\n"));
        }
        if set.network {
            human.push_str(&format!("  network{when}\n"));
        }
    }
    if o.policy.is_empty() {
        human.push_str("  no grants\n");
    }
    for r in &o.requests {
        let mut what: Vec<String> = r
            .grant
            .writable
            .iter()
            .map(|p| format!("write {p}"))
            .collect();
        if r.grant.network {
            what.push("network".into());
        }
        let when = if r.once { " (next run only)" } else { "" };
        let why = r
            .reason
            .as_deref()
            .map(|w| format!(": {w}"))
            .unwrap_or_default();
        human.push_str(&format!(
            "  request {}: {}{when}, asked by {} at {}{why}\n",
            r.id,
            what.join(", "),
            r.by,
            r.asked.round(jiff::Unit::Second).unwrap_or(r.asked),
        ));
    }
    if let Some(message) = &o.message {
        human.push_str(message);
        human.push('\n');
    }
    human
}

fn accept(o: &AcceptOutcome) -> String {
    let mut human: String = o
        .accepted
        .iter()
        .map(|p| format!("accepted {}\n", quote_path(p.as_bytes())))
        .collect();
    human.push_str(&match o.baseline {
        None => format!("task ended: {} change(s) kept\n", o.accepted.len()),
        Some(b) => format!(
            "{} path(s) accepted; baseline now {}\n",
            o.accepted.len(),
            b.short(12)
        ),
    });
    human
}

fn discard(o: &DiscardOutcome) -> String {
    let mut human: String = o
        .discarded
        .iter()
        .map(|p| format!("discarded {}\n", quote_path(p.as_bytes())))
        .collect();
    human.push_str(&format!(
        "{} path(s) back to the baseline{}; `cairn undo` brings them back\n",
        o.discarded.len(),
        if o.task_ended { ", task ended" } else { "" }
    ));
    human
}

fn recover(o: &RecoverOutcome) -> String {
    match (&o.commit, &o.recovered) {
        (Some(commit), _) => format!(
            "finished the interrupted merge --checkout in {} ({} paths); HEAD is at {commit}\n",
            o.worktree, o.paths
        ),
        (None, Some(op)) => format!(
            "finished the interrupted {op} in {} ({} paths)\n",
            o.worktree, o.paths
        ),
        (None, None) => format!("nothing to recover in {}\n", o.worktree),
    }
}

fn remotes(o: &RemotesOutcome, verb: &str) -> String {
    o.remotes
        .iter()
        .map(|r| {
            let endpoint = r
                .endpoint
                .as_deref()
                .map(|e| format!(" (endpoint {e})"))
                .unwrap_or_default();
            let refs = if r.conditional_writes {
                ""
            } else {
                " [refs refused: the engine ignores conditional writes]"
            };
            format!("{verb}{}\t{}{endpoint}{refs}\n", r.name, r.url)
        })
        .collect()
}

fn push(o: &PushOutcome) -> String {
    let mut human = format!(
        "pushed {} snapshot{} to {}: {} objects sent ({}), {} already there\n",
        o.pushed.len(),
        if o.pushed.len() == 1 { "" } else { "s" },
        o.remote,
        o.objects_sent,
        human_bytes(o.bytes_sent),
        o.objects_present,
    );
    for r in &o.refs {
        human.push_str(&format!("{} -> {}\n", r.name, r.snapshot));
    }
    for w in &o.warnings {
        human.push_str(&format!("warning: {w}\n"));
    }
    human
}

fn pull(o: &PullOutcome) -> String {
    let mut human = format!(
        "pulled {} snapshot{} from {}: {} objects received ({})\n",
        o.pulled.len(),
        if o.pulled.len() == 1 { "" } else { "s" },
        o.remote,
        o.objects_received,
        human_bytes(o.bytes_received),
    );
    for r in &o.refs {
        human.push_str(&format!("{} -> {}\n", r.name, r.snapshot));
    }
    for w in &o.warnings {
        human.push_str(&format!("warning: {w}\n"));
    }
    human
}

fn human_bytes(n: u64) -> String {
    indicatif::BinaryBytes(n).to_string()
}
