//! `cairn mount` against `cairn checkout` and `git worktree add`, in one run, interleaved.
//!
//! `cargo bench -p cairn-cli --bench mount` uses the Linux 6.1 tree from
//! `../shared/bench/linux-corpus.sh` (`CAIRN_BENCH_CORPUS=/some/dir`: any directory). Rows,
//! medians of `CAIRN_BENCH_PAIRS` (default 3) rounds run alternately, all with one `cairn
//! serve` holding the store (a mount lives there) unless said otherwise:
//! - ready: `cairn mount` vs `cairn checkout` vs `git worktree add`;
//! - snapshot after 10 written files: in a mount, in a checkout (server warm), in a
//!   checkout without a server, vs `git add -A && git commit`; and through the server's
//!   API (no process started per call);
//! - reading every file (`tar c . | wc -c`) cold (page cache dropped) and warm, and a
//!   recursive `lstat` walk (`find . -type f | wc -l`): a mount vs a hydrated checkout;
//! - `CAIRN_BENCH_MANY` (default 16) mounts of one snapshot made at once vs as many
//!   checkouts at once: total time and disk used (fewer checkouts if the disk cannot hold
//!   them, said in the output).
#![allow(missing_docs)]

#[path = "harness/mod.rs"]
mod harness;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use harness::{Server, cairn, corpus, git, row, run, secs, sh, time};

fn drop_caches() {
    let _ = Command::new("sync").status();
    if std::fs::write("/proc/sys/vm/drop_caches", "3").is_err() {
        println!("  (cannot drop the page cache here: 'cold' rows are warm)");
    }
}

fn disk_used(p: &Path) -> u64 {
    // Blocks really allocated (sparse and shared bytes count once per file).
    let out = sh(
        &format!("du -s --block-size=1 {}", p.display()),
        Path::new("/"),
    );
    out.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn free_bytes(p: &Path) -> u64 {
    let out = sh(
        &format!("df --output=avail -B1 {} | tail -1", p.display()),
        Path::new("/"),
    );
    out.trim().parse().unwrap_or(0)
}

fn write_ten(dir: &Path, files: &[String], round: usize) {
    for f in files.iter().take(10) {
        let p = dir.join(f);
        let mut bytes = std::fs::read(&p).unwrap();
        bytes.extend_from_slice(format!("\n/* round {round} */\n").as_bytes());
        std::fs::write(&p, bytes).unwrap();
    }
}

fn main() {
    let pairs: usize = harness::number("CAIRN_BENCH_PAIRS", 3);
    let many: usize = harness::number("CAIRN_BENCH_MANY", 16);
    let src = corpus();
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-mount");
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
    let files: Vec<String> = sh("find . -type f -name '*.c' | sort | head -10", &src)
        .lines()
        .map(|l| l.trim_start_matches("./").to_owned())
        .collect();
    let count = sh("find . -type f | wc -l", &src).trim().to_owned();
    println!("corpus {} ({count} files), {pairs} rounds", src.display());

    let snap = cairn(&store, &["onboard", src.to_str().unwrap()])["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    // git: a repository of the same tree, for `git worktree add`.
    let repo = work.join("repo.git");
    git(&work, &["init", "-q", "--bare", repo.to_str().unwrap()]);
    let gitdir = format!("--git-dir={}", repo.display());
    let worktree = format!("--work-tree={}", src.display());
    git(&work, &[&gitdir, &worktree, "add", "-A"]);
    git(&work, &[&gitdir, &worktree, "commit", "-qm", "base"]);

    let server = Server::start(&store);
    let s = snap.as_str();
    let (mut mount, mut checkout, mut gitwt) = (vec![], vec![], vec![]);
    for i in 0..pairs {
        let (m, c, g) = (
            work.join(format!("m{i}")),
            work.join(format!("c{i}")),
            work.join(format!("g{i}")),
        );
        mount.push(time(|| {
            cairn(&store, &["mount", s, m.to_str().unwrap()]);
        }));
        checkout.push(time(|| {
            cairn(&store, &["checkout", s, c.to_str().unwrap()]);
        }));
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
    }
    println!("\nready (server running)");
    row(
        "mount vs checkout vs git worktree add",
        &[("mount", &mount), ("checkout", &checkout), ("git", &gitwt)],
    );

    // Snapshots after 10 writes: one warm-up each first.
    let (m0, c0, g0) = (work.join("m0"), work.join("c0"), work.join("g0"));
    cairn(&store, &["snapshot", m0.to_str().unwrap()]);
    cairn(&store, &["snapshot", c0.to_str().unwrap()]);
    let (mut sm, mut sc, mut sg) = (vec![], vec![], vec![]);
    for r in 0..pairs {
        write_ten(&m0, &files, r);
        sm.push(time(|| {
            cairn(&store, &["snapshot", m0.to_str().unwrap()]);
        }));
        write_ten(&c0, &files, r);
        sc.push(time(|| {
            cairn(&store, &["snapshot", c0.to_str().unwrap()]);
        }));
        write_ten(&g0, &files, r);
        sg.push(time(|| {
            sh(
                "git add -A && git -c user.name=b -c user.email=b@b commit -qm t",
                &g0,
            );
        }));
    }
    // The same through the server's API (what an agent using `cairn serve` or `cairn mcp`
    // pays: no process to start).
    let client = cairn_client::Client::connect(&cairn_client::Client::socket_of(
        camino::Utf8Path::from_path(&store).unwrap(),
    ))
    .unwrap();
    let (mut am, mut ac) = (vec![], vec![]);
    for r in 0..pairs {
        for (dir, out) in [(&m0, &mut am), (&c0, &mut ac)] {
            write_ten(dir, &files, r + 50);
            out.push(time(|| {
                let (status, _) = client
                    .call("snapshot", &serde_json::json!({ "worktree": dir }))
                    .unwrap();
                assert_eq!(status, 200);
            }));
        }
    }
    println!("\nsnapshot after 10 written files");
    row(
        "mount vs checkout (serve warm) vs git",
        &[("mount", &sm), ("checkout", &sc), ("git", &sg)],
    );
    row(
        "through the API: mount vs checkout",
        &[("mount", &am), ("checkout", &ac)],
    );

    // Reading every file, cold and warm; a walk.
    let (m1, c1) = (
        work.join(format!("m{}", pairs.min(2) - 1)),
        work.join(format!("c{}", pairs.min(2) - 1)),
    );
    let (mut cold_m, mut cold_c, mut warm_m, mut warm_c, mut walk_m, mut walk_c) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let mut bytes = (String::new(), String::new());
    for _ in 0..pairs {
        // Cold: a fresh mount of the snapshot (nothing read yet) and a dropped page cache.
        let fresh = work.join("m-cold");
        cairn(&store, &["mount", s, fresh.to_str().unwrap()]);
        drop_caches();
        cold_m.push(time(|| bytes.0 = sh("tar cf - . | wc -c", &fresh)));
        cairn(&store, &["unmount", fresh.to_str().unwrap()]);
        cairn(&store, &["worktree", "remove", fresh.to_str().unwrap()]);
        let _ = std::fs::remove_dir(&fresh);
        drop_caches();
        cold_c.push(time(|| bytes.1 = sh("tar cf - . | wc -c", &c1)));
        // Warm: read once, then timed (the checkout was just read above).
        sh("tar cf - . | wc -c", &m1);
        warm_m.push(time(|| {
            sh("tar cf - . | wc -c", &m1);
        }));
        warm_c.push(time(|| {
            sh("tar cf - . | wc -c", &c1);
        }));
        walk_m.push(time(|| {
            sh("find . -type f | wc -l", &m1);
        }));
        walk_c.push(time(|| {
            sh("find . -type f | wc -l", &c1);
        }));
    }
    assert_eq!(
        bytes.0, bytes.1,
        "a mount and a checkout hold the same bytes"
    );
    println!("\nreading every file ({} bytes of tar)", bytes.0.trim());
    row(
        "tar cold: mount vs checkout",
        &[("mount", &cold_m), ("checkout", &cold_c)],
    );
    row(
        "tar warm: mount vs checkout",
        &[("mount", &warm_m), ("checkout", &warm_c)],
    );
    row(
        "find -type f: mount vs checkout",
        &[("mount", &walk_m), ("checkout", &walk_c)],
    );

    // Many at once.
    let checkout_bytes = disk_used(&c1);
    let room = free_bytes(&work).saturating_sub(2 << 30) / checkout_bytes.max(1);
    let n_checkouts = many.min(room as usize);
    if n_checkouts < many {
        println!("\n(only {n_checkouts} checkouts fit in the free disk; {many} mounts)");
    }
    let store_before = disk_used(&store);
    let mounts_at_once = time(|| {
        let children: Vec<Child> = (0..many)
            .map(|i| {
                Command::new(harness::cairn_binary())
                    .arg("--store")
                    .arg(&store)
                    .args(["mount", s])
                    .arg(work.join(format!("many-m{i}")))
                    .stdout(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut c in children {
            assert!(c.wait().unwrap().success());
        }
    });
    // What the store folder (the layers, under mounts/) grew by.
    let mounts_disk = disk_used(&store).saturating_sub(store_before);
    let checkouts_at_once = time(|| {
        let children: Vec<Child> = (0..n_checkouts)
            .map(|i| {
                Command::new(harness::cairn_binary())
                    .arg("--store")
                    .arg(&store)
                    .args(["checkout", s])
                    .arg(work.join(format!("many-c{i}")))
                    .stdout(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut c in children {
            assert!(c.wait().unwrap().success());
        }
    });
    let checkouts_disk: u64 = (0..n_checkouts)
        .map(|i| disk_used(&work.join(format!("many-c{i}"))))
        .sum();
    println!("\n{many} mounts at once vs {n_checkouts} checkouts at once");
    println!(
        "{:<40}  mounts {:>9}  checkouts {:>9} ({:.3}x)",
        "total time",
        secs(mounts_at_once),
        secs(checkouts_at_once),
        mounts_at_once.as_secs_f64() / checkouts_at_once.as_secs_f64()
    );
    println!(
        "{:<40}  mounts {:>9}  checkouts {:>9}",
        "disk used",
        format!("{:.1} MB", mounts_disk as f64 / 1e6),
        format!("{:.1} MB", checkouts_disk as f64 / 1e6)
    );

    // Without a server: a checkout's snapshot walks (a mount has no such mode).
    for i in 0..many {
        cairn(
            &store,
            &["unmount", work.join(format!("many-m{i}")).to_str().unwrap()],
        );
    }
    for i in 0..pairs {
        cairn(
            &store,
            &["unmount", work.join(format!("m{i}")).to_str().unwrap()],
        );
    }
    server.stop();
    let (mut nc, mut ng) = (vec![], vec![]);
    for r in 0..pairs {
        write_ten(&c0, &files, r + 100);
        nc.push(time(|| {
            cairn(&store, &["snapshot", c0.to_str().unwrap()]);
        }));
        write_ten(&g0, &files, r + 100);
        ng.push(time(|| {
            sh(
                "git add -A && git -c user.name=b -c user.email=b@b commit -qm t",
                &g0,
            );
        }));
    }
    println!("\nwithout a server");
    row(
        "snapshot after 10 writes: checkout vs git",
        &[("checkout", &nc), ("git", &ng)],
    );
    println!("\n(the mount row above is the one to compare: a mount is always served)");
    let _ = std::fs::remove_dir_all(&work);
}
