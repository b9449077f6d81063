//! Paths in requests and outcomes: directories resolved against the caller's directory,
//! and tree paths as raw bytes that serialize as SPEC.md's JSON path text.

use camino::{Utf8Path, Utf8PathBuf};

use crate::error::Error;

/// A path inside a tree, as raw bytes (file names need not be UTF-8). In JSON it is the
/// path itself when valid UTF-8, else git's quoted form (`"\377"`), which reads back to the
/// same bytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TreePath(pub Vec<u8>);

impl TreePath {
    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl From<Vec<u8>> for TreePath {
    fn from(bytes: Vec<u8>) -> Self {
        TreePath(bytes)
    }
}

impl From<&str> for TreePath {
    fn from(s: &str) -> Self {
        TreePath(s.as_bytes().to_vec())
    }
}

impl serde::Serialize for TreePath {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&diff::path_text(&self.0))
    }
}

impl<'de> serde::Deserialize<'de> for TreePath {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text: String = serde::Deserialize::deserialize(d)?;
        Ok(TreePath(from_path_text(&text)))
    }
}

/// The bytes `diff::path_text` wrote `text` from: the quoted form is only ever written for
/// bytes that are not UTF-8, so a text that unquotes to UTF-8 is a name as it is.
pub fn from_path_text(text: &str) -> Vec<u8> {
    unquote(text)
        .filter(|bytes| std::str::from_utf8(bytes).is_err())
        .unwrap_or_else(|| text.as_bytes().to_vec())
}

/// Git's C-style quoting undone, if `text` is in that form.
fn unquote(text: &str) -> Option<Vec<u8>> {
    let inner = text.strip_prefix('"')?.strip_suffix('"')?.as_bytes();
    let mut out = Vec::with_capacity(inner.len());
    let mut i = 0;
    while i < inner.len() {
        let b = inner[i];
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let next = *inner.get(i + 1)?;
        let simple = match next {
            b'a' => Some(0x07),
            b'b' => Some(0x08),
            b't' => Some(b'\t'),
            b'n' => Some(b'\n'),
            b'v' => Some(0x0b),
            b'f' => Some(0x0c),
            b'r' => Some(b'\r'),
            b'"' => Some(b'"'),
            b'\\' => Some(b'\\'),
            _ => None,
        };
        if let Some(s) = simple {
            out.push(s);
            i += 2;
            continue;
        }
        let digits = inner.get(i + 1..i + 4)?;
        if !digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
            return None;
        }
        let value = digits
            .iter()
            .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
        out.push(u8::try_from(value).ok()?);
        i += 4;
    }
    Some(out)
}

/// `p` made absolute against `cwd`, with `.` and `..` components resolved lexically.
pub fn absolute(cwd: &Utf8Path, p: &Utf8Path) -> Utf8PathBuf {
    let joined = if p.is_absolute() {
        p.to_owned()
    } else {
        cwd.join(p)
    };
    let mut out = Utf8PathBuf::new();
    for c in joined.components() {
        match c {
            camino::Utf8Component::CurDir => {}
            camino::Utf8Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_str()),
        }
    }
    out
}

/// Tree paths from `-- PATH…` arguments: relative to the worktree root as given, or
/// absolute inside `root`; `.` components dropped, `..` refused.
pub fn tree_paths(root: Option<&Utf8Path>, raw: &[TreePath]) -> Result<Vec<Vec<u8>>, Error> {
    let quote = diff::quote_path;
    let mut out = Vec::new();
    for p in raw {
        let bytes = p.as_bytes();
        let rel = match (bytes.starts_with(b"/"), root) {
            (true, Some(root)) => match bytes.strip_prefix(root.as_str().as_bytes()) {
                Some(rest) if rest.is_empty() || rest.starts_with(b"/") => rest,
                _ => {
                    return Err(Error::usage(
                        "invalid_path",
                        format!("{}: outside the worktree {root}", quote(bytes)),
                    ));
                }
            },
            (true, None) => {
                return Err(Error::usage(
                    "invalid_path",
                    format!("{}: an absolute path needs a worktree", quote(bytes)),
                ));
            }
            (false, _) => bytes,
        };
        let mut parts = Vec::new();
        for c in rel.split(|&b| b == b'/') {
            match c {
                b"" | b"." => {}
                b".." => {
                    return Err(Error::usage(
                        "invalid_path",
                        format!("{}: '..' is not allowed", quote(bytes)),
                    ));
                }
                c => parts.push(c),
            }
        }
        out.push(parts.join(&b'/'));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_paths_read_back_as_the_same_bytes() {
        for name in [
            b"src/main.rs".as_slice(),
            b"\xff\xfe",
            "caf\u{e9}".as_bytes(),
            b"tab\there",
            b"\"quoted\"",
            b"\"\\377\"",
        ] {
            let text = serde_json::to_string(&TreePath(name.to_vec())).expect("serializes");
            let back: TreePath = serde_json::from_str(&text).expect("deserializes");
            // A UTF-8 name that is itself a quoted form of non-UTF-8 bytes cannot be told
            // apart; every other name comes back as it was.
            if name != b"\"\\377\"" {
                assert_eq!(back.0, name, "{text}");
            }
        }
    }
}
