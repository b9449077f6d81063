//! merge_back against repositories built with the git CLI.

use camino::{Utf8Path, Utf8PathBuf};

/// Imports here record nothing of their own about the snapshot.
fn no_records(_: &mut cas::WriteBatch, _: cas::SnapshotId) -> Result<(), cas::BoxError> {
    Ok(())
}

fn git(dir: &Utf8Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "-C",
            dir.as_str(),
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn store(dir: &Utf8Path) -> cas::Store {
    cas::Store::open(
        &dir.join("store"),
        &cas::OpenOptions {
            create: true,
            ..Default::default()
        },
    )
    .unwrap()
}

fn source_repo(dir: &Utf8Path) -> Utf8PathBuf {
    let r = dir.join("src");
    std::fs::create_dir_all(r.join("deep/er")).unwrap();
    git(&r, &["init", "-q"]);
    std::fs::write(r.join("README"), "hello\n").unwrap();
    std::fs::write(r.join("deep/er/x.c"), "int x;\n").unwrap();
    std::fs::write(r.join("deep/y.c"), "int y;\n").unwrap();
    std::fs::write(r.join("caf\u{e9}.txt"), "utf-8 name\n").unwrap();
    std::fs::write(r.join("run.sh"), "#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(r.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("README", r.join("link")).unwrap();
    std::fs::write(r.join("a-b"), "sorts before a/ in git\n").unwrap();
    std::fs::create_dir_all(r.join("a")).unwrap();
    std::fs::write(r.join("a/z"), "z\n").unwrap();
    git(&r, &["add", "-A"]);
    git(&r, &["commit", "-qm", "first"]);
    r
}

#[test]
fn export_reproduces_git_tree_ids_and_reuses_what_it_exported() {
    let dir = tempfile::tempdir().unwrap();
    let dir = Utf8Path::from_path(dir.path()).unwrap();
    let src = source_repo(dir);
    let store = store(dir);
    let deny = path_policy::DenyList::nothing();
    let imported = merge_back::import(
        &store,
        &src,
        "HEAD",
        "import",
        &Default::default(),
        &deny,
        &no_records,
    )
    .unwrap();

    let target = dir.join("target");
    std::fs::create_dir_all(&target).unwrap();
    git(&target, &["init", "-q"]);
    let out = merge_back::export(&store, &target, imported.tree).unwrap();
    assert_eq!(
        out.tree,
        git(&src, &["rev-parse", "HEAD^{tree}"]),
        "the same tree id as git's own"
    );
    assert_eq!(out.reused, 0);
    let commit = git(&target, &["commit-tree", &out.tree, "-m", "exported"]);
    git(&target, &["update-ref", "refs/heads/main", &commit]);
    git(&target, &["fsck", "--strict"]);

    // Again: nothing is read or written.
    let again = merge_back::export(&store, &target, imported.tree).unwrap();
    assert_eq!((again.written, again.reused), (0, 1));

    // One file changed: that blob and the trees above it.
    std::fs::write(src.join("deep/er/x.c"), "int x = 1;\n").unwrap();
    git(&src, &["commit", "-qam", "second"]);
    let second = merge_back::import(
        &store,
        &src,
        "HEAD",
        "second",
        &Default::default(),
        &deny,
        &no_records,
    )
    .unwrap();
    let out = merge_back::export(&store, &target, second.tree).unwrap();
    assert_eq!(out.tree, git(&src, &["rev-parse", "HEAD^{tree}"]));
    assert_eq!(out.written, 4, "x.c, deep/er, deep and the root: {out:?}");
    assert!(out.reused >= 5, "{out:?}");
    git(&target, &["fsck", "--strict"]);

    // A fresh repository gets everything written, whatever the map says.
    let fresh = dir.join("fresh");
    std::fs::create_dir_all(&fresh).unwrap();
    git(&fresh, &["init", "-q"]);
    let out = merge_back::export(&store, &fresh, second.tree).unwrap();
    assert_eq!(out.reused, 0);
    assert_eq!(git(&fresh, &["cat-file", "-t", &out.tree]), "tree");
    let err = merge_back::export(&store, &dir.join("nowhere"), second.tree).unwrap_err();
    assert!(err.to_string().contains("nowhere"), "{err}");
}

type Side = fn(&Utf8Path);

/// A repository with `base` committed, then branch `ours` and branch `theirs` changing it.
fn three_way(dir: &Utf8Path, base: Side, ours: Side, theirs: Side) -> (Utf8PathBuf, [String; 3]) {
    let r = dir.join("r");
    std::fs::create_dir_all(&r).unwrap();
    git(&r, &["init", "-q", "-b", "main"]);
    base(&r);
    git(&r, &["add", "-A"]);
    git(&r, &["commit", "-qm", "base"]);
    git(&r, &["checkout", "-qb", "ours"]);
    ours(&r);
    git(&r, &["add", "-A"]);
    git(&r, &["commit", "-qm", "ours", "--allow-empty"]);
    git(&r, &["checkout", "-q", "main"]);
    git(&r, &["checkout", "-qb", "theirs"]);
    theirs(&r);
    git(&r, &["add", "-A"]);
    git(&r, &["commit", "-qm", "theirs", "--allow-empty"]);
    let tree = |rev: &str| git(&r, &["rev-parse", &format!("{rev}^{{tree}}")]);
    (r.clone(), [tree("main"), tree("ours"), tree("theirs")])
}

fn write(r: &Utf8Path, name: &str, content: &[u8]) {
    std::fs::create_dir_all(r.join(name).parent().unwrap()).unwrap();
    std::fs::write(r.join(name), content).unwrap();
}

const TEXT: &[u8] = b"one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n";

#[test]
fn clean_merges_match_git_exactly() {
    let cases: Vec<(&str, Side, Side, Side)> = vec![
        (
            "non-overlapping edits",
            |r| write(r, "f", TEXT),
            |r| write(r, "f", &TEXT.to_vec().replace_first(b"one", b"ONE")),
            |r| write(r, "f", &TEXT.to_vec().replace_first(b"eight", b"EIGHT")),
        ),
        (
            "exec bit on one side, content on the other",
            |r| write(r, "run.sh", b"#!/bin/sh\necho a\n"),
            |r| {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(r.join("run.sh"), std::fs::Permissions::from_mode(0o755))
                    .unwrap();
            },
            |r| write(r, "run.sh", b"#!/bin/sh\necho b\n"),
        ),
        (
            "symlink retarget",
            |r| {
                write(r, "a", b"a\n");
                write(r, "b", b"b\n");
                std::os::unix::fs::symlink("a", r.join("link")).unwrap();
            },
            |r| {
                std::fs::remove_file(r.join("link")).unwrap();
                std::os::unix::fs::symlink("b", r.join("link")).unwrap();
            },
            |r| write(r, "other", b"x\n"),
        ),
        (
            "rename on one side, edit on the other",
            |r| write(r, "old.txt", TEXT),
            |r| {
                std::fs::rename(r.join("old.txt"), r.join("new.txt")).unwrap();
            },
            |r| write(r, "old.txt", &TEXT.to_vec().replace_first(b"four", b"FOUR")),
        ),
    ];
    for (name, base, ours, theirs) in cases {
        let dir = tempfile::tempdir().unwrap();
        let dir = Utf8Path::from_path(dir.path()).unwrap();
        let (r, [b, o, t]) = three_way(dir, base, ours, theirs);
        let merged = merge_back::merge_trees(&r, &b, &o, &t).unwrap();
        assert_eq!(merged.conflicts, vec![], "{name}");
        let expected = git(&r, &["merge-tree", "--write-tree", "ours", "theirs"]);
        assert_eq!(
            merged.tree.as_deref(),
            Some(expected.lines().next().unwrap()),
            "{name}"
        );
    }
}

#[test]
fn conflicts_are_reported_by_kind_and_path() {
    use merge_back::ConflictKind as K;
    let cases: Vec<(&str, Side, Side, Side, &str, K)> = vec![
        (
            "same line",
            |r| write(r, "f", TEXT),
            |r| write(r, "f", &TEXT.to_vec().replace_first(b"two", b"TWO")),
            |r| write(r, "f", &TEXT.to_vec().replace_first(b"two", b"2")),
            "f",
            K::Content,
        ),
        (
            "modify/delete",
            |r| write(r, "f", TEXT),
            |r| write(r, "f", &TEXT.to_vec().replace_first(b"two", b"TWO")),
            |r| std::fs::remove_file(r.join("f")).unwrap(),
            "f",
            K::ModifyDelete,
        ),
        (
            "add/add",
            |r| write(r, "keep", b"k\n"),
            |r| write(r, "new", b"ours\n"),
            |r| write(r, "new", b"theirs\n"),
            "new",
            K::AddAdd,
        ),
        (
            "binary",
            |r| write(r, "img.bin", b"\0\x01base"),
            |r| write(r, "img.bin", b"\0\x01ours"),
            |r| write(r, "img.bin", b"\0\x01theirs"),
            "img.bin",
            K::Binary,
        ),
        (
            "file against directory",
            |r| write(r, "keep", b"k\n"),
            |r| write(r, "x", b"a file\n"),
            |r| write(r, "x/inside", b"a directory\n"),
            "x",
            K::Type,
        ),
    ];
    for (name, base, ours, theirs, path, kind) in cases {
        let dir = tempfile::tempdir().unwrap();
        let dir = Utf8Path::from_path(dir.path()).unwrap();
        let (r, [b, o, t]) = three_way(dir, base, ours, theirs);
        let before = (
            git(&r, &["rev-parse", "HEAD"]),
            git(&r, &["status", "--porcelain"]),
        );
        let merged = merge_back::merge_trees(&r, &b, &o, &t).unwrap();
        assert_eq!(merged.tree, None, "{name}");
        assert!(
            merged
                .conflicts
                .iter()
                .any(|c| c.path.starts_with(path.as_bytes()) && c.kind == kind),
            "{name}: {:?}",
            merged.conflicts
        );
        // Git agrees there is a conflict there.
        let out = std::process::Command::new("git")
            .args([
                "-C",
                r.as_str(),
                "merge-tree",
                "--write-tree",
                "--name-only",
                "ours",
                "theirs",
            ])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{name}: git sees a conflict too"
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(path),
            "{name}"
        );
        // Nothing in the repository moved.
        assert_eq!(
            (
                git(&r, &["rev-parse", "HEAD"]),
                git(&r, &["status", "--porcelain"])
            ),
            before,
            "{name}"
        );
    }
}

trait ReplaceFirst {
    fn replace_first(&self, from: &[u8], to: &[u8]) -> Vec<u8>;
}

impl ReplaceFirst for Vec<u8> {
    fn replace_first(&self, from: &[u8], to: &[u8]) -> Vec<u8> {
        let at = self.windows(from.len()).position(|w| w == from).unwrap();
        [&self[..at], to, &self[at + from.len()..]].concat()
    }
}

/// The source an onboard records: HEAD and whether tracked files differ from it; nothing
/// for a directory that is not a work tree's top, an unborn HEAD or an unreadable `.git`.
#[test]
fn git_source_tells_the_commit_and_whether_the_files_moved_on() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = Utf8Path::from_path(tmp.path()).unwrap();
    let repo = source_repo(dir);
    let head = git(&repo, &["rev-parse", "HEAD"]);
    let clean = merge_back::git_source(&repo).expect("a repository with a commit");
    assert_eq!((clean.commit.as_str(), clean.dirty), (head.as_str(), false));
    std::fs::write(repo.join("README"), "edited\n").unwrap();
    let dirty = merge_back::git_source(&repo).expect("a repository with a commit");
    assert_eq!((dirty.commit.as_str(), dirty.dirty), (head.as_str(), true));

    assert!(
        merge_back::git_source(&repo.join("deep")).is_none(),
        "not the top"
    );
    let unborn = dir.join("unborn");
    std::fs::create_dir(&unborn).unwrap();
    git(&unborn, &["init", "-q"]);
    assert!(merge_back::git_source(&unborn).is_none(), "no commit yet");
    let stub = dir.join("stub");
    std::fs::create_dir(&stub).unwrap();
    std::fs::write(stub.join(".git"), "gitdir: /nowhere/at/all\n").unwrap();
    assert!(merge_back::git_source(&stub).is_none(), "unreadable .git");
}

/// The errors of a chain, outermost first, as `Display` shows them.
fn chain(err: &dyn std::error::Error) -> Vec<String> {
    let mut out = vec![err.to_string()];
    let mut at = err.source();
    while let Some(e) = at {
        out.push(e.to_string());
        at = e.source();
    }
    out
}

/// gitoxide's errors stay reachable through `source()` (the CLI and logs can walk the
/// chain), while each message reads exactly as it did when the cause was flattened to text.
#[test]
fn gitoxide_errors_are_kept_as_sources_and_messages_do_not_change() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = Utf8Path::from_path(tmp.path()).unwrap();
    let store = store(dir);
    let plain = dir.join("plain");
    std::fs::create_dir(&plain).unwrap();

    let err = merge_back::merge_trees(&plain, "", "", "").unwrap_err();
    let source = std::error::Error::source(&err).expect("gitoxide's error as the source");
    assert!(source.is::<gix::Error>(), "{source:?}");
    let cause = format!("\"{plain}\" does not appear to be a git repository");
    assert_eq!(
        chain(&err)[..2],
        [format!("{plain}: not a git repository ({cause})"), cause]
    );

    let stub = dir.join("stub");
    std::fs::create_dir(&stub).unwrap();
    std::fs::write(stub.join(".git"), "gitdir: /nowhere/at/all\n").unwrap();
    let err = merge_back::git_state(&stub).unwrap_err();
    let cause = format!("\"{stub}\" does not appear to be a git repository");
    assert_eq!(
        chain(&err)[..2],
        [format!("git repository {stub}: {cause}"), cause]
    );

    let repo = source_repo(dir);
    let deny = path_policy::DenyList::nothing();
    let err = merge_back::import(
        &store,
        &repo,
        "no-such-rev",
        "m",
        &Default::default(),
        &deny,
        &no_records,
    )
    .unwrap_err();
    let cause = "couldn't parse revision, input=\"no-such-rev\"";
    assert_eq!(
        chain(&err)[..2],
        [
            format!("{repo}: no commit 'no-such-rev' ({cause})"),
            cause.to_owned()
        ]
    );

    let imported = merge_back::import(
        &store,
        &repo,
        "HEAD",
        "import",
        &Default::default(),
        &deny,
        &no_records,
    )
    .unwrap();
    let options = merge_back::MergeSnapshotOptions {
        repo: &repo,
        snapshot: imported.snapshot,
        base: None,
        branch: Some("two..dots"),
        message: None,
        checkout: false,
        trailers: &[],
    };
    let err = merge_back::merge_snapshot(&store, &options).unwrap_err();
    assert!(
        matches!(err, merge_back::MergeSnapshotError::InvalidBranch { .. }),
        "{err:?}"
    );
    assert_eq!(
        chain(&err)[..2],
        [
            "two..dots: not a valid branch name (Reference name cannot contain repeated dots)",
            "Reference name cannot contain repeated dots"
        ]
    );

    // cairn's own rule reads as before too, and is the source in gitoxide's place.
    let options = merge_back::MergeSnapshotOptions {
        branch: Some("-dash"),
        ..options
    };
    let err = merge_back::merge_snapshot(&store, &options).unwrap_err();
    assert_eq!(
        chain(&err),
        [
            "-dash: not a valid branch name (a branch name cannot start with '-')",
            "a branch name cannot start with '-'"
        ]
    );
}
