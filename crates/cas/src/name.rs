//! Which names a tree may hold, and how long and deep a path of them may be.
//!
//! This is a rule of the tree format (`docs/format.md`), so it lives with the format: every
//! tree is checked when built and again when decoded, and a tree that breaks it is no tree.
//! `path_policy` builds its repo paths on it; no other crate has a name rule of its own.

/// The longest entry name, in bytes.
pub const MAX_NAME_LEN: usize = 255;
/// The longest path, in bytes.
pub const MAX_PATH_LEN: usize = 4096;
/// The deepest nesting.
pub const MAX_DEPTH: usize = 2048;

/// Why a name or path is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameError {
    /// The empty name.
    #[error("empty name")]
    Empty,
    /// `.` or `..`.
    #[error("'.' and '..' are not names")]
    Dots,
    /// Contains `/`.
    #[error("contains '/'")]
    Slash,
    /// NUL or another control byte.
    #[error("contains a control character")]
    Control,
    /// Over [`MAX_NAME_LEN`] bytes.
    #[error("longer than 255 bytes")]
    TooLong,
    /// A name some file system resolves to `.git`.
    #[error("a spelling of .git")]
    Git,
    /// A path over [`MAX_PATH_LEN`] bytes.
    #[error("path longer than 4096 bytes")]
    PathTooLong,
    /// A path over [`MAX_DEPTH`] levels.
    #[error("path deeper than 2048 levels")]
    TooDeep,
}

impl NameError {
    /// The rule, as a short phrase.
    pub fn reason(self) -> &'static str {
        match self {
            NameError::Empty => "empty name",
            NameError::Dots => "'.' and '..' are not names",
            NameError::Slash => "contains '/'",
            NameError::Control => "contains a control character",
            NameError::TooLong => "longer than 255 bytes",
            NameError::Git => "a spelling of .git",
            NameError::PathTooLong => "path longer than 4096 bytes",
            NameError::TooDeep => "path deeper than 2048 levels",
        }
    }
}

/// Checks one entry name: not empty, `.` or `..`, no `/`, NUL or another control byte, at
/// most [`MAX_NAME_LEN`] bytes, and no spelling of `.git` that some file system would
/// resolve to `.git` (case, trailing dots and spaces, the 8.3 short name `git~1`, HFS+
/// ignorable code points, NTFS streams). Windows device names and `\ < > : " | ? *` are fine
/// on Linux and accepted.
pub fn check_name(name: &[u8]) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name == b"." || name == b".." {
        return Err(NameError::Dots);
    }
    if name.contains(&b'/') {
        return Err(NameError::Slash);
    }
    if name.iter().any(|&b| b < 0x20 || b == 0x7f) {
        return Err(NameError::Control);
    }
    if name.len() > MAX_NAME_LEN {
        return Err(NameError::TooLong);
    }
    if is_git_alias(name) {
        return Err(NameError::Git);
    }
    Ok(())
}

/// Checks every component of a `/`-separated path, and its length and depth.
pub fn check_path(path: &[u8]) -> Result<(), NameError> {
    if path.len() > MAX_PATH_LEN {
        return Err(NameError::PathTooLong);
    }
    let mut depth = 0;
    for component in path.split(|&b| b == b'/') {
        depth += 1;
        if depth > MAX_DEPTH {
            return Err(NameError::TooDeep);
        }
        check_name(component)?;
    }
    Ok(())
}

/// Code points HFS+ ignores when comparing names (as git's `is_hfs_dotgit` does).
fn hfs_ignorable(c: char) -> bool {
    matches!(c, '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}')
}

/// True for `.git` in any case; with trailing dots or spaces, or an NTFS stream suffix
/// (`.git::$INDEX_ALLOCATION`, `.git:x`); the 8.3 short name `git~1`; and `.git` with HFS+
/// ignorable code points anywhere.
fn is_git_alias(name: &[u8]) -> bool {
    // NTFS: a stream suffix names the same file; trailing dots and spaces are dropped.
    let base = match name.iter().position(|&b| b == b':') {
        Some(i) => &name[..i],
        None => name,
    };
    let trimmed = {
        let mut end = base.len();
        while end > 0 && (base[end - 1] == b'.' || base[end - 1] == b' ') {
            end -= 1;
        }
        &base[..end]
    };
    if trimmed.eq_ignore_ascii_case(b".git") || trimmed.eq_ignore_ascii_case(b"git~1") {
        return true;
    }
    // HFS+: ignorable code points vanish, case folds.
    if let Ok(text) = std::str::from_utf8(name) {
        let folded: String = text.chars().filter(|c| !hfs_ignorable(*c)).collect();
        if folded.eq_ignore_ascii_case(".git") {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_a_tree_may_not_hold() {
        let refused: &[&[u8]] = &[
            b"",
            b".",
            b"..",
            b"a/b",
            b"nul\0",
            b"tab\t",
            b"esc\x1b",
            b".git",
            b".GIT",
            b".Git",
            b".git.",
            b".git ",
            b".git. . ",
            b"git~1",
            b"GIT~1",
            b".git::$INDEX_ALLOCATION",
            b".git:$DATA",
            ".g\u{200c}it".as_bytes(),
            "\u{feff}.GIT".as_bytes(),
            ".git\u{206f}".as_bytes(),
            &[b'x'; 256],
        ];
        for name in refused {
            assert!(
                check_name(name).is_err(),
                "{:?} must be refused",
                String::from_utf8_lossy(name)
            );
        }
    }

    #[test]
    fn names_linux_allows_are_accepted() {
        let accepted: &[&[u8]] = &[
            b"aux.c",
            b"con",
            b"nul",
            b"a\\b",
            b"what?",
            b"<x>",
            b"a:b",
            b"\"q\"",
            b"|",
            b"*",
            b".gitignore",
            b".github",
            b"git",
            b"git~2",
            b".git2",
            b"\xff\xfe",
            &[b'x'; 255],
        ];
        for name in accepted {
            assert!(
                check_name(name).is_ok(),
                "{:?} must be accepted",
                String::from_utf8_lossy(name)
            );
        }
    }

    #[test]
    fn path_limits_are_refused_cleanly() {
        assert!(check_path(b"a/b/c").is_ok());
        assert_eq!(check_path(b"a/.git/c"), Err(NameError::Git));
        assert_eq!(check_path(&vec![b'a'; 4097]), Err(NameError::PathTooLong));
        // 2049 levels need at least 4097 bytes, so the length limit catches them first.
        let deep = vec!["d"; 2049].join("/");
        assert!(check_path(deep.as_bytes()).is_err());
        let ok_deep = vec!["d"; 2048].join("/");
        assert!(check_path(ok_deep.as_bytes()).is_ok());
        assert_eq!(check_path(b"a//b"), Err(NameError::Empty));
    }
}
