//! Many agents, one store: the same workload with `cairn serve` and without it (every
//! command opening the store itself, waiting for its lock), side by side; then again with
//! the server killed (SIGKILL) part way.
//!
//! `cargo bench -p cairn-cli --bench load`. Each of `CAIRN_LOAD_AGENTS` (16) agents checks
//! out its own worktree from one snapshot of a generated corpus of `CAIRN_LOAD_FILES`
//! (3,000) files, then runs `CAIRN_LOAD_CYCLES` (50) cycles of: edit 3 files, `snapshot`,
//! `diff` against the base; every 10th cycle a `rollback` to the base or an `undo`. Every
//! step is a `cairn` process, as an agent harness would run it; after a "server went away"
//! error an agent runs `cairn recover` on its worktree. At the end every snapshot id an
//! agent was given must be in the store and `fsck` must be clean.
#![allow(missing_docs)]

#[path = "harness/mod.rs"]
mod harness;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn corpus(dir: &Path, files: usize) {
    for i in 0..files {
        let p = dir.join(format!("src/m{}/f{i}.rs", i % 60));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, harness::text(i as u64, 1500 + (i % 7) * 400)).unwrap();
    }
}

fn cairn(store: &Path, args: &[&str]) -> std::process::Output {
    Command::new(harness::cairn_binary())
        .arg("--store")
        .arg(store)
        .arg("--json")
        .args(args)
        .env("CAIRN_LOCK_TIMEOUT", "600")
        .output()
        .unwrap()
}

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

#[derive(Default)]
struct Tally {
    latencies: BTreeMap<&'static str, Vec<Duration>>,
    failed: Vec<String>,
    /// Clear errors from a server that went away mid-request (the fault run only).
    server_gone: usize,
    /// Steps the server was killed in the middle of, finished by `cairn recover`.
    recovered: Vec<String>,
    snapshots: Vec<String>,
}

fn agent(store: &Path, base: &str, wt: &Path, cycles: usize, id: usize, tally: &Mutex<Tally>) {
    let mut local = Tally::default();
    let mut step = |name: &'static str, args: &[&str], ok_codes: &[i32]| {
        let t = Instant::now();
        let out = cairn(store, args);
        local.latencies.entry(name).or_default().push(t.elapsed());
        let code = out.status.code().unwrap_or(-1);
        let v = json(&out);
        if !ok_codes.contains(&code) {
            if code == 3 && v["error"]["code"] == "server" {
                // What a harness does when cairn went away mid-request: finish whatever
                // step it was in the middle of (nothing, if none), then carry on.
                local.server_gone += 1;
                let recover = || cairn(store, &["recover", wt.to_str().unwrap()]);
                let mut out = recover();
                // A server still dying may take the connection and drop it: try again.
                for _ in 0..10 {
                    if out.status.code() != Some(3) || json(&out)["error"]["code"] != "server" {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                    out = recover();
                }
                let r = json(&out);
                match (out.status.code(), r["recovered"].as_str()) {
                    (Some(0), Some(op)) => local.recovered.push(op.to_owned()),
                    (Some(0), None) => {}
                    (code, _) => local.failed.push(format!(
                        "agent {id} recover after {name}: exit {code:?}: {}{}",
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    )),
                }
            } else {
                local.failed.push(format!(
                    "agent {id} {name}: exit {code}: {}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        v
    };
    step("checkout", &["checkout", base, wt.to_str().unwrap()], &[0]);
    let wt_s = wt.to_str().unwrap();
    for cycle in 0..cycles {
        for k in 0..3 {
            let p = wt.join(format!(
                "src/m{}/f{}.rs",
                (id + k) % 60,
                (cycle * 3 + k) * 60 + (id + k) % 60
            ));
            if let Ok(mut bytes) = std::fs::read(&p) {
                bytes.extend_from_slice(format!("// agent {id} cycle {cycle}\n").as_bytes());
                let _ = std::fs::write(&p, bytes);
            }
        }
        let v = step("snapshot", &["snapshot", wt_s], &[0]);
        if let Some(s) = v["snapshot"].as_str() {
            local.snapshots.push(s.to_owned());
        }
        step("diff", &["diff", base, wt_s], &[0]);
        if cycle % 10 == 9 {
            if (cycle / 10) % 2 == 0 {
                step("rollback", &["rollback", wt_s, base], &[0]);
            } else {
                // A refusal (exit 1) is an answer, not a failure.
                step("undo", &["undo", wt_s], &[0, 1]);
            }
        }
    }
    let mut t = tally.lock().unwrap();
    for (k, v) in local.latencies {
        t.latencies.entry(k).or_default().extend(v);
    }
    t.failed.extend(local.failed);
    t.server_gone += local.server_gone;
    t.recovered.extend(local.recovered);
    t.snapshots.extend(local.snapshots);
}

struct Server(Child);

impl Server {
    fn start(store: &Path) -> Server {
        let child = Command::new(harness::cairn_binary())
            .arg("--store")
            .arg(store)
            .arg("serve")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let socket = camino::Utf8PathBuf::from_path_buf(store.join("serve.sock")).unwrap();
        let t = Instant::now();
        while cairn_client::Client::connect(&socket).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Server(child)
    }

    fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

struct Run {
    label: &'static str,
    wall: Duration,
    tally: Tally,
    missing: usize,
    fsck_clean: bool,
}

fn run(label: &'static str, root: &Path, served: bool, kill_after: Option<Duration>) -> Run {
    let agents = env_or("CAIRN_LOAD_AGENTS", 16);
    let cycles = env_or("CAIRN_LOAD_CYCLES", 50);
    let files = env_or("CAIRN_LOAD_FILES", 3000);
    let dir = root.join(label.replace(' ', "-"));
    let src = dir.join("src-tree");
    corpus(&src, files);
    let store = dir.join("store");
    let base = json(&cairn(&store, &["onboard", src.to_str().unwrap()]))["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    let server = served.then(|| Server::start(&store));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let started = Instant::now();
    let killer = kill_after
        .zip(server.as_ref().map(|s| s.0.id()))
        .map(|(after, pid)| {
            std::thread::spawn(move || {
                std::thread::sleep(after);
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            })
        });
    std::thread::scope(|scope| {
        for id in 0..agents {
            let (store, base, tally) = (&store, &base, &tally);
            let wt = dir.join(format!("agent-{id}"));
            scope.spawn(move || agent(store, base, &wt, cycles, id, tally));
        }
    });
    let wall = started.elapsed();
    if let Some(k) = killer {
        k.join().unwrap();
    }
    match server {
        Some(s) if kill_after.is_none() => s.stop(),
        Some(mut s) => {
            let _ = s.0.wait();
        }
        None => {}
    }
    let tally = Arc::into_inner(tally).unwrap().into_inner().unwrap();
    // Every id handed out is there. After the fault run this goes through a restarted
    // server.
    let restarted = kill_after.map(|_| Server::start(&store));
    let mut missing = 0;
    for chunk in tally.snapshots.chunks(200) {
        for id in chunk {
            let out = cairn(&store, &["show", id]);
            if !out.status.success() {
                missing += 1;
            }
        }
    }
    let fsck_clean = cairn(&store, &["fsck"]).status.success();
    if let Some(s) = restarted {
        s.stop();
    }
    Run {
        label,
        wall,
        tally,
        missing,
        fsck_clean,
    }
}

fn pct(v: &[Duration], p: f64) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let work = tempfile::Builder::new()
        .prefix("cairn-load-")
        .tempdir_in(std::env::var("CAIRN_BENCH_TMP").unwrap_or_else(|_| "/tmp".into()))
        .unwrap();
    let root: PathBuf = work.path().to_path_buf();
    let agents = env_or("CAIRN_LOAD_AGENTS", 16);
    let cycles = env_or("CAIRN_LOAD_CYCLES", 50);
    let files = env_or("CAIRN_LOAD_FILES", 3000);
    eprintln!(
        "{agents} agents x {cycles} cycles on {files} files, in {}",
        root.display()
    );
    let served = run("cairn serve", &root, true, None);
    let direct = run("no server", &root, false, None);
    let kill_at = served.wall / 2;
    let fault = run("server killed", &root, true, Some(kill_at));

    println!(
        "{agents} agents x {cycles} cycles (edit 3 files, snapshot, diff; every 10th: rollback or undo), {files}-file corpus"
    );
    println!();
    println!("| | with `cairn serve` | without (lock waiting) |");
    println!("|---|---|---|");
    let ops = |r: &Run| r.tally.latencies.values().map(Vec::len).sum::<usize>();
    println!(
        "| wall time | {:.1} s | {:.1} s |",
        served.wall.as_secs_f64(),
        direct.wall.as_secs_f64()
    );
    println!(
        "| throughput | {:.0} ops/s | {:.0} ops/s |",
        ops(&served) as f64 / served.wall.as_secs_f64(),
        ops(&direct) as f64 / direct.wall.as_secs_f64()
    );
    for name in ["checkout", "snapshot", "diff", "rollback", "undo"] {
        let (Some(a), Some(b)) = (
            served.tally.latencies.get(name),
            direct.tally.latencies.get(name),
        ) else {
            continue;
        };
        println!(
            "| {name} p50 / p99 | {} / {} | {} / {} |",
            harness::ms(pct(a, 0.5)),
            harness::ms(pct(a, 0.99)),
            harness::ms(pct(b, 0.5)),
            harness::ms(pct(b, 0.99)),
        );
    }
    for r in [&served, &direct] {
        println!(
            "| {}: failed requests / snapshot ids missing / fsck | {} / {} of {} / {} |",
            r.label,
            r.tally.failed.len(),
            r.missing,
            r.tally.snapshots.len(),
            if r.fsck_clean { "clean" } else { "PROBLEMS" }
        );
    }
    println!();
    println!(
        "server killed with SIGKILL after {:.1} s: {} requests ended with the clear 'server went away' error, and the agents' `cairn recover` finished {} interrupted step(s) {:?}; {} other failures; {} acknowledged snapshot ids, {} missing through the restarted server; fsck {}",
        kill_at.as_secs_f64(),
        fault.tally.server_gone,
        fault.tally.recovered.len(),
        fault.tally.recovered,
        fault.tally.failed.len(),
        fault.tally.snapshots.len(),
        fault.missing,
        if fault.fsck_clean {
            "clean"
        } else {
            "PROBLEMS"
        }
    );
    for r in [&served, &direct, &fault] {
        for f in r.tally.failed.iter().take(5) {
            eprintln!("{}: {f}", r.label);
        }
    }
    let ok = served.tally.failed.is_empty()
        && direct.tally.failed.is_empty()
        && fault.tally.failed.is_empty()
        && served.missing + direct.missing + fault.missing == 0
        && served.fsck_clean
        && direct.fsck_clean
        && fault.fsck_clean;
    assert!(ok, "the load test found failures (above)");
}
