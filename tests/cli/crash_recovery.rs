//! SIGKILL at random moments of rollback, rewind-like restores, undo, redo and checkout:
//! after `cairn recover` the worktree is exactly the state before or after, and `fsck` is
//! clean.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use camino::Utf8Path;

use crate::reversible_commands::files;
use crate::support::{Env, Rng, crash_seed, stderr};

fn write_tree(root: &Utf8Path, variant: u32) {
    for d in 0..10 {
        for f in 0..30 {
            let path = root.join(format!("d{d}/f{f}.txt"));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let n = d * 30 + f;
            match variant {
                // State B: 120 modified, 40 deleted, the rest as in A.
                1 if n % 5 == 0 || n % 5 == 1 => {
                    std::fs::write(&path, format!("changed {n}\n").repeat(40)).unwrap()
                }
                1 if n % 15 == 2 => {
                    let _ = std::fs::remove_file(&path);
                }
                _ => std::fs::write(&path, format!("line of file {n}\n").repeat(30)).unwrap(),
            }
        }
    }
    if variant == 1 {
        for n in 0..40 {
            let path = root.join(format!("new/sub{}/n{n}.txt", n % 4));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, format!("new file {n}\n").repeat(50)).unwrap();
        }
    }
}

#[test]
fn sigkill_at_random_moments_then_recover_leaves_before_or_after_and_fsck_clean() {
    let env = Env::new();
    let src = env.path().join("src");
    write_tree(&src, 0);
    let (code, a) = env.json(&["onboard", src.as_str()]);
    assert_eq!(code, 0, "{a}");
    let state_a = files(&src);
    write_tree(&src, 1);
    let (code, b) = env.json(&["snapshot", src.as_str()]);
    assert_eq!(code, 0, "{b}");
    let state_b = files(&src);
    assert_ne!(state_a, state_b);
    for (name, snap) in [("a", &a), ("b", &b)] {
        let out = env.cairn(&["ref", "set", name, snap["snapshot"].as_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let wt = env.path().join("wt");
    let out = env.cairn(&["checkout", "a", wt.as_str()]);
    assert!(out.status.success(), "{}", stderr(&out));

    // How long an uninterrupted switch takes, to spread the kills over it.
    let started = Instant::now();
    for target in ["b", "a"] {
        let out = env.cairn(&["rollback", wt.as_str(), target]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let span = (started.elapsed() / 2).max(Duration::from_millis(5));
    let seed = crash_seed();
    eprintln!("crash test seed {seed} (set CAIRN_CRASH_SEED to replay), span {span:?}");
    let mut rng = Rng(seed);

    let runs = 200;
    let mut current_is_a = true;
    let (mut interrupted, mut recovered) = (0, 0);
    for run in 0..runs {
        let kind = run % 5;
        let (args, dest): (Vec<String>, Option<camino::Utf8PathBuf>) = match kind {
            0..=2 => {
                let to = if current_is_a { "b" } else { "a" };
                (vec!["rollback".into(), wt.to_string(), to.into()], None)
            }
            3 => (vec!["undo".into(), wt.to_string()], None),
            _ => {
                let dest = env.path().join(format!("co{run}"));
                (
                    vec!["checkout".into(), "b".into(), dest.to_string()],
                    Some(dest),
                )
            }
        };
        let mut cmd = env.command();
        cmd.arg("--store")
            .arg(env.store().as_str())
            .args(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut child = cmd.spawn().unwrap();
        let delay = span.as_micros() as u64 * (rng.next() % 1500) / 1000;
        std::thread::sleep(Duration::from_micros(delay));
        let _ = child.kill();
        child.wait().unwrap();

        let target = dest.clone().unwrap_or_else(|| wt.clone());
        // The next command on the worktree notices an interrupted step.
        let (code, status) = env.json(&["status", target.as_str()]);
        if code == 3 && status["error"]["code"] == "interrupted" {
            interrupted += 1;
            let message = status["error"]["message"].as_str().unwrap();
            assert!(message.contains("cairn recover"), "{message}");
        }
        let (code, rec) = env.json(&["recover", target.as_str()]);
        assert_eq!(code, 0, "run {run} ({args:?}): recover failed: {rec}");
        if !rec["recovered"].is_null() {
            recovered += 1;
        }

        match dest {
            None => {
                let now = files(&wt);
                if now == state_a {
                    current_is_a = true;
                } else if now == state_b {
                    current_is_a = false;
                } else {
                    let extra: Vec<_> = now
                        .keys()
                        .filter(|k| !state_a.contains_key(*k) && !state_b.contains_key(*k))
                        .collect();
                    panic!(
                        "run {run} ({args:?}, seed {seed}): worktree is neither state; {} files, unknown paths {extra:?}",
                        now.len()
                    );
                }
            }
            Some(dest) => {
                let now = if dest.exists() {
                    files(&dest)
                } else {
                    BTreeMap::new()
                };
                assert!(
                    now.is_empty() || now == state_b,
                    "run {run} (checkout, seed {seed}): {} of {} files",
                    now.len(),
                    state_b.len()
                );
            }
        }
        let (code, fsck) = env.json(&["fsck"]);
        assert_eq!(code, 0, "run {run} ({args:?}, seed {seed}): {fsck}");
    }
    eprintln!("{interrupted} runs left an interrupted step, {recovered} recovered");
    assert!(
        recovered >= 5,
        "only {recovered} of {runs} kills landed inside a journaled step; the test did not exercise recovery"
    );
    assert_eq!(interrupted, recovered, "every interrupted step was noticed");
}

/// Every file below `dir` whose name says cairn or git left it mid-write.
fn leftovers(dir: &Utf8Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let path = camino::Utf8PathBuf::from_path_buf(e.path()).unwrap();
            let name = e.file_name().into_string().unwrap();
            if name.starts_with(".cairn-merge") || name.ends_with(".lock") {
                out.push(path.to_string());
            }
            if e.file_type().unwrap().is_dir() {
                stack.push(path);
            }
        }
    }
    out
}

#[test]
fn sigkill_during_merge_checkout_then_recover_leaves_the_repository_before_or_after() {
    use crate::support::git;
    let env = Env::new();
    let repo = env.path().join("repo");
    write_tree(&repo, 0);
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "base"]);
    let text = |out: Vec<u8>| String::from_utf8(out).unwrap().trim().to_owned();
    let orig = text(git(&repo, &["rev-parse", "HEAD"]));
    // The repository is imported, not registered: recover must work on any repository.
    let (code, base) = env.json(&["onboard", repo.as_str(), "--git", "HEAD"]);
    assert_eq!(code, 0, "{base}");
    let agent = env.path().join("agent");
    let (code, v) = env.json(&[
        "checkout",
        base["snapshot"].as_str().unwrap(),
        agent.as_str(),
    ]);
    assert_eq!(code, 0, "{v}");
    write_tree(&agent, 1);
    let (code, theirs) = env.json(&["snapshot", agent.as_str(), "-m", "agent's work"]);
    assert_eq!(code, 0, "{theirs}");
    let theirs = theirs["snapshot"].as_str().unwrap().to_owned();
    let before = files(&repo);
    let reset = || {
        git(&repo, &["reset", "-q", "--hard", &orig]);
        git(&repo, &["clean", "-fdxq"]);
        assert_eq!(files(&repo), before);
    };

    // One uninterrupted merge: what "after" is, and how long it takes.
    let merge_args = [
        "merge",
        theirs.as_str(),
        "--into",
        repo.as_str(),
        "--checkout",
    ];
    // (The second one times it: the first also exports the trees into git's objects.)
    let (code, v) = env.json(&merge_args);
    assert_eq!(code, 0, "{v}");
    let merged_tree = text(git(&repo, &["rev-parse", "HEAD^{tree}"]));
    let after = files(&repo);
    assert_ne!(after, before);
    reset();
    let started = Instant::now();
    let (code, v) = env.json(&merge_args);
    let span = started.elapsed().max(Duration::from_millis(5));
    assert_eq!(code, 0, "{v}");
    reset();

    let seed = crash_seed();
    eprintln!("merge crash test seed {seed} (set CAIRN_CRASH_SEED to replay), span {span:?}");
    let mut rng = Rng(seed);
    let runs = 60;
    let (mut recovered, mut finished, mut untouched) = (0, 0, 0);
    for run in 0..runs {
        let mut cmd = env.command();
        cmd.arg("--store")
            .arg(env.store().as_str())
            .args(merge_args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut child = cmd.spawn().unwrap();
        let delay = span.as_micros() as u64 * (rng.next() % 1000) / 1000;
        std::thread::sleep(Duration::from_micros(delay));
        let _ = child.kill();
        child.wait().unwrap();

        let (code, rec) = env.json(&["recover", repo.as_str()]);
        assert_eq!(code, 0, "run {run} (seed {seed}): recover failed: {rec}");
        if rec["recovered"] == "merge --checkout" {
            recovered += 1;
        }
        let left = leftovers(&repo);
        assert!(
            left.is_empty(),
            "run {run} (seed {seed}): left behind {left:?}"
        );
        let status = text(git(
            &repo,
            &["status", "--porcelain", "--untracked-files=all"],
        ));
        assert!(
            status.is_empty(),
            "run {run} (seed {seed}): not clean:\n{status}"
        );
        let head = text(git(&repo, &["rev-parse", "HEAD"]));
        if head == orig {
            untouched += 1;
            assert_eq!(files(&repo), before, "run {run} (seed {seed})");
        } else {
            finished += 1;
            assert_eq!(text(git(&repo, &["rev-parse", "HEAD^"])), orig, "run {run}");
            assert_eq!(text(git(&repo, &["rev-parse", "HEAD^{tree}"])), merged_tree);
            assert!(
                files(&repo) == after,
                "run {run} (seed {seed}): files are not the merge's"
            );
            reset();
        }
        let (code, fsck) = env.json(&["fsck"]);
        assert_eq!(code, 0, "run {run} (seed {seed}): {fsck}");
    }
    eprintln!("{recovered} merges recovered, {finished} ended merged, {untouched} untouched");
    assert!(
        recovered >= 3,
        "only {recovered} of {runs} kills landed inside the journaled step; the test did not exercise recovery"
    );
}
