//! `cairn compare SNAP SNAP… [--base SNAP]`: which of several attempts agree on each path
//! any of them changed, as a table that fits 80 columns for 8 attempts.

use cairn_engine::{CheckEntry, CompareOptions, CompareOutcome, Request, verbs};

use crate::commands::{IntoRequest, Requested};
use crate::output::{Report, quote_path};
use crate::render::{Human, View};

/// Compare several snapshots (parallel attempts at one task): for every path any of them
/// changed against their base, which agree; each one's changes and checks; which have
/// equal trees.
#[derive(clap::Args, Debug)]
#[command(display_order = 43)]
pub struct Args {
    /// The snapshots to compare (at least two, each once): refs, id prefixes or checkpoint
    /// names.
    #[arg(required = true, num_args = 2.., value_name = "SNAP")]
    snapshots: Vec<String>,
    /// The snapshot their changes are taken against (default: their nearest common
    /// ancestor).
    #[arg(long, value_name = "SNAP")]
    base: Option<String>,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        super::with_default_view(Request::Compare(self.into()))
    }
}

impl From<Args> for CompareOptions {
    fn from(args: Args) -> CompareOptions {
        CompareOptions {
            snapshots: args.snapshots,
            base: args.base,
        }
    }
}

impl Human for verbs::Compare {
    fn report(o: &CompareOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, table(o, WIDTH))
    }
}

/// The terminal the table is laid out for (as `--stat` is when output is not a terminal).
const WIDTH: usize = 80;

/// The column label of the attempt at `index`: A…Z, then AA, AB…
fn label(index: usize) -> String {
    let letter = |n: usize| char::from(b'A' + (n % 26) as u8);
    if index < 26 {
        letter(index).to_string()
    } else {
        format!("{}{}", letter(index / 26 - 1), letter(index))
    }
}

/// `text` cut to at most `width` characters by leaving out its middle (`...`).
fn shorten(text: &str, width: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= width {
        return text.to_owned();
    }
    if width <= 3 {
        return chars[chars.len() - width..].iter().collect();
    }
    let keep = width - 3;
    // More of the end: a file's name says more than its first folders.
    let head = keep / 3;
    let tail = keep - head;
    let mut out: String = chars[..head].iter().collect();
    out.push_str("...");
    out.extend(&chars[chars.len() - tail..]);
    out
}

/// Lines of `words` joined by two spaces, each at most `width` wide after `indent`.
fn wrap(words: &[String], indent: usize, width: usize) -> Vec<String> {
    let room = width.saturating_sub(indent).max(1);
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in words {
        let word = shorten(word, room);
        let used = line.chars().count();
        if !line.is_empty() && used + 2 + word.chars().count() > room {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push_str("  ");
        }
        line.push_str(&word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// Each check's newest result, as `name pass` or `name FAIL`, in the order first listed.
fn check_marks(checks: &[CheckEntry]) -> Vec<String> {
    let mut seen: Vec<&str> = Vec::new();
    let mut marks = Vec::new();
    // Listed newest first: the first of each name is its newest run.
    for check in checks {
        if seen.contains(&check.check.as_str()) {
            continue;
        }
        seen.push(&check.check);
        let mark = if check.passed { "pass" } else { "FAIL" };
        marks.push(format!("{} {mark}", check.check.escape_debug()));
    }
    marks
}

fn table(o: &CompareOutcome, width: usize) -> String {
    let labels: Vec<String> = (0..o.snapshots.len()).map(label).collect();
    let index_of = |id| o.snapshots.iter().position(|s| s.id == id);
    let mut out = format!("base {}\n", o.base.short(12));

    // Each path's marks: a group's number, `-` where deleted, `.` as in the base.
    let mut rows: Vec<(String, Vec<String>)> = Vec::with_capacity(o.paths.len());
    for path in &o.paths {
        let mut marks = vec![String::new(); o.snapshots.len()];
        let mut number = 0;
        for group in &path.groups {
            let mark = if *group == path.unchanged {
                ".".to_owned()
            } else if *group == path.deleted {
                "-".to_owned()
            } else {
                number += 1;
                number.to_string()
            };
            for id in group {
                if let Some(at) = index_of(*id) {
                    marks[at] = mark.clone();
                }
            }
        }
        rows.push((quote_path(path.path.as_bytes()), marks));
    }
    let cell = rows
        .iter()
        .flat_map(|(_, marks)| marks.iter().map(String::len))
        .chain(labels.iter().map(String::len))
        .chain([2])
        .max()
        .unwrap_or(2);
    let columns = labels.len() * (cell + 1);
    let longest = rows.iter().map(|(p, _)| p.len()).max().unwrap_or(0);
    let path_width = longest
        .max(4)
        .min(width.saturating_sub(columns + 1).max(12));
    let line = |first: &str, cells: &[String]| {
        let mut text = format!("{first:<path_width$} ");
        for c in cells {
            text.push_str(&format!(" {c:>cell$}"));
        }
        text.truncate(text.trim_end().len());
        text.push('\n');
        text
    };
    if rows.is_empty() {
        out.push_str("no changes against the base\n");
    } else {
        out.push('\n');
        out.push_str(&line("path", &labels));
        for (path, marks) in &rows {
            out.push_str(&line(&shorten(path, path_width), marks));
        }
        out.push_str("(same number: same content; -: deleted; .: as in the base)\n");
    }

    // Each attempt: its id, its changes, its checks.
    out.push('\n');
    let label_width = labels.iter().map(String::len).max().unwrap_or(1);
    for (snapshot, label) in o.snapshots.iter().zip(&labels) {
        let files = format!(
            "{} file{}",
            snapshot.files,
            if snapshot.files == 1 { "" } else { "s" }
        );
        let head = format!(
            "{label:<label_width$} {}  {files:>9} +{} -{}",
            snapshot.id.short(12),
            snapshot.insertions,
            snapshot.deletions
        );
        let marks = check_marks(&snapshot.checks);
        let indent = label_width + 1;
        let first_room = width.saturating_sub(head.len() + 2);
        let lines = if marks.is_empty() {
            vec!["no checks".to_owned()]
        } else {
            wrap(&marks, indent, width)
        };
        // The first line of marks after the counts when it fits, else on lines below.
        match lines.split_first() {
            Some((first, rest)) if first.chars().count() <= first_room => {
                out.push_str(&format!("{head}  {first}\n"));
                for l in rest {
                    out.push_str(&format!("{:indent$}{l}\n", ""));
                }
            }
            _ => {
                out.push_str(&format!("{head}\n"));
                for l in &lines {
                    out.push_str(&format!("{:indent$}{l}\n", ""));
                }
            }
        }
    }
    for group in &o.identical {
        let names: Vec<&str> = group
            .iter()
            .filter_map(|id| index_of(*id).map(|at| labels[at].as_str()))
            .collect();
        out.push_str(&format!("identical trees: {}\n", names.join(" = ")));
    }
    out
}
