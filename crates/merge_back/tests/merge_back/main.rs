//! merge_back against repositories built with the git CLI.

use camino::{Utf8Path, Utf8PathBuf};

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
    let imported =
        merge_back::import(&store, &src, "HEAD", "import", &Default::default(), &deny).unwrap();

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
    let second =
        merge_back::import(&store, &src, "HEAD", "second", &Default::default(), &deny).unwrap();
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
