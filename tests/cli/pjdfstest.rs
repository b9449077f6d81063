//! pjdfstest (the POSIX file system test suite, its Rust rewrite from crates.io) run whole
//! in a plain directory and in a cairn mount on the same file system, compared case by
//! case. The whole suite takes seconds, so the normal suite runs all of it; it fails if a
//! case listed in `pjdfstest_mount_passes.txt` (what a mount passed when measured) passes in
//! the plain directory but not in the mount. The README's table:
//! `cargo test --test cli pjdfstest -- --nocapture`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use camino::Utf8Path;

use crate::mount_commands::mount;
use crate::support::Env;

const PJDFSTEST: &str = "pjdfstest@0.2.2";

/// The cases a mount passes today (Linux, as root; the README's table), `#` comments aside.
fn mount_passes() -> Vec<&'static str> {
    include_str!("pjdfstest_mount_passes.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// The pjdfstest binary, installed from crates.io under the target directory on first use
/// and reused while the version is the same.
fn pjdfstest() -> PathBuf {
    static INSTALL: Mutex<()> = Mutex::new(());
    let _one_at_a_time = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let root = tmp.join("pjdfstest");
    let bin = root.join("bin/pjdfstest");
    let ready = root.join(format!(".installed-{PJDFSTEST}"));
    if !ready.exists() {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let out = Command::new(cargo)
            .args(["install", "--quiet", "--locked", "--force", PJDFSTEST])
            .arg("--root")
            .arg(&root)
            .arg("--target-dir")
            .arg(tmp.join("pjdfstest-build"))
            .output()
            .unwrap_or_else(|e| panic!("cargo install {PJDFSTEST}: {e}"));
        assert!(
            out.status.success(),
            "cargo install {PJDFSTEST} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(&ready, "").unwrap();
    }
    bin
}

/// How one test case ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Passed,
    Failed,
    Skipped,
}

/// One run: each case's outcome and, for a failure, the first line of its message.
#[derive(Debug, Default)]
struct Run {
    cases: BTreeMap<String, (Outcome, String)>,
}

/// Passed, failed and skipped cases of one group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Tally {
    passed: usize,
    failed: usize,
    skipped: usize,
}

/// The group of a case: the syscall it tests, the first part of its name (`chmod::…`).
fn group_of(case: &str) -> &str {
    case.split("::").next().unwrap_or(case)
}

impl Run {
    fn groups(&self) -> BTreeMap<String, Tally> {
        let mut groups: BTreeMap<String, Tally> = BTreeMap::new();
        for (case, (outcome, _)) in &self.cases {
            let tally = groups.entry(group_of(case).to_owned()).or_default();
            match outcome {
                Outcome::Passed => tally.passed += 1,
                Outcome::Failed => tally.failed += 1,
                Outcome::Skipped => tally.skipped += 1,
            }
        }
        groups
    }

    fn passed(&self) -> usize {
        self.groups().values().map(|t| t.passed).sum()
    }
}

/// Reads pjdfstest's report: a line `<case> ok|FAILED|skipped|…` per case, then for a
/// failure or a skip its message on tab-indented lines.
fn parse(report: &str) -> Run {
    let mut run = Run::default();
    let mut last_unpassed: Option<String> = None;
    for line in report.lines() {
        if let Some(message) = line.strip_prefix('\t') {
            if let Some(case) = last_unpassed.take() {
                run.cases.get_mut(&case).unwrap().1 = message.trim().to_owned();
            }
            continue;
        }
        last_unpassed = None;
        let Some((case, result)) = line.split_once(' ') else {
            continue;
        };
        let outcome = match result.trim() {
            "ok" | "failed as expected" => Outcome::Passed,
            "FAILED" | "PASSED UNEXPECTEDLY" => Outcome::Failed,
            "skipped" => Outcome::Skipped,
            _ => continue,
        };
        if outcome != Outcome::Passed {
            last_unpassed = Some(case.to_owned());
        }
        run.cases.insert(case.to_owned(), (outcome, String::new()));
    }
    run
}

/// Runs every case in a fresh directory under `dir`.
fn run_in(env: &Env, dir: &Utf8Path) -> Run {
    let config = env.path().join("pjdfstest.toml");
    // The users and groups the ownership cases switch to: ones every Debian has.
    std::fs::write(
        &config,
        "[features]\nposix_fallocate = {}\nrename_ctime = {}\nutime_now = {}\nutimensat = {}\n\
         [settings]\nnaptime = 0.01\n\
         [dummy_auth]\nentries = [[\"nobody\", \"nogroup\"], [\"daemon\", \"daemon\"]]\n",
    )
    .unwrap();
    let mut cmd = Command::new(pjdfstest());
    cmd.arg("-c")
        .arg(config.as_str())
        .arg("-p")
        .arg(dir.as_str());
    // A second file system for the EXDEV cases, when the machine has one.
    let other_fs = tempfile::tempdir_in("/dev/shm").ok();
    if let Some(other) = &other_fs {
        cmd.arg("-s").arg(other.path());
    }
    let out = cmd
        .env("NO_COLOR", "1")
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    let run = parse(&report);
    assert!(
        !run.cases.is_empty() && report.contains("Summary"),
        "pjdfstest in {dir} reported nothing readable ({}):\n{report}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    run
}

/// pjdfstest in a plain directory and in a mount of a small snapshot, both under one temp
/// directory; the mount is gone when this returns.
fn plain_and_mount() -> (Run, Run) {
    let env = Env::new();
    let plain = env.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let plain_run = run_in(&env, &plain);

    let snap = env.commit(&[("README", b"hello\n")], vec![], "pjdfstest base");
    let m = env.path().join("m");
    let guard = mount(&env, &snap.to_string(), &m);
    let mount_run = run_in(&env, &m);
    drop(guard);
    (plain_run, mount_run)
}

/// The table, one row per group, and the failures in the mount with their messages.
fn table(plain: &Run, mount: &Run) -> String {
    let plain_groups = plain.groups();
    let mount_groups = mount.groups();
    let mut out = String::from(
        "| group | plain passed | plain failed | plain skipped | mount passed | mount failed | mount skipped |\n\
         |---|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut total = (Tally::default(), Tally::default());
    for (group, p) in &plain_groups {
        let m = mount_groups.get(group).copied().unwrap_or_default();
        out += &format!(
            "| {group} | {} | {} | {} | {} | {} | {} |\n",
            p.passed, p.failed, p.skipped, m.passed, m.failed, m.skipped
        );
        for (sum, t) in [(&mut total.0, p), (&mut total.1, &m)] {
            sum.passed += t.passed;
            sum.failed += t.failed;
            sum.skipped += t.skipped;
        }
    }
    let (p, m) = total;
    out += &format!(
        "| **all** | {} | {} | {} | {} | {} | {} |\n\nmount passes / plain passes: {} / {} = {:.1}%\n",
        p.passed,
        p.failed,
        p.skipped,
        m.passed,
        m.failed,
        m.skipped,
        m.passed,
        p.passed,
        100.0 * m.passed as f64 / p.passed.max(1) as f64
    );
    out += "\nnot passing in the mount, passing in the plain directory:\n";
    for (case, (outcome, message)) in &mount.cases {
        if *outcome != Outcome::Passed
            && plain.cases.get(case).map(|c| c.0) == Some(Outcome::Passed)
        {
            out += &format!("  {case}: {outcome:?} {message}\n");
        }
    }
    out
}

/// Every listed case that passes in the plain directory passes in the mount; returns how
/// many were compared.
fn assert_listed_cases_pass(plain: &Run, mount: &Run) -> usize {
    let mut compared = 0;
    let mut lost = Vec::new();
    for case in mount_passes() {
        let in_plain = plain.cases.get(case).map(|c| c.0);
        assert!(
            in_plain.is_some(),
            "pjdfstest_mount_passes.txt lists {case}, which {PJDFSTEST} does not have"
        );
        if in_plain != Some(Outcome::Passed) {
            continue;
        }
        compared += 1;
        match mount.cases.get(case) {
            Some((Outcome::Passed, _)) => {}
            Some((outcome, message)) => lost.push(format!("{case}: {outcome:?} {message}")),
            None => lost.push(format!("{case}: not run")),
        }
    }
    assert!(
        lost.is_empty(),
        "a mount no longer passes what it passed and the plain directory passes:\n{}\n\n{}",
        lost.join("\n"),
        table(plain, mount)
    );
    compared
}

#[test]
fn a_mount_keeps_passing_the_pjdfstest_cases_it_passed_when_measured() {
    let (plain, mount) = plain_and_mount();
    println!("{}", table(&plain, &mount));
    let listed = mount_passes();
    let newly: Vec<_> = mount
        .cases
        .iter()
        .filter(|(case, c)| c.0 == Outcome::Passed && !listed.contains(&case.as_str()))
        .map(|(case, _)| case.as_str())
        .collect();
    if !newly.is_empty() {
        println!("passing in the mount, not yet in pjdfstest_mount_passes.txt: {newly:?}");
    }
    // Not vacuous: the plain directory passed listed cases and the mount was compared on them.
    assert!(
        assert_listed_cases_pass(&plain, &mount) > 0,
        "no listed case passed in the plain directory\n{}",
        table(&plain, &mount)
    );
}

#[test]
fn the_report_parser_reads_outcomes_and_failure_messages() {
    let run = parse(
        "chmod::basic                      ok\n\
         chown::foo                        FAILED\n\
         \tassertion failed: EPERM\n\
         mkdir::enametoolong           skipped\n\
         \trequires root privileges\n\
         utimensat::y2038                  failed as expected\n\
         \nSummary: 1 failed, 1 skipped, 2 passed\n",
    );
    assert_eq!(
        run.cases.get("chown::foo"),
        Some(&(Outcome::Failed, "assertion failed: EPERM".to_owned()))
    );
    assert_eq!(
        run.cases.get("mkdir::enametoolong"),
        Some(&(Outcome::Skipped, "requires root privileges".to_owned()))
    );
    let groups = run.groups();
    assert_eq!(groups["mkdir"].skipped, 1);
    assert_eq!(groups["utimensat"].passed, 1);
    assert_eq!(groups["chmod"].passed, 1);
    assert_eq!(run.passed(), 2);
}
