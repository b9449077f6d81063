//! `cairn merge SNAP --into REPO`, verified with the git CLI.

use camino::{Utf8Path, Utf8PathBuf};

use crate::support::{Env, git, stderr};

pub(crate) fn text(out: Vec<u8>) -> String {
    String::from_utf8(out).unwrap().trim().to_owned()
}

/// A repository with one commit, onboarded in place (the base), and an agent worktree
/// checked out from that snapshot.
pub(crate) fn setup(env: &Env) -> (Utf8PathBuf, Utf8PathBuf, String) {
    let repo = env.path().join("repo");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("src/a.rs"), "fn a() {}\nfn shared() {}\n").unwrap();
    std::fs::write(repo.join("b.txt"), "b\n").unwrap();
    std::fs::write(repo.join("c.txt"), "c\n").unwrap();
    std::fs::write(repo.join("gone.txt"), "to be deleted\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "first"]);
    let (code, v) = env.json(&["onboard", repo.as_str()]);
    assert_eq!(code, 0, "{v}");
    let base = v["snapshot"].as_str().unwrap().to_owned();
    let agent = env.path().join("agent");
    let (code, v) = env.json(&["checkout", &base, agent.as_str()]);
    assert_eq!(code, 0, "{v}");
    (repo, agent, base)
}

pub(crate) fn snapshot(env: &Env, worktree: &Utf8Path, message: &str) -> String {
    let (code, v) = env.json(&["snapshot", worktree.as_str(), "-m", message]);
    assert_eq!(code, 0, "{v}");
    v["snapshot"].as_str().unwrap().to_owned()
}

/// Everything git could observe changing: refs, HEAD, index, status.
fn repo_state(repo: &Utf8Path) -> (String, String, String, String) {
    (
        text(git(repo, &["for-each-ref"])),
        text(git(repo, &["symbolic-ref", "HEAD"])),
        text(git(repo, &["ls-files", "-s"])),
        text(git(repo, &["status", "--porcelain"])),
    )
}

#[test]
fn a_clean_merge_commits_on_a_new_branch_and_touches_nothing_else() {
    let env = Env::new();
    let (repo, agent, base) = setup(&env);
    // The agent's work.
    std::fs::write(
        agent.join("src/a.rs"),
        "fn a() { todo() }\nfn shared() {}\n",
    )
    .unwrap();
    std::fs::write(agent.join("src/new.rs"), "fn new() {}\n").unwrap();
    std::fs::remove_file(agent.join("gone.txt")).unwrap();
    let snap = snapshot(&env, &agent, "agent: implement a");
    // Meanwhile the user commits to b and leaves c modified but uncommitted.
    std::fs::write(repo.join("b.txt"), "b by the user\n").unwrap();
    git(&repo, &["commit", "-qam", "user work"]);
    std::fs::write(repo.join("c.txt"), "c, uncommitted\n").unwrap();
    let head = text(git(&repo, &["rev-parse", "HEAD"]));
    let before = repo_state(&repo);

    let (code, v) = env.json(&["merge", &snap, "--into", repo.as_str()]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["merged"], true, "{v}");
    assert_eq!(v["base"], base.as_str());
    assert_eq!(v["conflicts"], serde_json::json!([]));
    let branch = format!("cairn/{}", &snap[..12]);
    assert_eq!(v["branch"], branch.as_str());
    let commit = v["commit"].as_str().unwrap();
    assert_eq!(text(git(&repo, &["rev-parse", &branch])), commit);
    assert_eq!(
        text(git(&repo, &["rev-parse", &format!("{commit}^")])),
        head
    );
    let show = |path: &str| text(git(&repo, &["show", &format!("{commit}:{path}")]));
    assert_eq!(show("src/a.rs"), "fn a() { todo() }\nfn shared() {}");
    assert_eq!(show("src/new.rs"), "fn new() {}");
    assert_eq!(show("b.txt"), "b by the user");
    // The user's uncommitted edit is theirs to commit: the branch has HEAD's c.txt.
    assert_eq!(show("c.txt"), "c");
    let files = text(git(&repo, &["ls-tree", "-r", "--name-only", commit]));
    assert!(!files.contains("gone.txt"), "{files}");
    let body = text(git(&repo, &["log", "-1", "--format=%B", commit]));
    assert_eq!(
        body,
        format!("agent: implement a\n\nCairn-Snapshot: {snap}")
    );
    git(&repo, &["fsck", "--strict"]);

    // Only the new branch appeared; HEAD, index and working files are as they were.
    let after = repo_state(&repo);
    let sorted = |refs: &str| {
        let mut lines: Vec<String> = refs.lines().map(str::to_owned).collect();
        lines.sort();
        lines
    };
    let mut expected_refs = sorted(&before.0);
    expected_refs.push(format!("{commit} commit\trefs/heads/{branch}"));
    expected_refs.sort();
    assert_eq!(sorted(&after.0), expected_refs);
    assert_eq!(
        (&after.1, &after.2, &after.3),
        (&before.1, &before.2, &before.3)
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("c.txt")).unwrap(),
        "c, uncommitted\n"
    );

    // The same branch again is refused, naming it; nothing changes.
    let out = env.cairn(&["merge", &snap, "--into", repo.as_str()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains(&branch), "{}", stderr(&out));
    assert_eq!(repo_state(&repo), after);
    // Another branch name and message work.
    let (code, v) = env.json(&[
        "merge",
        &snap,
        "--into",
        repo.as_str(),
        "--branch",
        "agent/one",
        "-m",
        "Implement a",
    ]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["branch"], "agent/one");
    let subject = text(git(&repo, &["log", "-1", "--format=%s", "agent/one"]));
    assert_eq!(subject, "Implement a");
}

#[test]
fn conflicts_are_reported_by_kind_and_leave_the_repository_exactly_as_it_was() {
    let env = Env::new();
    let (repo, agent, _) = setup(&env);
    std::fs::write(
        agent.join("src/a.rs"),
        "fn a() {}\nfn shared() { agent() }\n",
    )
    .unwrap();
    std::fs::write(agent.join("gone.txt"), "the agent edited this\n").unwrap();
    std::fs::write(agent.join("both.txt"), "agent's\n").unwrap();
    let snap = snapshot(&env, &agent, "agent");
    std::fs::write(repo.join("src/a.rs"), "fn a() {}\nfn shared() { user() }\n").unwrap();
    std::fs::remove_file(repo.join("gone.txt")).unwrap();
    std::fs::write(repo.join("both.txt"), "user's\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "user"]);
    let before = repo_state(&repo);
    let bytes = bytes_below(&repo);

    let (code, v) = env.json(&["merge", &snap, "--into", repo.as_str()]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["merged"], false);
    assert_eq!(v["commit"], serde_json::Value::Null);
    assert_eq!(v["branch"], serde_json::Value::Null);
    assert_eq!(
        v["conflicts"],
        serde_json::json!([
            { "path": "both.txt", "kind": "add/add" },
            { "path": "gone.txt", "kind": "modify/delete" },
            { "path": "src/a.rs", "kind": "content" },
        ])
    );
    assert!(
        v["message"].as_str().unwrap().contains(repo.as_str()),
        "{v}"
    );
    assert_eq!(repo_state(&repo), before);
    assert!(bytes_below(&repo) == bytes, "the repository changed");
}

#[test]
fn merges_that_cannot_start_exit_2_naming_what_is_wrong() {
    let env = Env::new();
    let (repo, agent, base) = setup(&env);
    std::fs::write(agent.join("b.txt"), "agent\n").unwrap();
    let snap = snapshot(&env, &agent, "agent");

    // A snapshot with no ancestor from this repository, unless a base is given.
    let stray = env
        .commit(&[("b.txt", b"stray\n")], vec![], "stray")
        .to_string();
    let out = env.cairn(&["merge", &stray, "--into", repo.as_str()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(&stray) && stderr(&out).contains("--base"),
        "{}",
        stderr(&out)
    );
    let (code, v) = env.json(&["merge", &stray, "--into", repo.as_str(), "--base", &base]);
    assert_eq!(code, 0, "{v}");

    // An unknown snapshot, a missing repository.
    let out = env.cairn(&["merge", "abcdef123456", "--into", repo.as_str()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("abcdef123456"), "{}", stderr(&out));
    let missing = env.path().join("missing");
    let out = env.cairn(&["merge", &snap, "--into", missing.as_str()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains(missing.as_str()), "{}", stderr(&out));

    // Not a repository.
    let out = env.cairn(&["merge", &snap, "--into", agent.as_str()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains(agent.as_str()), "{}", stderr(&out));

    // An invalid branch name.
    let out = env.cairn(&["merge", &snap, "--into", repo.as_str(), "--branch", "a..b"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("a..b"), "{}", stderr(&out));

    // A merge in progress.
    let head = text(git(&repo, &["rev-parse", "HEAD"]));
    std::fs::write(repo.join(".git/MERGE_HEAD"), format!("{head}\n")).unwrap();
    let before = repo_state(&repo);
    let out = env.cairn(&["merge", &snap, "--into", repo.as_str()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("in progress"), "{}", stderr(&out));
    assert_eq!(repo_state(&repo), before);
    std::fs::remove_file(repo.join(".git/MERGE_HEAD")).unwrap();

    // An unborn HEAD.
    let empty = env.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    git(&empty, &["init", "-q"]);
    let out = env.cairn(&["merge", &snap, "--into", empty.as_str(), "--base", &base]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("HEAD has no commit"),
        "{}",
        stderr(&out)
    );
}

/// `cairn merge --branch NAME` accepts exactly the names `git check-ref-format --branch`
/// accepts; a refused one exits 2 naming it and leaves the repository byte-identical.
#[test]
fn branch_names_are_accepted_exactly_as_git_accepts_them() {
    let env = Env::new();
    let (repo, agent, _) = setup(&env);
    std::fs::write(agent.join("b.txt"), "agent\n").unwrap();
    let snap = snapshot(&env, &agent, "agent");
    let names = [
        "HEAD",
        "-x",
        "-",
        "a..b",
        "a.lock",
        "a.lock/b",
        "a b",
        "a\tb",
        "a~1",
        "a^b",
        "a:b",
        "a\\b",
        "a*b",
        "a?b",
        "a[b",
        "@",
        "@x",
        "a@",
        "a@{b",
        "refs/heads/x?",
        "",
        "/a",
        "a/",
        "a//b",
        ".a",
        "a/.b",
        "a.",
        "a-",
        "feature/x",
        "x/HEAD",
        "HEAD/x",
        "refs/heads/x",
        "caf\u{e9}",
        "v1.2.3",
        "_",
    ];
    let mut disagreements = Vec::new();
    for name in names {
        let git_accepts = std::process::Command::new("git")
            .args(["-C", repo.as_str(), "check-ref-format", "--branch", name])
            .output()
            .unwrap()
            .status
            .success();
        let before = every_byte_below(&repo);
        // `--branch=NAME`, so that a name starting with `-` reaches cairn.
        let flag = format!("--branch={name}");
        let out = env.cairn(&["merge", &snap, "--into", repo.as_str(), &flag]);
        let code = out.status.code();
        match (git_accepts, code) {
            (true, Some(0)) => {
                let full = format!("refs/heads/{name}");
                let check = std::process::Command::new("git")
                    .args(["-C", repo.as_str(), "rev-parse", "--verify", "-q", &full])
                    .output()
                    .unwrap();
                if !check.status.success() {
                    disagreements.push(format!("{name:?}: no branch {full}"));
                }
                // Git is at ease with what was made: no warning on an ordinary command.
                let head = std::process::Command::new("git")
                    .args(["-C", repo.as_str(), "rev-parse", "HEAD"])
                    .output()
                    .unwrap();
                if !head.status.success() || !head.stderr.is_empty() {
                    disagreements.push(format!(
                        "{name:?}: afterwards git says {}",
                        String::from_utf8_lossy(&head.stderr).trim()
                    ));
                }
            }
            (false, Some(2)) => {
                if !stderr(&out).contains(&format!("{name}:")) {
                    disagreements.push(format!(
                        "{name:?}: the error does not name it: {}",
                        stderr(&out).trim()
                    ));
                }
                if every_byte_below(&repo) != before {
                    disagreements.push(format!("{name:?}: refused, but the repository changed"));
                }
            }
            _ => disagreements.push(format!(
                "{name:?}: git accepts: {git_accepts}, cairn exits {code:?}: {}",
                stderr(&out).trim()
            )),
        }
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));

    // A valid name that cannot coexist with a branch made above (`feature/x`, `x/HEAD`):
    // git's refs are files and folders. Refused naming both, nothing written.
    for (name, existing) in [
        ("feature", "feature/x"),
        ("x", "x/HEAD"),
        ("HEAD/x/y", "HEAD/x"),
    ] {
        let before = every_byte_below(&repo);
        let (code, v) = env.json(&["merge", &snap, "--into", repo.as_str(), "--branch", name]);
        assert_eq!(code, 2, "{name}: {v}");
        assert_eq!(v["error"]["code"], "branch_exists", "{v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("branch {name} ")) && message.contains(existing),
            "{message}"
        );
        assert!(
            every_byte_below(&repo) == before,
            "{name}: the repository changed"
        );
    }
}

/// Every file below `dir` with its bytes (a symlink as its target), `.git` included: what a
/// byte comparison of the repository sees.
fn bytes_below(dir: &Utf8Path) -> Vec<(Utf8PathBuf, Vec<u8>)> {
    walk_bytes(dir, false)
}

/// [`bytes_below`], the object database included: not even an object was written.
pub(crate) fn every_byte_below(dir: &Utf8Path) -> Vec<(Utf8PathBuf, Vec<u8>)> {
    walk_bytes(dir, true)
}

fn walk_bytes(dir: &Utf8Path, objects: bool) -> Vec<(Utf8PathBuf, Vec<u8>)> {
    let mut all = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = Utf8PathBuf::from_path_buf(entry.unwrap().path()).unwrap();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                all.push((path, target.into_os_string().into_encoded_bytes()));
            } else if meta.is_dir() {
                // New loose objects are allowed; nothing else may change.
                if !objects && path.ends_with(".git/objects") {
                    continue;
                }
                stack.push(path);
            } else {
                use std::os::unix::fs::PermissionsExt;
                let mut bytes = std::fs::read(&path).unwrap();
                bytes.extend_from_slice(&meta.permissions().mode().to_le_bytes());
                all.push((path, bytes));
            }
        }
    }
    all.sort();
    all
}

type Edit = fn(&Utf8Path);

/// The merge case matrix: a user edit committed to the repository, an agent edit
/// snapshotted in its worktree, and the conflicts git reports (empty: clean).
#[test]
fn the_merge_matrix_agrees_with_git_merge_tree() {
    use std::os::unix::fs::PermissionsExt;
    fn write(path: Utf8PathBuf, bytes: &[u8]) {
        std::fs::write(path, bytes).unwrap();
    }
    let cases: Vec<(&str, Edit, Edit, serde_json::Value)> = vec![
        (
            "non-overlapping edits",
            |d| write(d.join("b.txt"), b"b by the user\n"),
            |d| write(d.join("c.txt"), b"c by the agent\n"),
            serde_json::json!([]),
        ),
        (
            "exec bit on one side, content on the other",
            |d| {
                std::fs::set_permissions(d.join("b.txt"), std::fs::Permissions::from_mode(0o755))
                    .unwrap()
            },
            |d| write(d.join("c.txt"), b"c by the agent\n"),
            serde_json::json!([]),
        ),
        (
            "symlink retarget",
            |d| write(d.join("c.txt"), b"c by the user\n"),
            |d| {
                std::fs::remove_file(d.join("link")).unwrap();
                std::os::unix::fs::symlink("c.txt", d.join("link")).unwrap();
            },
            serde_json::json!([]),
        ),
        (
            "rename on one side, edit on the other",
            |d| {
                write(
                    d.join("src/a.rs"),
                    b"fn a() {}\nfn shared() {}\nfn user() {}\n",
                )
            },
            |d| std::fs::rename(d.join("src/a.rs"), d.join("src/renamed.rs")).unwrap(),
            serde_json::json!([]),
        ),
        (
            "same line",
            |d| write(d.join("b.txt"), b"user\n"),
            |d| write(d.join("b.txt"), b"agent\n"),
            serde_json::json!([{ "path": "b.txt", "kind": "content" }]),
        ),
        (
            "renamed differently on each side",
            |d| std::fs::rename(d.join("c.txt"), d.join("c-user.txt")).unwrap(),
            |d| std::fs::rename(d.join("c.txt"), d.join("c-agent.txt")).unwrap(),
            serde_json::json!([{ "path": "c-user.txt", "kind": "rename" }]),
        ),
        (
            "binary on both sides",
            |d| write(d.join("blob.bin"), b"\0user"),
            |d| write(d.join("blob.bin"), b"\0agent"),
            serde_json::json!([{ "path": "blob.bin", "kind": "binary" }]),
        ),
        (
            "file against directory",
            |d| write(d.join("c.txt"), b"c by the user\n"),
            |d| {
                std::fs::remove_file(d.join("c.txt")).unwrap();
                std::fs::create_dir(d.join("c.txt")).unwrap();
                write(d.join("c.txt/inner"), b"x\n");
            },
            serde_json::json!([{ "path": "c.txt", "kind": "type" }]),
        ),
    ];
    for (name, user, agent_edit, expected) in cases {
        let env = Env::new();
        let (repo, agent, _) = setup(&env);
        // Not in `setup`'s first commit: a symlink and a binary file, committed, then onboarded.
        std::os::unix::fs::symlink("b.txt", repo.join("link")).unwrap();
        write(repo.join("blob.bin"), b"\0base");
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-qm", "more"]);
        let (code, v) = env.json(&["onboard", repo.as_str()]);
        assert_eq!(code, 0, "{v}");
        let base = v["snapshot"].as_str().unwrap().to_owned();
        std::fs::remove_dir_all(&agent).unwrap();
        let (code, v) = env.json(&["checkout", &base, agent.as_str()]);
        assert_eq!(code, 0, "{name}: {v}");

        // The same agent edit as a git commit in a clone, for git's own merge.
        let clone = env.path().join("clone");
        git(env.path(), &["clone", "-q", repo.as_str(), clone.as_str()]);
        agent_edit(&clone);
        git(&clone, &["add", "-A"]);
        git(&clone, &["commit", "-qm", "agent"]);
        agent_edit(&agent);
        let snap = snapshot(&env, &agent, name);
        user(&repo);
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-qm", "user"]);
        git(&clone, &["fetch", "-q", "origin", "main:user"]);
        let git_merge = std::process::Command::new("git")
            .args([
                "-C",
                clone.as_str(),
                "merge-tree",
                "--write-tree",
                "user",
                "HEAD",
            ])
            .output()
            .unwrap();
        let git_tree = String::from_utf8(git_merge.stdout).unwrap();
        let git_tree = git_tree.lines().next().unwrap().to_owned();

        let before = bytes_below(&repo);
        let (code, v) = env.json(&["merge", &snap, "--into", repo.as_str()]);
        assert_eq!(v["conflicts"], expected, "{name}: {v}");
        if expected == serde_json::json!([]) {
            assert_eq!(code, 0, "{name}: {v}");
            assert!(git_merge.status.success(), "{name}: git found conflicts");
            let commit = v["commit"].as_str().unwrap();
            let tree = text(git(&repo, &["rev-parse", &format!("{commit}^{{tree}}")]));
            assert_eq!(tree, git_tree, "{name}: not git's merge");
            git(&repo, &["fsck", "--strict"]);
        } else {
            assert_eq!(code, 1, "{name}: {v}");
            assert_eq!(
                git_merge.status.code(),
                Some(1),
                "{name}: git merged cleanly"
            );
            assert!(
                bytes_below(&repo) == before,
                "{name}: the repository changed"
            );
        }
    }
}

#[test]
fn a_detached_head_gets_a_branch_whose_parent_is_that_commit() {
    let env = Env::new();
    let (repo, agent, _) = setup(&env);
    std::fs::write(agent.join("b.txt"), "agent\n").unwrap();
    let snap = snapshot(&env, &agent, "agent");
    let head = text(git(&repo, &["rev-parse", "HEAD"]));
    git(&repo, &["checkout", "-q", "--detach"]);
    let (code, v) = env.json(&["merge", &snap, "--into", repo.as_str()]);
    assert_eq!(code, 0, "{v}");
    let commit = v["commit"].as_str().unwrap();
    assert_eq!(
        text(git(&repo, &["rev-parse", &format!("{commit}^")])),
        head
    );
    assert_eq!(text(git(&repo, &["rev-parse", "HEAD"])), head);
}

fn agent_work(agent: &Utf8Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(
        agent.join("src/a.rs"),
        "fn a() { todo() }\nfn shared() {}\n",
    )
    .unwrap();
    std::fs::create_dir_all(agent.join("src/new/deep")).unwrap();
    std::fs::write(agent.join("src/new/deep/x.rs"), "fn x() {}\n").unwrap();
    std::fs::remove_file(agent.join("gone.txt")).unwrap();
    std::fs::set_permissions(agent.join("b.txt"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("a.rs", agent.join("src/link")).unwrap();
}

#[test]
fn checkout_moves_branch_index_and_files_together_keeping_unrelated_edits() {
    let env = Env::new();
    let (repo, agent, _) = setup(&env);
    agent_work(&agent);
    let snap = snapshot(&env, &agent, "agent: implement a");
    let head = text(git(&repo, &["rev-parse", "HEAD"]));
    // The same merge to a branch first: --checkout must commit the same tree.
    let (code, v) = env.json(&["merge", &snap, "--into", repo.as_str()]);
    assert_eq!(code, 0, "{v}");
    let branch_tree = text(git(
        &repo,
        &[
            "rev-parse",
            &format!("{}^{{tree}}", v["commit"].as_str().unwrap()),
        ],
    ));
    // The user's uncommitted edit and untracked file are nowhere the merge goes.
    std::fs::write(repo.join("c.txt"), "c, uncommitted\n").unwrap();
    std::fs::write(repo.join("notes.txt"), "untracked\n").unwrap();

    let (code, v) = env.json(&["merge", &snap, "--into", repo.as_str(), "--checkout"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["merged"], true);
    assert_eq!(v["branch"], "main");
    assert_eq!(v["dirty"], serde_json::json!([]));
    let commit = v["commit"].as_str().unwrap();
    assert_eq!(text(git(&repo, &["rev-parse", "HEAD"])), commit);
    assert_eq!(text(git(&repo, &["rev-parse", "main"])), commit);
    assert_eq!(text(git(&repo, &["rev-parse", "HEAD^"])), head);
    assert_eq!(text(git(&repo, &["rev-parse", "HEAD^{tree}"])), branch_tree);
    let body = text(git(&repo, &["log", "-1", "--format=%B"]));
    assert!(body.ends_with(&format!("Cairn-Snapshot: {snap}")), "{body}");
    // Index and files are the commit, apart from the user's own changes.
    let status = text(git(&repo, &["status", "--porcelain"]));
    assert_eq!(status, "M c.txt\n?? notes.txt");
    assert_eq!(text(git(&repo, &["diff", "--cached", "--name-only"])), "");
    assert_eq!(
        std::fs::read_to_string(repo.join("src/new/deep/x.rs")).unwrap(),
        "fn x() {}\n"
    );
    assert!(!repo.join("gone.txt").exists());
    assert_eq!(
        std::fs::read_link(repo.join("src/link")).unwrap(),
        std::path::Path::new("a.rs")
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(repo.join("b.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111);
    assert_eq!(
        std::fs::read_to_string(repo.join("c.txt")).unwrap(),
        "c, uncommitted\n"
    );
    // The onboarded repository's op log records the merge as a change set of its own.
    let recorded = v["worktree_snapshot"]
        .as_str()
        .expect("recorded in the op log");
    let (_, log) = env.json(&["op", "log", repo.as_str()]);
    let newest = &log["ops"][0];
    assert_eq!(newest["op"], "merge", "{log}");
    assert_eq!(newest["after"], recorded);
    git(&repo, &["fsck", "--strict"]);
    // A fresh clone of the result: nothing left unstaged once the user's edits are gone.
    git(&repo, &["checkout", "-q", "c.txt"]);
    std::fs::remove_file(repo.join("notes.txt")).unwrap();
    assert_eq!(text(git(&repo, &["status", "--porcelain"])), "");
}

#[test]
fn checkout_over_dirty_paths_writes_nothing_and_lists_them() {
    let env = Env::new();
    let (repo, agent, _) = setup(&env);
    agent_work(&agent);
    let snap = snapshot(&env, &agent, "agent");
    // An uncommitted edit where the agent edited, a staged one where it deleted, and an
    // untracked file where it adds.
    std::fs::write(repo.join("src/a.rs"), "fn a() { user() }\nfn shared() {}\n").unwrap();
    std::fs::write(repo.join("gone.txt"), "staged by the user\n").unwrap();
    git(&repo, &["add", "gone.txt"]);
    std::fs::create_dir_all(repo.join("src/new/deep")).unwrap();
    std::fs::write(repo.join("src/new/deep/x.rs"), "the user's own\n").unwrap();
    let before = bytes_below(&repo);

    let (code, v) = env.json(&["merge", &snap, "--into", repo.as_str(), "--checkout"]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["merged"], false);
    assert_eq!(v["commit"], serde_json::Value::Null);
    assert_eq!(
        v["dirty"],
        serde_json::json!(["gone.txt", "src/a.rs", "src/new/deep/x.rs"])
    );
    assert!(
        v["message"].as_str().unwrap().contains("uncommitted"),
        "{v}"
    );
    assert!(bytes_below(&repo) == before, "the repository changed");
}
