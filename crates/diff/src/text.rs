//! Line diffs with imara-diff, printed as git prints unified hunks.

use imara_diff::{Algorithm, Diff, InternedInput, Token};

/// Git's rule: a NUL byte in the first 8000 bytes makes content binary.
pub fn is_binary(content: &[u8]) -> bool {
    content[..content.len().min(8000)].contains(&0)
}

/// ANSI colours for a terminal; all empty when colour is off.
#[derive(Debug, Clone, Copy)]
pub struct Palette {
    /// Metadata lines (`diff --git`, `index`, `---`, `+++`).
    pub meta: &'static str,
    /// Hunk headers.
    pub frag: &'static str,
    /// Removed lines.
    pub old: &'static str,
    /// Added lines.
    pub new: &'static str,
    /// Back to normal.
    pub reset: &'static str,
}

impl Palette {
    /// Git's default colours.
    pub const COLOR: Palette = Palette {
        meta: "\x1b[1m",
        frag: "\x1b[36m",
        old: "\x1b[31m",
        new: "\x1b[32m",
        reset: "\x1b[m",
    };
    /// No colour.
    pub const PLAIN: Palette = Palette {
        meta: "",
        frag: "",
        old: "",
        new: "",
        reset: "",
    };
}

/// The line diff of two texts.
pub struct LineDiff<'a> {
    input: InternedInput<&'a [u8]>,
    diff: Diff,
}

impl<'a> LineDiff<'a> {
    /// Diffs `old` against `new` line by line (Myers, as git's default).
    pub fn new(old: &'a [u8], new: &'a [u8]) -> LineDiff<'a> {
        let input = InternedInput::new(
            imara_diff::sources::byte_lines(old),
            imara_diff::sources::byte_lines(new),
        );
        let mut diff = Diff::compute(Algorithm::Myers, &input);
        diff.postprocess_lines(&input);
        LineDiff { input, diff }
    }

    /// Lines added.
    pub fn insertions(&self) -> u64 {
        u64::from(self.diff.count_additions())
    }

    /// Lines removed.
    pub fn deletions(&self) -> u64 {
        u64::from(self.diff.count_removals())
    }

    fn line(&self, out: &mut Vec<u8>, sign: u8, token: Token, color: &str, reset: &str) {
        let text = self.input.interner[token];
        out.extend_from_slice(color.as_bytes());
        out.push(sign);
        match text.strip_suffix(b"\n") {
            Some(body) => {
                out.extend_from_slice(body);
                out.extend_from_slice(reset.as_bytes());
                out.push(b'\n');
            }
            None => {
                out.extend_from_slice(text);
                out.extend_from_slice(reset.as_bytes());
                out.extend_from_slice(b"\n\\ No newline at end of file\n");
            }
        }
    }

    /// Appends unified hunks with `context` lines around each change, as git prints them.
    pub fn write_hunks(&self, context: u32, palette: &Palette, out: &mut Vec<u8>) {
        let hunks: Vec<imara_diff::Hunk> = self.diff.hunks().collect();
        let (before, after) = (&self.input.before, &self.input.after);
        let mut i = 0;
        while i < hunks.len() {
            // Hunks closer than two contexts share one header, as in git.
            let mut j = i;
            while j + 1 < hunks.len()
                && hunks[j + 1].before.start - hunks[j].before.end <= 2 * context
            {
                j += 1;
            }
            let (first, last) = (&hunks[i], &hunks[j]);
            let start = first.before.start.saturating_sub(context);
            let end = (last.before.end + context).min(before.len() as u32);
            let after_start = first.after.start - (first.before.start - start);
            let after_end = last.after.end + (end - last.before.end);
            let range = |s: u32, e: u32| match e - s {
                0 => format!("{s},0"),
                1 => format!("{}", s + 1),
                n => format!("{},{n}", s + 1),
            };
            out.extend_from_slice(
                format!(
                    "{}@@ -{} +{} @@{}\n",
                    palette.frag,
                    range(start, end),
                    range(after_start, after_end),
                    palette.reset
                )
                .as_bytes(),
            );
            let mut pos = start;
            for h in &hunks[i..=j] {
                for &t in &before[pos as usize..h.before.start as usize] {
                    self.line(out, b' ', t, "", "");
                }
                for &t in &before[h.before.start as usize..h.before.end as usize] {
                    self.line(out, b'-', t, palette.old, palette.reset);
                }
                for &t in &after[h.after.start as usize..h.after.end as usize] {
                    self.line(out, b'+', t, palette.new, palette.reset);
                }
                pos = h.before.end;
            }
            for &t in &before[pos as usize..end as usize] {
                self.line(out, b' ', t, "", "");
            }
            i = j + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hunks(old: &str, new: &str, context: u32) -> String {
        let d = LineDiff::new(old.as_bytes(), new.as_bytes());
        let mut out = Vec::new();
        d.write_hunks(context, &Palette::PLAIN, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn hunks_look_like_git() {
        assert_eq!(
            hunks("a\nb\nc\n", "a\nB\nc\n", 3),
            "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
        );
        assert_eq!(hunks("", "x\ny\n", 3), "@@ -0,0 +1,2 @@\n+x\n+y\n");
        assert_eq!(hunks("x\n", "", 3), "@@ -1 +0,0 @@\n-x\n");
        assert_eq!(
            hunks("a\nb", "a\nc", 1),
            "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"
        );
        let old: String = (1..=20).map(|i| format!("{i}\n")).collect();
        let new: String = (1..=20)
            .map(|i| match i {
                2 => "two\n".to_owned(),
                19 => "nineteen\n".to_owned(),
                i => format!("{i}\n"),
            })
            .collect();
        let out = hunks(&old, &new, 3);
        assert_eq!(out.matches("@@ -").count(), 2, "{out}");
        assert!(out.starts_with("@@ -1,5 +1,5 @@\n 1\n-2\n+two\n"), "{out}");
        let d = LineDiff::new(old.as_bytes(), new.as_bytes());
        assert_eq!((d.insertions(), d.deletions()), (2, 2));
    }

    #[test]
    fn binary_means_a_nul_in_the_first_8000_bytes() {
        assert!(is_binary(b"abc\0def"));
        assert!(!is_binary(b"plain text\n"));
        let mut late = vec![b'a'; 9000];
        late[8500] = 0;
        assert!(!is_binary(&late));
    }
}
