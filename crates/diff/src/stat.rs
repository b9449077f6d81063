//! `--stat` exactly as git lays it out (git's `show_stats`, 80 columns when not a terminal).

/// One row of a `--stat`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatRow {
    /// The path as printed (quoted; renames as `a => b`).
    pub name: String,
    /// Lines added (text).
    pub insertions: u64,
    /// Lines removed (text).
    pub deletions: u64,
    /// Sizes before and after, for binary files.
    pub binary: Option<(u64, u64)>,
}

fn decimal_width(n: u64) -> usize {
    n.to_string().len()
}

/// Git's scaling: at least one mark for any change, linear in the rest.
fn scale_linear(it: u64, width: u64, max_change: u64) -> u64 {
    if it == 0 {
        0
    } else {
        1 + it * (width - 1) / max_change
    }
}

/// The rows and summary line of a `--stat`, `width` columns wide (git uses 80 when output
/// is not a terminal).
pub fn render(rows: &[StatRow], width: usize) -> String {
    let mut out = String::new();
    if rows.is_empty() {
        return out;
    }
    let mut max_len = 0usize;
    let mut max_change = 0u64;
    let mut number_width = 0usize;
    let mut bin_width = 0usize;
    for r in rows {
        max_len = max_len.max(r.name.chars().count());
        match r.binary {
            Some((old, new)) => {
                bin_width = bin_width.max(14 + decimal_width(new) + decimal_width(old));
                number_width = 3;
            }
            None => max_change = max_change.max(r.insertions + r.deletions),
        }
    }
    number_width = number_width.max(decimal_width(max_change));
    // Git guarantees at least 6 columns of graph and 10 of name.
    let width = width.max(16 + 6 + number_width);
    let mut graph_width = if (max_change as usize) + 4 > bin_width {
        max_change as usize
    } else {
        bin_width - 4
    };
    let mut name_width = max_len;
    if name_width + number_width + 6 + graph_width > width {
        let budget = (width * 3 / 8).saturating_sub(number_width + 6);
        if graph_width > budget {
            graph_width = budget.max(6);
        }
        if name_width > width.saturating_sub(number_width + 6 + graph_width) {
            name_width = width.saturating_sub(number_width + 6 + graph_width);
        } else {
            graph_width = width - number_width - 6 - name_width;
        }
    }

    let (mut files, mut adds, mut dels) = (0u64, 0u64, 0u64);
    for r in rows {
        files += 1;
        // Scale the name: keep the end, cut at a '/', mark with "...".
        let chars: Vec<char> = r.name.chars().collect();
        let (prefix, name, len) = if name_width < chars.len() {
            let len = name_width.saturating_sub(3);
            let tail: String = chars[chars.len() - len.min(chars.len())..].iter().collect();
            let name = match tail.find('/') {
                Some(i) => tail[i..].to_owned(),
                None => tail,
            };
            ("...", name, len)
        } else {
            ("", r.name.clone(), name_width)
        };
        let padding = len.saturating_sub(name.chars().count());
        if let Some((old, new)) = r.binary {
            out.push_str(&format!(
                " {prefix}{name}{:padding$} | {:>number_width$}",
                "", "Bin"
            ));
            if old == 0 && new == 0 {
                out.push('\n');
            } else {
                out.push_str(&format!(" {old} -> {new} bytes\n"));
            }
            continue;
        }
        adds += r.insertions;
        dels += r.deletions;
        let total = r.insertions + r.deletions;
        let (mut add, mut del) = (r.insertions, r.deletions);
        if (graph_width as u64) <= max_change {
            let mut scaled = scale_linear(total, graph_width as u64, max_change);
            if scaled < 2 && add > 0 && del > 0 {
                scaled = 2;
            }
            if add < del {
                add = scale_linear(add, graph_width as u64, max_change);
                del = scaled - add;
            } else {
                del = scale_linear(del, graph_width as u64, max_change);
                add = scaled - del;
            }
        }
        out.push_str(&format!(
            " {prefix}{name}{:padding$} | {total:>number_width$}{}{}{}\n",
            "",
            if total > 0 { " " } else { "" },
            "+".repeat(add as usize),
            "-".repeat(del as usize),
        ));
    }
    out.push_str(&summary(files, adds, dels));
    out.push('\n');
    out
}

/// Git's summary line: ` 6 files changed, 142 insertions(+), 38 deletions(-)`.
pub fn summary(files: u64, insertions: u64, deletions: u64) -> String {
    let mut s = if files == 1 {
        format!(" {files} file changed")
    } else {
        format!(" {files} files changed")
    };
    if insertions > 0 || deletions == 0 {
        s.push_str(&if insertions == 1 {
            format!(", {insertions} insertion(+)")
        } else {
            format!(", {insertions} insertions(+)")
        });
    }
    if deletions > 0 || insertions == 0 {
        s.push_str(&if deletions == 1 {
            format!(", {deletions} deletion(-)")
        } else {
            format!(", {deletions} deletions(-)")
        });
    }
    s
}

/// A rename as git's `--stat` prints it: the common leading and trailing directories
/// outside braces, `src/{a.c => b.c}`; `a => b` when nothing is shared.
pub fn rename_name(old: &str, new: &str) -> String {
    let (a, b) = (old.as_bytes(), new.as_bytes());
    // Common prefix, ending just after a '/'.
    let mut pfx = 0;
    let mut i = 0;
    while i < a.len() && i < b.len() && a[i] == b[i] {
        if a[i] == b'/' {
            pfx = i + 1;
        }
        i += 1;
    }
    // Common suffix, starting at a '/', not overlapping the prefix.
    let mut sfx = 0;
    let (mut x, mut y) = (a.len(), b.len());
    while x > pfx && y > pfx && a[x - 1] == b[y - 1] {
        if a[x - 1] == b'/' {
            sfx = a.len() - (x - 1);
        }
        x -= 1;
        y -= 1;
    }
    if pfx == 0 && sfx == 0 {
        return format!("{old} => {new}");
    }
    let a_mid = &old[pfx..old.len() - sfx];
    let b_mid = &new[pfx..new.len() - sfx];
    format!(
        "{}{{{a_mid} => {b_mid}}}{}",
        &old[..pfx],
        &old[old.len() - sfx..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, insertions: u64, deletions: u64) -> StatRow {
        StatRow {
            name: name.into(),
            insertions,
            deletions,
            binary: None,
        }
    }

    #[test]
    fn summary_lines_match_git() {
        assert_eq!(
            summary(6, 142, 38),
            " 6 files changed, 142 insertions(+), 38 deletions(-)"
        );
        assert_eq!(summary(1, 1, 0), " 1 file changed, 1 insertion(+)");
        assert_eq!(summary(1, 0, 1), " 1 file changed, 1 deletion(-)");
        assert_eq!(
            summary(2, 0, 0),
            " 2 files changed, 0 insertions(+), 0 deletions(-)"
        );
    }

    #[test]
    fn rows_scale_like_git() {
        let out = render(&[row("a.txt", 1, 1), row("src/main.rs", 10, 0)], 80);
        assert_eq!(
            out,
            " a.txt       |  2 +-\n src/main.rs | 10 ++++++++++\n 2 files changed, 11 insertions(+), 1 deletion(-)\n"
        );
        let big = render(&[row("f", 1000, 500)], 80);
        assert!(big.lines().next().unwrap().len() <= 80, "{big}");
        let bin = render(
            &[StatRow {
                name: "img.png".into(),
                insertions: 0,
                deletions: 0,
                binary: Some((10, 20)),
            }],
            80,
        );
        assert_eq!(
            bin,
            " img.png | Bin 10 -> 20 bytes\n 1 file changed, 0 insertions(+), 0 deletions(-)\n"
        );
    }

    #[test]
    fn renames_print_like_git() {
        assert_eq!(rename_name("a.txt", "b.txt"), "a.txt => b.txt");
        assert_eq!(rename_name("src/a.c", "src/b.c"), "src/{a.c => b.c}");
        assert_eq!(rename_name("a/x/f", "b/x/f"), "{a => b}/x/f");
        assert_eq!(rename_name("d/f", "f"), "d/f => f");
    }
}
