//! `cairn verify` against running its check again, `git worktree add`, `cp -a` and `cairn
//! checkout`, in one run, interleaved.
//!
//! `cargo bench -p cairn-cli --bench verify` uses the Linux 6.1 tree from
//! `../shared/bench/linux-corpus.sh` (`CAIRN_BENCH_CORPUS=/some/dir`: any directory), one
//! `cairn serve` holding the store, and a real check, [`CHECK`]. Rows, medians of
//! `CAIRN_BENCH_PAIRS` (default 3) rounds run alternately (`CAIRN_BENCH_ONLY=cached`, `view`
//! or `attempts`, comma-separated, runs only those):
//! - cached: a `verify` answered from the record (the same check of the same tree), by the
//!   command line (its process start included) and by the server's route `/v1/verify`
//!   directly, each `CAIRN_BENCH_CALLS` (default 20) times a round; beside them what a
//!   cache saves: the check run again (`rerun`: a view, the command, its record) and the
//!   command alone in a checkout that is already there;
//! - view: from a `cairn verify` process's start until its command starts (the command
//!   prints the clock, `date +%s%N`, then the file system type of its working directory;
//!   the view is the answer's `view`, or else `fuse` there for a mount, anything else a
//!   checkout), through the server and with no server and FUSE off (`CAIRN_NO_FUSE`: the
//!   command line's own engine, whose view is a checkout), against `git worktree add` and
//!   `cp -a` of the same tree;
//! - attempts: 8 snapshots of the tree, each with an edit of its own, verified at once (8
//!   `cairn verify` processes through the server) against 8 `cairn checkout`s one after the
//!   other, each followed by the same command: total time.
#![allow(missing_docs)]

#[path = "harness/mod.rs"]
mod harness;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use harness::{Server, cairn, corpus, git, median, row, run, secs, sh, time};

/// The check: reads 2,000 C files of the tree, as a test suite would read its sources.
const CHECK: &str = "find . -name '*.c' | head -2000 | xargs cat | wc -c";

/// How many attempts the last row verifies at once.
const ATTEMPTS: usize = 8;

fn check_command() -> [&'static str; 3] {
    ["sh", "-c", CHECK]
}

/// `verify` through the server's route; the answer, which must say the check passed.
fn api_verify(
    client: &cairn_client::Client,
    snapshot: &str,
    check: &str,
    command: &[&str],
    rerun: bool,
) -> serde_json::Value {
    let (status, answer) = client
        .call(
            "verify",
            &serde_json::json!({
                "snapshot": snapshot, "check": check, "command": command, "rerun": rerun,
            }),
        )
        .unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["passed"], true, "{answer}");
    answer
}

/// The recorded stdout of the newest run of `check` of `snapshot`'s tree.
fn logged_stdout(client: &cairn_client::Client, snapshot: &str, check: &str) -> String {
    let (status, answer) = client
        .call(
            "checks",
            &serde_json::json!({ "snapshot": snapshot, "log": check }),
        )
        .unwrap();
    assert_eq!(status, 200, "{answer}");
    answer["log"]["stdout"].as_str().unwrap().to_owned()
}

fn epoch_ns(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).unwrap().as_nanos()
}

/// How long from a clock reading until the command whose first line of output is
/// `date +%s%N` ran.
fn since(asked: SystemTime, out: &str) -> Duration {
    let started: u128 = out.lines().next().unwrap().trim().parse().unwrap();
    Duration::from_nanos(u64::try_from(started - epoch_ns(asked)).unwrap())
}

/// `cairn verify` runs of a command that prints the clock and then the file system type of
/// its working directory: how long until it ran, the whole call, and the view it ran in.
#[derive(Default)]
struct Verified {
    ready: Vec<Duration>,
    total: Vec<Duration>,
    views: Vec<String>,
}

impl Verified {
    /// One verify of `command`; with `checkout`, FUSE is off for it (`CAIRN_NO_FUSE`), so
    /// its view is a checkout wherever it runs.
    fn add(&mut self, store: &Path, snapshot: &str, command: &[&str], checkout: bool) {
        let mut verify = Command::new(harness::cairn_binary());
        verify.arg("--json").arg("--store").arg(store);
        verify.args(["verify", snapshot, "--check", "view-ready", "--rerun", "--"]);
        verify.args(command);
        if checkout {
            verify.env("CAIRN_NO_FUSE", "1");
        }
        let asked = SystemTime::now();
        let mut answer = serde_json::Value::Null;
        self.total.push(time(|| {
            answer = serde_json::from_str(run(&mut verify).trim()).unwrap()
        }));
        let log = cairn(store, &["checks", snapshot, "--log", "view-ready"]);
        let out = log["log"]["stdout"].as_str().unwrap();
        self.ready.push(since(asked, out));
        let file_system = out.lines().nth(1).unwrap_or("unknown").trim();
        // The answer names the view where verify says (`view`); else its file system does.
        let view = match answer["view"].as_str() {
            Some(view) => format!("{view} ({file_system})"),
            None if file_system.contains("fuse") => format!("a mount ({file_system})"),
            None => format!("a checkout ({file_system})"),
        };
        self.views.push(view);
    }

    fn views(&self) -> String {
        let mut views = self.views.clone();
        views.dedup();
        views.join(", ")
    }
}

fn remove_checkout(store: &Path, dir: &Path) {
    cairn(store, &["worktree", "remove", dir.to_str().unwrap()]);
    std::fs::remove_dir_all(dir).unwrap();
}

fn free_bytes(p: &Path) -> u64 {
    let out = sh(
        &format!("df --output=avail -B1 {} | tail -1", p.display()),
        Path::new("/"),
    );
    out.trim().parse().unwrap_or(0)
}

fn selected(name: &str) -> bool {
    match std::env::var("CAIRN_BENCH_ONLY").as_deref() {
        Ok(only) if !only.is_empty() => only.split(',').any(|o| o.trim() == name),
        _ => true,
    }
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let pairs = env_number("CAIRN_BENCH_PAIRS", 3);
    let calls = env_number("CAIRN_BENCH_CALLS", 20);
    let src = corpus();
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-verify");
    let _ = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "grep ' {w}' /proc/self/mountinfo | cut -d' ' -f5 | xargs -r -n1 umount -l; rm -rf {w}",
            w = work.display()
        ))
        .status();
    std::fs::create_dir_all(&work).unwrap();
    let store = work.join("store");
    run(Command::new(harness::cairn_binary())
        .arg("--store")
        .arg(&store)
        .arg("init"));
    let count = sh("find . -type f | wc -l", &src).trim().to_owned();
    println!(
        "corpus {} ({count} files), {pairs} rounds; load average at the start {}",
        src.display(),
        harness::load()
    );
    let snap = cairn(&store, &["onboard", src.to_str().unwrap()])["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    let s = snap.as_str();

    let mut server = Server::start(&store);
    let client = cairn_client::Client::connect(&cairn_client::Client::socket_of(
        camino::Utf8Path::from_path(&store).unwrap(),
    ))
    .unwrap();
    // A checkout of the tree: where the command runs alone, and where the attempts are made.
    let base = work.join("base");
    cairn(&store, &["checkout", s, base.to_str().unwrap()]);

    if selected("cached") {
        let recorded = api_verify(&client, s, "c-bytes", &check_command(), false);
        let bytes = sh(CHECK, &base);
        assert_eq!(
            logged_stdout(&client, s, "c-bytes"),
            bytes,
            "the check read other bytes in its view than in a checkout"
        );
        // The newest run of the check is the answer: this, then each rerun's.
        let mut attestation = recorded["attestation"].clone();
        let mut cli_args = vec!["verify", s, "--check", "c-bytes", "--"];
        cli_args.extend(check_command());
        let mut rerun_view = String::new();
        let (mut cli, mut api, mut again, mut alone, mut ran) =
            (vec![], vec![], vec![], vec![], vec![]);
        for _ in 0..pairs {
            for _ in 0..calls {
                cli.push(time(|| {
                    let answer = cairn(&store, &cli_args);
                    assert_eq!(answer["cached"], true, "{answer}");
                    assert_eq!(answer["attestation"], attestation, "{answer}");
                }));
                api.push(time(|| {
                    let answer = api_verify(&client, s, "c-bytes", &check_command(), false);
                    assert_eq!(answer["cached"], true, "{answer}");
                }));
            }
            again.push(time(|| {
                let answer = api_verify(&client, s, "c-bytes", &check_command(), true);
                assert_eq!(answer["cached"], false, "{answer}");
                attestation = answer["attestation"].clone();
                ran.push(Duration::from_millis(
                    answer["duration_ms"].as_u64().unwrap(),
                ));
                rerun_view = answer["view"].as_str().unwrap_or("not named").to_owned();
            }));
            alone.push(time(|| {
                sh(CHECK, &base);
            }));
        }
        println!(
            "\ncached verify ({pairs} x {calls} calls each) against the check run again \
             (its command alone in the view: {}; view: {rerun_view})",
            secs(median(&ran))
        );
        row(
            "command line: cached vs run again",
            &[("cached", &cli), ("rerun", &again)],
        );
        row(
            "/v1/verify: cached vs run again",
            &[("cached", &api), ("rerun", &again)],
        );
        row(
            "command line cached vs command alone",
            &[("cached", &cli), ("alone", &alone)],
        );
    }

    if selected("view") {
        // A git repository of the same tree, for `git worktree add`.
        let repo = work.join("repo.git");
        git(&work, &["init", "-q", "--bare", repo.to_str().unwrap()]);
        let gitdir = format!("--git-dir={}", repo.display());
        let worktree = format!("--work-tree={}", src.display());
        git(&work, &[&gitdir, &worktree, "add", "-A"]);
        git(&work, &[&gitdir, &worktree, "commit", "-qm", "base"]);
        let command = ["sh", "-c", "date +%s%N; stat -f -c %T ."];
        let (mut served, mut unserved) = (Verified::default(), Verified::default());
        let (mut gitwt, mut copy, mut itself) = (vec![], vec![], vec![]);
        for _ in 0..pairs {
            // What starting the command itself takes, with no verify: the floor of `ready`.
            let asked = SystemTime::now();
            let out = run(Command::new(command[0])
                .args(&command[1..])
                .current_dir(&base));
            itself.push(since(asked, &out));

            served.add(&store, s, &command, false);
            // With no server and no FUSE the command line's engine opens the store itself,
            // and its view is a checkout: the side by side for a mount view.
            server.stop();
            unserved.add(&store, s, &command, true);
            server = Server::start(&store);

            let g = work.join("g");
            gitwt.push(time(|| {
                git(
                    &work,
                    &[
                        &gitdir,
                        "worktree",
                        "add",
                        "-q",
                        "--detach",
                        g.to_str().unwrap(),
                        "HEAD",
                    ],
                );
            }));
            git(
                &work,
                &[
                    &gitdir,
                    "worktree",
                    "remove",
                    "--force",
                    g.to_str().unwrap(),
                ],
            );
            let c = work.join("cp");
            copy.push(time(|| {
                run(Command::new("cp").arg("-a").arg(&src).arg(&c));
            }));
            std::fs::remove_dir_all(&c).unwrap();
        }
        println!(
            "\nview ready: from `cairn verify`'s start until its command ran (served: {}; \
             no server: {})",
            served.views(),
            unserved.views()
        );
        row(
            "served verify's view vs git worktree add",
            &[("view", &served.ready), ("git", &gitwt)],
        );
        row(
            "served verify's view vs cp -a",
            &[("view", &served.ready), ("cp", &copy)],
        );
        row(
            "served vs no server, FUSE off (a checkout)",
            &[("served", &served.ready), ("no server", &unserved.ready)],
        );
        row(
            "whole verify (view, command, record)",
            &[("served", &served.total), ("no server", &unserved.total)],
        );
        row(
            "the command started alone (no verify)",
            &[("alone", &itself)],
        );
    }

    if selected("attempts") {
        // Each attempt: the tree with a line of its own at the end of README.
        let readme = base.join("README");
        let original = std::fs::read(&readme).unwrap();
        let attempts: Vec<String> = (0..ATTEMPTS)
            .map(|i| {
                let mut bytes = original.clone();
                bytes.extend_from_slice(format!("attempt {i}\n").as_bytes());
                std::fs::write(&readme, bytes).unwrap();
                cairn(&store, &["snapshot", base.to_str().unwrap()])["snapshot"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        std::fs::write(&readme, &original).unwrap();
        // Eight views at once are eight checkouts while the view is one.
        let room = harness::disk_usage(&base) * ATTEMPTS as u64 + (15 << 30);
        let free = free_bytes(&work);
        assert!(
            free > room,
            "{free} bytes free: too few for {ATTEMPTS} views at once and 15 GB to spare"
        );
        let (mut parallel, mut sequential) = (vec![], vec![]);
        for _ in 0..pairs {
            parallel.push(time(|| {
                let children: Vec<_> = attempts
                    .iter()
                    .map(|a| {
                        Command::new(harness::cairn_binary())
                            .arg("--json")
                            .arg("--store")
                            .arg(&store)
                            .args(["verify", a, "--check", "c-bytes", "--rerun", "--"])
                            .args(check_command())
                            .stdout(Stdio::piped())
                            .stderr(Stdio::piped())
                            .spawn()
                            .unwrap()
                    })
                    .collect();
                for child in children {
                    let out = child.wait_with_output().unwrap();
                    assert!(
                        out.status.success(),
                        "{}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                    assert_eq!(answer["cached"], false, "{answer}");
                }
            }));
            let dirs: Vec<PathBuf> = (0..ATTEMPTS)
                .map(|i| work.join(format!("seq{i}")))
                .collect();
            sequential.push(time(|| {
                for (a, dir) in attempts.iter().zip(&dirs) {
                    cairn(&store, &["checkout", a, dir.to_str().unwrap()]);
                    sh(CHECK, dir);
                }
            }));
            for dir in &dirs {
                remove_checkout(&store, dir);
            }
        }
        println!("\n{ATTEMPTS} attempts: verified at once vs checked out one by one + the check");
        row(
            "total time",
            &[("verify x8", &parallel), ("checkout+check x8", &sequential)],
        );
    }

    remove_checkout(&store, &base);
    server.stop();
    println!("\nload average at the end {}", harness::load());
    let _ = std::fs::remove_dir_all(&work);
}
