//! Checked paths inside a tree: [`RepoPath`] (borrowed) and [`RepoPathBuf`] (owned).
//!
//! A repo path is the `/`-separated bytes of a path from a worktree's (or snapshot's) root,
//! with no leading, trailing or doubled `/`; the empty path is the root. Every component is
//! a name [`check_name`] accepts, so a repo path never climbs out of its root, never names
//! `.git` and holds no control byte. Paths that come from outside (user input, JSON) are
//! checked by [`RepoPathBuf::new`], which also applies the whole-path limits of
//! [`check_path`]. Paths built from names a tree or a checked directory listing already
//! holds go through [`RepoPathBuf::from_bytes_unchecked`] (or [`RepoPathBuf::push_name_unchecked`]),
//! named so at every call; such a path may be longer than [`MAX_PATH_LEN`] when the tree
//! nests that deep, which is why writing one to disk checks [`check_path`] again.

use std::borrow::Borrow;
use std::ffi::OsStr;
use std::fmt;
use std::ops::Deref;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use ref_cast::{RefCastCustom, ref_cast_custom};

#[cfg(doc)]
use crate::MAX_PATH_LEN;
use crate::path_text::{from_path_text, path_text};
use crate::{NameError, check_name, check_path};

/// A path refused as a repo path: the path (as [`path_text`] shows it) and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {}", reason.reason())]
pub struct RepoPathError {
    /// The path, as shown.
    pub path: String,
    /// The rule it breaks.
    pub reason: NameError,
}

/// A borrowed, checked path inside a tree (see the [module documentation](self)).
#[derive(PartialEq, Eq, Hash, RefCastCustom)]
#[repr(transparent)]
pub struct RepoPath([u8]);

/// An owned, checked path inside a tree (see the [module documentation](self)).
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct RepoPathBuf(Vec<u8>);

impl RepoPath {
    #[ref_cast_custom]
    const fn cast(bytes: &[u8]) -> &RepoPath;

    /// The root: the empty path.
    pub const fn root() -> &'static RepoPath {
        RepoPath::cast(b"")
    }

    /// `bytes` as a repo path, checked as [`RepoPathBuf::new`] checks.
    pub fn new(bytes: &[u8]) -> Result<&RepoPath, RepoPathError> {
        check(bytes)?;
        Ok(RepoPath::cast(bytes))
    }

    /// `bytes` as a repo path, unchecked: only for bytes whose every component has passed
    /// [`check_name`] already (names of a `cas` tree, a listing the scan checked). Checked
    /// in debug builds.
    pub fn from_bytes_unchecked(bytes: &[u8]) -> &RepoPath {
        debug_assert!(components_valid(bytes), "{}", path_text(bytes));
        RepoPath::cast(bytes)
    }

    /// The bytes (`/`-separated).
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// True for the root.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The names from the root down (none for the root).
    pub fn components(&self) -> impl DoubleEndedIterator<Item = &[u8]> {
        let bytes = (!self.0.is_empty()).then_some(&self.0);
        bytes.into_iter().flat_map(|b| b.split(|&c| c == b'/'))
    }

    /// The last name (empty for the root).
    pub fn name(&self) -> &[u8] {
        self.split_parent().1
    }

    /// The directory holding this path and its name there; the root's children have the
    /// root as parent, and the root splits into the root and an empty name.
    pub fn split_parent(&self) -> (&RepoPath, &[u8]) {
        let (parent, name) = bytes::split_parent(&self.0);
        (RepoPath::cast(parent), name)
    }

    /// The directory holding this path; `None` for the root.
    pub fn parent(&self) -> Option<&RepoPath> {
        (!self.is_root()).then(|| self.split_parent().0)
    }

    /// This path, then each directory above it, up to and including the root.
    pub fn ancestors(&self) -> impl Iterator<Item = &RepoPath> {
        std::iter::successors(Some(self), |p| p.parent())
    }

    /// True if `self` is `base` or lies below it; everything lies below the root.
    pub fn starts_with(&self, base: &RepoPath) -> bool {
        bytes::is_under(&self.0, &base.0)
    }

    /// `self` with `name` below it, the name and the result checked as
    /// [`RepoPathBuf::new`] checks.
    pub fn join(&self, name: &[u8]) -> Result<RepoPathBuf, RepoPathError> {
        let mut joined = self.0.to_vec();
        if !joined.is_empty() {
            joined.push(b'/');
        }
        joined.extend_from_slice(name);
        check_name(name)
            .and_then(|()| check_limits(&joined))
            .map_err(|reason| RepoPathError {
                path: path_text(&joined),
                reason,
            })?;
        Ok(RepoPathBuf(joined))
    }

    /// Orders as trees list their files: component by component, by name bytes (a
    /// directory's files come right after its name, before any name it is a prefix of).
    /// This is also `Ord` on repo paths; plain byte order is `as_bytes().cmp(..)`.
    pub fn cmp_tree_order(&self, other: &RepoPath) -> std::cmp::Ordering {
        bytes::tree_order(&self.0, &other.0)
    }

    /// The file-system path of this path under `root`.
    pub fn to_fs_path(&self, root: &Path) -> PathBuf {
        bytes::to_fs_path(root, &self.0)
    }
}

/// [`RepoPath`]'s operations on raw bytes, for paths that are not repo paths: a name the
/// scan skipped as invalid, a path read back from an on-disk journal or cache. One
/// implementation: the methods of [`RepoPath`] call these.
pub mod bytes {
    use super::*;

    /// [`RepoPath::cmp_tree_order`] on raw bytes.
    pub fn tree_order(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
        // No name holds a NUL, so '/' as 0 sorts every component before any longer name.
        let key = |c: &u8| if *c == b'/' { 0 } else { *c };
        a.iter().map(key).cmp(b.iter().map(key))
    }

    /// [`RepoPath::starts_with`] on raw bytes: `path` is `top` or below it.
    pub fn is_under(path: &[u8], top: &[u8]) -> bool {
        top.is_empty()
            || path == top
            || (path.starts_with(top) && path.get(top.len()) == Some(&b'/'))
    }

    /// [`RepoPath::split_parent`] on raw bytes.
    pub fn split_parent(p: &[u8]) -> (&[u8], &[u8]) {
        match p.iter().rposition(|&b| b == b'/') {
            Some(i) => (&p[..i], &p[i + 1..]),
            None => (&[], p),
        }
    }

    /// [`RepoPath::to_fs_path`] on raw bytes.
    pub fn to_fs_path(root: &Path, rel: &[u8]) -> PathBuf {
        if rel.is_empty() {
            root.to_path_buf()
        } else {
            root.join(OsStr::from_bytes(rel))
        }
    }
}

impl RepoPathBuf {
    /// `bytes` as a repo path: empty (the root), or every component a name [`check_name`]
    /// accepts (so no leading, trailing or doubled `/`, no `.` or `..`), within the limits
    /// of [`check_path`].
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<RepoPathBuf, RepoPathError> {
        let bytes = bytes.into();
        check(&bytes)?;
        Ok(RepoPathBuf(bytes))
    }

    /// The root: the empty path.
    pub fn root() -> RepoPathBuf {
        RepoPathBuf(Vec::new())
    }

    /// `bytes` as a repo path, unchecked: only for bytes whose every component has passed
    /// [`check_name`] already (names of a `cas` tree, a listing the scan checked). Checked
    /// in debug builds.
    pub fn from_bytes_unchecked(bytes: Vec<u8>) -> RepoPathBuf {
        debug_assert!(components_valid(&bytes), "{}", path_text(&bytes));
        RepoPathBuf(bytes)
    }

    /// Appends `name` below this path, unchecked: only for a name that passed
    /// [`check_name`] already (a tree entry's, a checked listing's).
    pub fn push_name_unchecked(&mut self, name: &[u8]) {
        debug_assert!(check_name(name).is_ok(), "{}", path_text(name));
        if !self.0.is_empty() {
            self.0.push(b'/');
        }
        self.0.extend_from_slice(name);
    }

    /// Drops the last name (nothing for the root).
    pub fn pop(&mut self) {
        let len = self.split_parent().0.0.len();
        self.0.truncate(len);
    }

    /// The bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    /// The borrowed form.
    pub fn as_repo_path(&self) -> &RepoPath {
        RepoPath::cast(&self.0)
    }
}

fn check(bytes: &[u8]) -> Result<(), RepoPathError> {
    if bytes.is_empty() {
        return Ok(());
    }
    check_path(bytes).map_err(|reason| RepoPathError {
        path: path_text(bytes),
        reason,
    })
}

/// Length and depth only (the names are checked already).
fn check_limits(bytes: &[u8]) -> Result<(), NameError> {
    if bytes.len() > crate::MAX_PATH_LEN {
        return Err(NameError::PathTooLong);
    }
    if bytes.iter().filter(|&&b| b == b'/').count() >= crate::MAX_DEPTH {
        return Err(NameError::TooDeep);
    }
    Ok(())
}

fn components_valid(bytes: &[u8]) -> bool {
    bytes.is_empty() || bytes.split(|&b| b == b'/').all(|c| check_name(c).is_ok())
}

impl Deref for RepoPathBuf {
    type Target = RepoPath;
    fn deref(&self) -> &RepoPath {
        self.as_repo_path()
    }
}

impl AsRef<RepoPath> for RepoPathBuf {
    fn as_ref(&self) -> &RepoPath {
        self
    }
}

impl AsRef<RepoPath> for RepoPath {
    fn as_ref(&self) -> &RepoPath {
        self
    }
}

impl Borrow<RepoPath> for RepoPathBuf {
    fn borrow(&self) -> &RepoPath {
        self
    }
}

impl ToOwned for RepoPath {
    type Owned = RepoPathBuf;
    fn to_owned(&self) -> RepoPathBuf {
        RepoPathBuf(self.0.to_vec())
    }
}

impl From<&RepoPath> for RepoPathBuf {
    fn from(path: &RepoPath) -> RepoPathBuf {
        path.to_owned()
    }
}

impl TryFrom<&str> for RepoPathBuf {
    type Error = RepoPathError;
    fn try_from(text: &str) -> Result<RepoPathBuf, RepoPathError> {
        RepoPathBuf::new(text)
    }
}

impl Ord for RepoPath {
    fn cmp(&self, other: &RepoPath) -> std::cmp::Ordering {
        self.cmp_tree_order(other)
    }
}

impl PartialOrd for RepoPath {
    fn partial_cmp(&self, other: &RepoPath) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for RepoPathBuf {
    fn cmp(&self, other: &RepoPathBuf) -> std::cmp::Ordering {
        self.cmp_tree_order(other)
    }
}

impl PartialOrd for RepoPathBuf {
    fn partial_cmp(&self, other: &RepoPathBuf) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq<RepoPath> for RepoPathBuf {
    fn eq(&self, other: &RepoPath) -> bool {
        self.as_repo_path() == other
    }
}

impl PartialEq<&RepoPath> for RepoPathBuf {
    fn eq(&self, other: &&RepoPath) -> bool {
        self.as_repo_path() == *other
    }
}

/// As [`path_text`] shows it: UTF-8 as it is, anything else git-quoted.
impl fmt::Display for RepoPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match std::str::from_utf8(&self.0) {
            Ok(s) => f.write_str(s),
            Err(_) => f.write_str(&path_text(&self.0)),
        }
    }
}

impl fmt::Display for RepoPathBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_repo_path(), f)
    }
}

impl fmt::Debug for RepoPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", path_text(&self.0))
    }
}

impl fmt::Debug for RepoPathBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_repo_path(), f)
    }
}

/// As its [`path_text`], the form SPEC.md's JSON uses for paths.
impl serde::Serialize for RepoPath {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl serde::Serialize for RepoPathBuf {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.as_repo_path().serialize(s)
    }
}

/// A string: the path from the worktree root, `/` between names, as [`path_text`] writes it.
impl schemars::JsonSchema for RepoPathBuf {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RepoPath".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "From the worktree root; a path that is not UTF-8 is written as git quotes it (\"caf\\351\")."
        })
    }
}

/// From its [`path_text`], checked: a path a tree cannot hold is an error naming it.
impl<'de> serde::Deserialize<'de> for RepoPathBuf {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text: String = serde::Deserialize::deserialize(d)?;
        RepoPathBuf::new(from_path_text(&text)).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> RepoPathBuf {
        RepoPathBuf::new(text).expect("a valid path")
    }

    #[test]
    fn the_constructor_refuses_what_a_tree_cannot_hold() {
        let refused: &[(&[u8], NameError)] = &[
            (b"..", NameError::Dots),
            (b"a/../b", NameError::Dots),
            (b".", NameError::Dots),
            (b"a/./b", NameError::Dots),
            (b"a//b", NameError::Empty),
            (b"/a", NameError::Empty),
            (b"a/", NameError::Empty),
            (b"/", NameError::Empty),
            (b"a/nul\0", NameError::Control),
            (b".git", NameError::Git),
            (b"src/.GIT/config", NameError::Git),
            (b"git~1/x", NameError::Git),
            (b".git. /x", NameError::Git),
        ];
        for (bytes, reason) in refused {
            let err = RepoPathBuf::new(*bytes).expect_err(&path_text(bytes));
            assert_eq!(err.reason, *reason, "{}", path_text(bytes));
            assert_eq!(err.path, path_text(bytes));
            assert!(RepoPath::new(bytes).is_err());
        }
        let long = vec![b'a'; crate::MAX_PATH_LEN + 1];
        assert_eq!(
            RepoPathBuf::new(long).map_err(|e| e.reason),
            Err(NameError::PathTooLong)
        );
        let err = RepoPathBuf::new("src/.git").expect_err("refused");
        assert_eq!(err.to_string(), "src/.git: a spelling of .git");
    }

    #[test]
    fn the_constructor_accepts_the_root_and_tree_names() {
        assert!(RepoPathBuf::new("").expect("root").is_root());
        for ok in ["a", "src/main.rs", ".gitignore/x", "a b/c:d"] {
            assert_eq!(p(ok).as_bytes(), ok.as_bytes());
        }
        assert_eq!(
            RepoPathBuf::new(b"caf\xe9".to_vec())
                .expect("not UTF-8 is fine")
                .as_bytes(),
            b"caf\xe9"
        );
    }

    #[test]
    fn join_parent_and_ancestors_round_trip() {
        let root = RepoPath::root();
        let a = root.join(b"a").expect("a");
        let ab = a.join(b"b").expect("a/b");
        assert_eq!(ab, p("a/b"));
        assert_eq!(ab.parent(), Some(&*a));
        assert_eq!(a.parent(), Some(root));
        assert_eq!(root.parent(), None);
        assert_eq!(ab.split_parent(), (&*a, &b"b"[..]));
        assert_eq!(root.split_parent(), (root, &b""[..]));
        assert_eq!(ab.name(), b"b");
        let ancestors: Vec<&RepoPath> = ab.ancestors().collect();
        assert_eq!(ancestors, [&*ab, &*a, root]);
        let names: Vec<&[u8]> = ab.components().collect();
        assert_eq!(names, [&b"a"[..], b"b"]);
        assert_eq!(root.components().count(), 0);
        assert!(a.join(b"..").is_err());
        assert!(a.join(b"x/y").is_err());
        assert!(a.join(b".git").is_err());
        let mut popped = ab.clone();
        popped.pop();
        assert_eq!(popped, a);
        popped.pop();
        assert!(popped.is_root());
        popped.pop();
        assert!(popped.is_root());
    }

    #[test]
    fn starts_with_is_by_component() {
        assert!(p("a/b").starts_with(&p("a")));
        assert!(p("a/b").starts_with(&p("a/b")));
        assert!(p("a/b").starts_with(RepoPath::root()));
        assert!(!p("ab").starts_with(&p("a")));
        assert!(!p("a").starts_with(&p("a/b")));
        assert!(!p("a-b/c").starts_with(&p("a")));
    }

    #[test]
    fn ordering_is_tree_order() {
        let mut paths = [
            p("a-b"),
            p("a/b"),
            p("a"),
            p("a!"),
            p("b"),
            p("a/b/c"),
            p(""),
        ];
        paths.sort();
        let shown: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
        assert_eq!(shown, ["", "a", "a/b", "a/b/c", "a!", "a-b", "b"]);
        // Byte order differs: '/' sorts after '!' and '-'.
        assert!(p("a/b").as_bytes() > p("a-b").as_bytes());
    }

    #[test]
    fn fs_paths_are_below_the_root() {
        let root = Path::new("/w");
        assert_eq!(RepoPath::root().to_fs_path(root), PathBuf::from("/w"));
        assert_eq!(p("a/b").to_fs_path(root), PathBuf::from("/w/a/b"));
    }

    #[test]
    fn serde_and_display_are_the_path_text() {
        let plain = p("src/main.rs");
        assert_eq!(plain.to_string(), "src/main.rs");
        assert_eq!(
            serde_json::to_string(&plain).expect("json"),
            "\"src/main.rs\""
        );
        let latin = RepoPathBuf::new(b"caf\xe9".to_vec()).expect("valid");
        assert_eq!(latin.to_string(), path_text(b"caf\xe9"));
        assert_eq!(latin.to_string(), "\"caf\\351\"");
        let json = serde_json::to_string(&latin).expect("json");
        assert_eq!(
            json,
            serde_json::to_string(&path_text(b"caf\xe9")).expect("json")
        );
        let back: RepoPathBuf = serde_json::from_str(&json).expect("reads back");
        assert_eq!(back, latin);
        let utf8 = p("café/ü");
        let back: RepoPathBuf =
            serde_json::from_str(&serde_json::to_string(&utf8).expect("json")).expect("back");
        assert_eq!(back, utf8);
        let err = serde_json::from_str::<RepoPathBuf>("\"a/../etc\"").expect_err("refused");
        assert!(err.to_string().contains("a/../etc"), "{err}");
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn name() -> impl Strategy<Value = Vec<u8>> {
            prop::collection::vec(
                prop_oneof![Just(b'a'), Just(b'b'), Just(b'-'), Just(b'.'), Just(0xe9u8)],
                1..4,
            )
            .prop_filter("a valid name", |n| check_name(n).is_ok())
        }

        fn path() -> impl Strategy<Value = RepoPathBuf> {
            prop::collection::vec(name(), 0..4).prop_map(|names| {
                let mut out = RepoPathBuf::root();
                for n in names {
                    out = out.join(&n).expect("valid names join");
                }
                out
            })
        }

        proptest! {
            #[test]
            fn tree_order_is_component_order(a in path(), b in path()) {
                let by_components = a.components().cmp(b.components());
                prop_assert_eq!(a.cmp(&b), by_components);
            }

            #[test]
            fn join_then_split_gives_the_parts_back(parent in path(), n in name()) {
                let child = parent.join(&n).expect("valid");
                prop_assert_eq!(child.split_parent(), (&*parent, &n[..]));
                prop_assert!(child.starts_with(&parent));
                prop_assert_eq!(child.ancestors().nth(1), Some(&*parent));
                prop_assert_eq!(RepoPathBuf::new(child.as_bytes()), Ok(child.clone()));
                let text = serde_json::to_string(&child).expect("json");
                let back: RepoPathBuf = serde_json::from_str(&text).expect("reads back");
                prop_assert_eq!(back, child);
            }
        }
    }
}
