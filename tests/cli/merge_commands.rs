//! `cairn merge SNAP --into REPO`, verified with the git CLI.

use camino::{Utf8Path, Utf8PathBuf};

use crate::support::{Env, git, stderr};

fn text(out: Vec<u8>) -> String {
    String::from_utf8(out).unwrap().trim().to_owned()
}

/// A repository with one commit, onboarded in place (the base), and an agent worktree
/// checked out from that snapshot.
fn setup(env: &Env) -> (Utf8PathBuf, Utf8PathBuf, String) {
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

fn snapshot(env: &Env, worktree: &Utf8Path, message: &str) -> String {
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
    let mut expected_refs = before.0.clone();
    expected_refs.push('\n');
    expected_refs.push_str(&format!("{commit} commit\trefs/heads/{branch}"));
    let mut refs: Vec<&str> = expected_refs.lines().collect();
    refs.sort();
    assert_eq!(after.0, refs.join("\n"));
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
    assert_eq!(
        std::fs::read_to_string(repo.join("src/a.rs")).unwrap(),
        "fn a() {}\nfn shared() { user() }\n"
    );
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
