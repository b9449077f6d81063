//! Human text for each verb's outcome (the JSON is the outcome itself): the same bytes
//! whether the engine ran in this process or in `cairn serve`. Each verb's text is its
//! [`Human`] impl, in its file under `commands/`; this file dispatches to them and keeps
//! what several verbs show alike (skipped paths, patches, `--stat`, summaries).

use cairn_engine::{
    DiffOutcome, FileChange, Outcome, RollbackOutcome, SkippedPath, UndoOutcome, verbs,
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

/// How the command line shows one verb's outcome: each verb's impl is in its file under
/// `commands/`, and the compiler requires one of every verb ([`report`] calls it for each).
pub trait Human: cairn_engine::VerbTypes {
    /// The report of `outcome`, whose JSON is `json`.
    fn report(outcome: &Self::Outcome, json: serde_json::Value, view: &View) -> Report;

    /// `report` turned into a refusal saying `message` (exit status 1).
    fn refused(outcome: &Self::Outcome, report: Report, message: &str) -> Report {
        let _ = outcome;
        report.refused(message)
    }
}

/// The report of `outcome`, with exit status 0, or 1 for a refusal: its verb's [`Human`].
pub fn report(outcome: &Outcome, view: &View) -> Report {
    let json = outcome.to_json();
    let refusal = outcome.refusal();
    macro_rules! each_verb {
        ($($verb:ident)*) => {
            match outcome {
                $( Outcome::$verb(o) => shown::<verbs::$verb>(o, json, refusal, view), )*
            }
        };
    }
    cairn_engine::with_verbs!(each_verb)
}

fn shown<V: Human>(
    outcome: &V::Outcome,
    json: serde_json::Value,
    refusal: Option<&str>,
    view: &View,
) -> Report {
    let report = V::report(outcome, json, view);
    match refusal {
        Some(message) => V::refused(outcome, report, message),
        None => report,
    }
}

pub(crate) fn skipped_human(skipped: &[SkippedPath]) -> String {
    skipped
        .iter()
        .map(|s| format!("skipped {}: {}\n", quote_path(s.path.as_bytes()), s.reason))
        .collect()
}

/// The text of a `rollback` or `rewind` (or their dry runs).
pub(crate) fn rollback_text(o: &RollbackOutcome, verb: &str) -> String {
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

pub(crate) fn palette(view: &View) -> &'static Palette {
    if view.color {
        &Palette::COLOR
    } else {
        &Palette::PLAIN
    }
}

/// `Modified: a, b · Created: c · Deleted: d` and `+142 -38 across 6 files`.
pub(crate) fn summary(o: &DiffOutcome) -> String {
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

/// An undo's or redo's report: each path it changed, or each it refused to.
pub(crate) fn undo_report(
    json: serde_json::Value,
    o: &UndoOutcome,
    verb: &str,
    field: &str,
) -> Report {
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

pub(crate) fn human_bytes(n: u64) -> String {
    indicatif::BinaryBytes(n).to_string()
}

/// An undo's or redo's refusal: nothing to do is said as it is.
pub(crate) fn undo_refused(o: &UndoOutcome, report: Report, message: &str) -> Report {
    match o {
        UndoOutcome::Nothing(_) => report.refused_verbatim(message),
        UndoOutcome::Done(_) => report.refused(message),
    }
}

/// A snapshot's checks as `log` and `show` mark them: `✓tests ✗lint`, the newest run of
/// each by name.
pub fn check_marks(checks: &[cairn_engine::CheckMark]) -> String {
    checks
        .iter()
        .map(|c| format!("{}{}", if c.passed { '✓' } else { '✗' }, c.check))
        .collect::<Vec<_>>()
        .join(" ")
}
