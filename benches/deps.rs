//! A new worktree of a real JavaScript project, ready to run its tests: `cairn mount` with
//! the dependency layer attached and `cairn checkout` with it written out, against
//! `cairn checkout --no-deps` + `npm ci` with a warm npm cache; and the disk that many
//! worktrees of it take each way.
//!
//! `cargo bench -p cairn-cli --bench deps` uses the project in `benches/deps/` (express
//! 4.21.2's `package.json` and a lockfile of it: 403 packages, pure JavaScript; see its
//! README) and the machine's `node` and `npm`, which fetch the packages from the npm
//! registry once. Rows, medians of `CAIRN_BENCH_PAIRS` (default 3) rounds run alternately,
//! all with one `cairn serve` holding the store:
//! - ready: `checkout --no-deps` + `npm ci --prefer-offline` vs `mount` vs `checkout`;
//!   then, timed apart, the test runner's first start in each (`node_modules/.bin/mocha
//!   --version`: a mount reads the layer's files from the store then);
//! - disk: `CAIRN_BENCH_MANY` (default 16) mounts vs as many checkouts with the layer
//!   written out, each against one installed `node_modules` (`du`): what the store grew by
//!   since before `deps save` (the layer and every mount's own layer live there) plus
//!   every worktree's own bytes;
//! - the same project on a btrfs file system of its own (a loop image; skipped, saying why,
//!   where one cannot be mounted), where `checkout` clones the layer's files from the
//!   store's unpacked copy: the first checkout (which unpacks it), then ready and the first
//!   `mocha --version` beside the rows above, and time and disk for as many checkouts
//!   (what `btrfs filesystem usage` says is used, after a sync, grew by: the layer, the
//!   unpacked copy and the worktrees; and `btrfs filesystem du` of the worktrees).
#![allow(missing_docs)]

#[path = "harness/mod.rs"]
mod harness;
#[path = "../tests/cli/loop_fs.rs"]
mod loop_fs;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use harness::{Server, cairn, row, run, secs, sh, time};

/// Blocks really allocated under `p`, as `du -s` counts them (a hard-linked file once).
fn disk_used(p: &Path) -> u64 {
    let out = sh(
        &format!("du -s --block-size=1 '{}'", p.display()),
        Path::new("/"),
    );
    out.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

/// `npm ci` in `dir` with the bench's own cache (warm after the first run), nothing but the
/// install: no audit, no funding notice, the registry asked only for what the cache lacks.
fn npm_ci(dir: &Path, cache: &Path) {
    run(Command::new("npm")
        .args([
            "ci",
            "--prefer-offline",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
        ])
        .env("npm_config_cache", cache)
        .env("npm_config_update_notifier", "false")
        .current_dir(dir));
}

/// The worktree is ready to run the project's tests: its test runner starts.
fn assert_ready(dir: &Path) {
    let version = run(Command::new(dir.join("node_modules/.bin/mocha"))
        .arg("--version")
        .current_dir(dir));
    assert!(
        !version.trim().is_empty(),
        "mocha in {} printed no version",
        dir.display()
    );
}

/// The layers an outcome says it attached, as `path` and file count.
fn attached(outcome: &serde_json::Value) -> Vec<(String, u64)> {
    outcome["deps"]
        .as_array()
        .map(|layers| {
            layers
                .iter()
                .map(|l| {
                    (
                        l["path"].as_str().unwrap_or_default().to_owned(),
                        l["files"].as_u64().unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn main() {
    let pairs: usize = harness::number("CAIRN_BENCH_PAIRS", 3);
    let many: usize = harness::number("CAIRN_BENCH_MANY", 16);
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-deps");
    let _ = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "grep ' {w}' /proc/self/mountinfo | cut -d' ' -f5 | xargs -r -n1 umount -l; rm -rf {w}",
            w = work.display()
        ))
        .status();
    std::fs::create_dir_all(&work).unwrap();
    let store = work.join("store");
    let cache = work.join("npm-cache");
    run(Command::new(harness::cairn_binary())
        .arg("--store")
        .arg(&store)
        .arg("init"));

    // The project: its manifest and lockfile (the tree an agent's task starts from).
    let project = work.join("project");
    std::fs::create_dir_all(&project).unwrap();
    let vendored = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../benches/deps");
    for file in ["package.json", "package-lock.json"] {
        std::fs::copy(vendored.join(file), project.join(file)).unwrap();
    }
    let snap = cairn(&store, &["onboard", project.to_str().unwrap()])["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    let s = snap.as_str();

    // One install, which warms the npm cache, saved as the layer.
    let seed = work.join("seed");
    cairn(&store, &["checkout", s, seed.to_str().unwrap()]);
    npm_ci(&seed, &cache);
    assert_ready(&seed);
    let installed = disk_used(&seed.join("node_modules"));
    let installed_files = sh("find node_modules -type f | wc -l", &seed)
        .trim()
        .to_owned();
    let store_before_save = disk_used(&store);
    let saved = time(|| {
        let out = cairn(&store, &["deps", "save", seed.to_str().unwrap()]);
        let layers = out["layers"].as_array().expect("deps save lists layers");
        assert!(
            layers.iter().any(|l| l["path"] == "node_modules"),
            "deps save stored no node_modules layer: {out}"
        );
    });
    let layer_cost = disk_used(&store).saturating_sub(store_before_save);
    println!(
        "express 4.21.2's lockfile: node_modules of {installed_files} files, {} on disk; \
         deps save {} (the store grew {}); {pairs} rounds, load {}",
        mb(installed),
        secs(saved),
        mb(layer_cost),
        harness::load()
    );

    let server = Server::start(&store);
    let (mut peer, mut mount, mut checkout) = (vec![], vec![], vec![]);
    let (mut first_peer, mut first_mount, mut first_checkout) = (vec![], vec![], vec![]);
    for i in 0..pairs {
        let (p, m, c) = (
            work.join(format!("npm{i}")),
            work.join(format!("m{i}")),
            work.join(format!("c{i}")),
        );
        peer.push(time(|| {
            let out = cairn(&store, &["checkout", "--no-deps", s, p.to_str().unwrap()]);
            assert!(attached(&out).is_empty(), "--no-deps attached: {out}");
            npm_ci(&p, &cache);
        }));
        let mut out = serde_json::Value::Null;
        mount.push(time(|| {
            out = cairn(&store, &["mount", s, m.to_str().unwrap()]);
        }));
        assert_eq!(
            attached(&out).len(),
            1,
            "the mount attached no layer: {out}"
        );
        checkout.push(time(|| {
            out = cairn(&store, &["checkout", s, c.to_str().unwrap()]);
        }));
        assert_eq!(
            attached(&out).len(),
            1,
            "the checkout attached no layer: {out}"
        );
        // The test runner's first start: in the mount it reads the layer's files from the
        // store for the first time.
        for (dir, out) in [
            (&p, &mut first_peer),
            (&m, &mut first_mount),
            (&c, &mut first_checkout),
        ] {
            out.push(time(|| assert_ready(dir)));
        }
    }
    println!("\na new worktree ready to run its tests (server running)");
    row(
        "npm ci vs mount vs checkout with layer",
        &[
            ("npm ci", &peer),
            ("mount", &mount),
            ("checkout", &checkout),
        ],
    );
    row(
        "then mocha --version, the first time",
        &[
            ("npm ci", &first_peer),
            ("mount", &first_mount),
            ("checkout", &first_checkout),
        ],
    );
    println!("  (in parentheses: how many times as long the npm ci worktree took)");

    // Disk: many mounts, then as many checkouts with the layer written out.
    let before_mounts = disk_used(&store);
    let mut mounts_time = Duration::ZERO;
    for i in 0..many {
        let dir = work.join(format!("many-m{i}"));
        mounts_time += time(|| {
            cairn(&store, &["mount", s, dir.to_str().unwrap()]);
        });
    }
    for i in 0..many {
        assert_ready(&work.join(format!("many-m{i}")));
    }
    // A mount's own bytes are its copy-on-write layer under the store's mounts/.
    let mounts_disk = layer_cost + disk_used(&store).saturating_sub(before_mounts);
    let before_checkouts = disk_used(&store);
    let mut checkouts_time = Duration::ZERO;
    for i in 0..many {
        let dir = work.join(format!("many-c{i}"));
        checkouts_time += time(|| {
            cairn(&store, &["checkout", s, dir.to_str().unwrap()]);
        });
    }
    let checkouts_own: u64 = (0..many)
        .map(|i| disk_used(&work.join(format!("many-c{i}"))))
        .sum();
    let checkouts_disk =
        layer_cost + disk_used(&store).saturating_sub(before_checkouts) + checkouts_own;
    println!("\n{many} worktrees each way, one after another");
    println!(
        "{:<40}  mounts {:>9}  checkouts {:>9}",
        "total time",
        secs(mounts_time),
        secs(checkouts_time)
    );
    println!(
        "{:<40}  mounts {:>9} ({:.2}x)  checkouts {:>9} ({:.2}x)",
        "disk used (x one installed node_modules)",
        mb(mounts_disk),
        mounts_disk as f64 / installed.max(1) as f64,
        mb(checkouts_disk),
        checkouts_disk as f64 / installed.max(1) as f64,
    );

    for dir in (0..many)
        .map(|i| work.join(format!("many-m{i}")))
        .chain((0..pairs).map(|i| work.join(format!("m{i}"))))
    {
        cairn(&store, &["unmount", dir.to_str().unwrap()]);
    }
    server.stop();

    on_btrfs(
        &Context {
            work: &work,
            vendored: &vendored,
            cache: &cache,
            pairs,
            many,
            installed,
        },
        &[("npm ci", &peer), ("checkout", &checkout)],
        &[("npm ci", &first_peer), ("checkout", &first_checkout)],
    );
    let _ = std::fs::remove_dir_all(&work);
}

/// What the btrfs rows share with the others.
struct Context<'a> {
    work: &'a Path,
    vendored: &'a Path,
    cache: &'a Path,
    pairs: usize,
    many: usize,
    /// One installed `node_modules`, on disk.
    installed: u64,
}

/// Bytes used on the btrfs file system mounted at `mount` (data, and metadata as often as
/// it is kept), once what was written is on disk.
fn btrfs_used(mount: &Path) -> u64 {
    sh(
        "btrfs filesystem sync . >/dev/null && \
         btrfs filesystem usage -b . | awk '$1 == \"Used:\" { print $2; exit }'",
        mount,
    )
    .trim()
    .parse()
    .expect("btrfs filesystem usage prints what is used")
}

/// The files a checkout's outcome says it cloned.
fn cloned(outcome: &serde_json::Value) -> u64 {
    outcome["deps"][0]["cloned"].as_u64().unwrap_or(0)
}

/// The project on a btrfs loop image: its rows beside `ready` and `first_start` (the
/// other ways' times, by label).
fn on_btrfs(at: &Context, ready: &[(&str, &[Duration])], first_start: &[(&str, &[Duration])]) {
    let fs = match loop_fs::LoopFs::new(&at.work.join("btrfs"), "btrfs", 8 << 30) {
        Ok(fs) => fs,
        Err(why) => {
            println!(
                "
the btrfs rows are skipped: {why}"
            );
            return;
        }
    };
    let root = fs.mount.clone();
    let store = root.join("store");
    run(Command::new(harness::cairn_binary())
        .arg("--store")
        .arg(&store)
        .arg("init"));
    let project = root.join("project");
    std::fs::create_dir_all(&project).unwrap();
    for file in ["package.json", "package-lock.json"] {
        std::fs::copy(at.vendored.join(file), project.join(file)).unwrap();
    }
    let snap = cairn(&store, &["onboard", project.to_str().unwrap()])["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    let s = snap.as_str();
    let seed = root.join("seed");
    cairn(&store, &["checkout", s, seed.to_str().unwrap()]);
    npm_ci(&seed, at.cache);
    assert_ready(&seed);
    let before_save = btrfs_used(&root);
    cairn(&store, &["deps", "save", seed.to_str().unwrap()]);
    let layer_cost = btrfs_used(&root).saturating_sub(before_save);

    let server = Server::start(&store);
    let before_first = btrfs_used(&root);
    let mut out = serde_json::Value::Null;
    let first = time(|| {
        out = cairn(
            &store,
            &["checkout", s, root.join("first").to_str().unwrap()],
        );
    });
    let files = attached(&out).first().map_or(0, |(_, files)| *files);
    assert!(cloned(&out) > 0, "the first checkout cloned nothing: {out}");
    let unpacked_cost = btrfs_used(&root).saturating_sub(before_first);
    let (mut checkout, mut first_start_cloned) = (vec![], vec![]);
    for i in 0..at.pairs {
        let dir = root.join(format!("c{i}"));
        checkout.push(time(|| {
            out = cairn(&store, &["checkout", s, dir.to_str().unwrap()]);
        }));
        assert!(cloned(&out) > 0, "the checkout cloned nothing: {out}");
        first_start_cloned.push(time(|| assert_ready(&dir)));
    }
    println!(
        "\non btrfs (a loop image): checkout with the layer cloned from the store's unpacked \
         copy ({} of {files} files cloned; the others are symlinks or hold the root)",
        cloned(&out)
    );
    println!(
        "{:<40}  {} (the store grew {} more: the unpacked copy)",
        "first checkout, which unpacks the layer",
        secs(first),
        mb(unpacked_cost)
    );
    let mut cols = ready.to_vec();
    cols.push(("cloned", checkout.as_slice()));
    row("ready (checkout: ext4, written out)", &cols);
    let mut cols = first_start.to_vec();
    cols.push(("cloned", first_start_cloned.as_slice()));
    row("then mocha --version, the first time", &cols);

    let before_many = btrfs_used(&root);
    let mut many_time = Duration::ZERO;
    for i in 0..at.many {
        let dir = root.join(format!("many/c{i}"));
        many_time += time(|| {
            cairn(&store, &["checkout", s, dir.to_str().unwrap()]);
        });
    }
    for i in 0..at.many {
        assert_ready(&root.join(format!("many/c{i}")));
    }
    let many_cost = btrfs_used(&root).saturating_sub(before_many);
    let disk = layer_cost + unpacked_cost + many_cost;
    let du = sh("btrfs filesystem du -s --raw many | tail -1", &root);
    let du: Vec<u64> = du
        .split_whitespace()
        .take(3)
        .map(|n| n.parse().expect("btrfs filesystem du prints bytes"))
        .collect();
    println!(
        "{:<40}  {}",
        format!("{} checkouts cloned, one after another", at.many),
        secs(many_time)
    );
    println!(
        "{:<40}  {} ({:.2}x one installed node_modules): the layer {}, the unpacked copy {}, \
         the worktrees {}",
        "disk used",
        mb(disk),
        disk as f64 / at.installed.max(1) as f64,
        mb(layer_cost),
        mb(unpacked_cost),
        mb(many_cost)
    );
    println!(
        "{:<40}  total {}, exclusive {}, shared {}",
        "btrfs filesystem du of the worktrees",
        mb(du[0]),
        mb(du[1]),
        mb(du[2])
    );
    server.stop();
    drop(fs);
}
