//! How cost grows with the tree: cairn against git on generated trees of 10k, 100k and 1M
//! files (~60 bytes each, 1,000 per directory), every row at every size, side by side.
//!
//! `cargo bench -p cairn-cli --bench scale`; `CAIRN_BENCH_FILES=10000,100000` picks the sizes
//! (default 10000,100000,1000000), `CAIRN_BENCH_PAIRS` the cairn/git pairs per row (default
//! 3, run alternately; each figure is the median). Every command runs under GNU time, so
//! each row gives its peak RSS too. Trees are generated under `$TMPDIR`, not checked in.
//! The store is measured after `cairn gc`, as `.git` is after `git gc`, with the bytes per
//! file each table of its database takes. Prints one markdown table per size, then writes
//! the figures to
//! `target/bench-scale.json` and draws `docs/scale.svg` (time, memory and bytes against
//! file count, log scales).
#![allow(missing_docs)]

#[path = "harness/mod.rs"]
mod harness;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use harness::{disk_usage, median};

const FILES_PER_DIR: usize = 1000;

/// One run of a command line under GNU time: wall time and peak RSS.
#[derive(Clone, Copy, Debug, Default)]
struct Cost {
    time: Duration,
    rss_mib: f64,
}

/// Runs `script` with `sh -c` in `dir`, timed here (GNU time's own clock counts in 10 ms
/// steps), under GNU time for the peak RSS (`%M` of the shell and what it waits for: for
/// `a && b`, the larger peak).
fn measure(script: &str, dir: &Path) -> Cost {
    let started = std::time::Instant::now();
    let out = Command::new("/usr/bin/time")
        .args(["-f", "cost %M", "sh", "-c", script])
        .current_dir(dir)
        .stdout(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("/usr/bin/time (apt-get install time): {e}"));
    let time = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{script}: {err}");
    let line = err
        .lines()
        .rev()
        .find(|l| l.starts_with("cost "))
        .unwrap_or_else(|| panic!("{script}: no cost line in {err}"));
    let kib: f64 = line["cost ".len()..].trim().parse().unwrap();
    Cost {
        time,
        rss_mib: kib / 1024.0,
    }
}

fn sh(script: &str, dir: &Path) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const GIT: &str =
    "git -c user.name=bench -c user.email=bench@example.com -c gc.auto=0 -c maintenance.auto=false";

fn cairn_cmd(store: &Path, args: &str) -> String {
    format!(
        "{} --store {} {args}",
        harness::cairn_binary(),
        store.display()
    )
}

/// A tree of `files` files of about 60 bytes, 1,000 to a directory.
fn generate(files: usize) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cairn-bench-scale-{files}"));
    if dir.join(".ready").exists() {
        return dir;
    }
    let _ = std::fs::remove_dir_all(&dir);
    for i in 0..files {
        let sub = dir.join(format!("d{:04}", i / FILES_PER_DIR));
        if i % FILES_PER_DIR == 0 {
            std::fs::create_dir_all(&sub).unwrap();
        }
        let body = format!(
            "// generated file {i}\nconst VALUE_{i}: u64 = {};\n",
            i * 31
        );
        std::fs::write(sub.join(format!("f{i}.rs")), body).unwrap();
    }
    std::fs::write(dir.join(".ready"), "").unwrap();
    dir
}

/// Appends a line to 10 files picked by `round`.
fn change_ten(root: &Path, files: usize, round: usize) {
    for k in 0..10 {
        let i = (round * 7919 + k * 104_729) % files;
        let p = root.join(format!("d{:04}/f{i}.rs", i / FILES_PER_DIR));
        let mut body = std::fs::read(&p).unwrap();
        body.extend_from_slice(format!("// edit {round}\n").as_bytes());
        std::fs::write(&p, body).unwrap();
    }
}

/// One row: cairn's costs, and the peer's if it has one.
#[derive(serde::Serialize)]
struct Row {
    name: &'static str,
    peer: &'static str,
    cairn_ms: f64,
    peer_ms: Option<f64>,
    cairn_rss_mib: f64,
    peer_rss_mib: Option<f64>,
}

fn row(name: &'static str, peer: &'static str, cairn: &[Cost], other: &[Cost]) -> Row {
    let ms = |c: &[Cost]| median(&c.iter().map(|c| c.time).collect::<Vec<_>>()).as_secs_f64() * 1e3;
    let rss = |c: &[Cost]| {
        let mut v: Vec<f64> = c.iter().map(|c| c.rss_mib).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Row {
        name,
        peer,
        cairn_ms: ms(cairn),
        peer_ms: (!other.is_empty()).then(|| ms(other)),
        cairn_rss_mib: rss(cairn),
        peer_rss_mib: (!other.is_empty()).then(|| rss(other)),
    }
}

/// Everything measured at one size.
#[derive(serde::Serialize)]
struct Size {
    files: usize,
    rows: Vec<Row>,
    /// After `cairn gc`.
    store_bytes: u64,
    store_bytes_before_gc: u64,
    /// Bytes of each table of the store's database, after `cairn gc`.
    tables: Vec<(String, u64)>,
    /// After `git gc`.
    git_bytes: u64,
}

fn pairs() -> usize {
    harness::number("CAIRN_BENCH_PAIRS", 3)
}

fn at(files: usize, work: &Path) -> Size {
    let src = generate(files);
    let pairs = pairs();
    let c_dir = work.join("c");
    let g_dir = work.join("g");
    for d in [&c_dir, &g_dir] {
        sh(&format!("cp -a {}/. {}", src.display(), d.display()), work);
    }
    std::fs::remove_file(c_dir.join(".ready")).unwrap();
    std::fs::remove_file(g_dir.join(".ready")).unwrap();
    let store = work.join("store");
    let c = c_dir.display().to_string();
    let mut rows = Vec::new();

    // Onboard / git add -A && commit, from nothing each time.
    let (mut cairn, mut peer) = (Vec::new(), Vec::new());
    for _ in 0..pairs {
        let _ = std::fs::remove_dir_all(&store);
        cairn.push(measure(&cairn_cmd(&store, &format!("onboard {c}")), work));
        let _ = std::fs::remove_dir_all(g_dir.join(".git"));
        sh(&format!("{GIT} init -q"), &g_dir);
        peer.push(measure(
            &format!("{GIT} add -A && {GIT} commit -q -m all"),
            &g_dir,
        ));
    }
    rows.push(row("onboard", "`git add -A && git commit`", &cairn, &peer));

    // Nothing changed: a snapshot (no server) / git status; then cairn status.
    let (mut cairn, mut peer, mut status) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..pairs {
        cairn.push(measure(&cairn_cmd(&store, &format!("snapshot {c}")), work));
        peer.push(measure(&format!("{GIT} status --porcelain"), &g_dir));
        status.push(measure(&cairn_cmd(&store, &format!("status {c}")), work));
    }
    rows.push(row(
        "snapshot, nothing changed (no server)",
        "`git status`",
        &cairn,
        &peer,
    ));
    rows.push(row(
        "status, nothing changed (no server)",
        "`git status`",
        &status,
        &peer,
    ));

    // 10 files changed: a snapshot / git add -A && commit.
    let (mut cairn, mut peer) = (Vec::new(), Vec::new());
    for round in 0..pairs {
        change_ten(&c_dir, files, round);
        cairn.push(measure(&cairn_cmd(&store, &format!("snapshot {c}")), work));
        change_ten(&g_dir, files, round);
        peer.push(measure(
            &format!("{GIT} add -A && {GIT} commit -q -m ten"),
            &g_dir,
        ));
    }
    rows.push(row(
        "snapshot, 10 changed (no server)",
        "`git add -A && git commit`",
        &cairn,
        &peer,
    ));

    // The same with `cairn serve` warm.
    let mut server = serve(&store);
    for _ in 0..2 {
        measure(&cairn_cmd(&store, &format!("snapshot {c}")), work);
    }
    let (mut unchanged, mut changed) = (Vec::new(), Vec::new());
    for round in 0..pairs {
        unchanged.push(measure(&cairn_cmd(&store, &format!("snapshot {c}")), work));
        change_ten(&c_dir, files, round + pairs);
        changed.push(measure(&cairn_cmd(&store, &format!("snapshot {c}")), work));
    }
    let _ = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status();
    let _ = server.wait();
    rows.push(row(
        "served: snapshot, nothing changed",
        "",
        &unchanged,
        &[],
    ));
    rows.push(row("served: snapshot, 10 changed", "", &changed, &[]));

    // Checkout / cp -a of the same tree.
    let head = {
        let out = Command::new(harness::cairn_binary())
            .args([
                "--store",
                &store.display().to_string(),
                "--json",
                "log",
                &c,
                "-n",
                "1",
            ])
            .output()
            .unwrap();
        let log: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        log["snapshots"][0]["id"].as_str().unwrap().to_owned()
    };
    let (mut cairn, mut peer) = (Vec::new(), Vec::new());
    for _ in 0..pairs {
        let dest = work.join("out");
        cairn.push(measure(
            &cairn_cmd(&store, &format!("checkout {head} {}", dest.display())),
            work,
        ));
        sh(
            &cairn_cmd(&store, &format!("worktree remove {}", dest.display())),
            work,
        );
        let _ = std::fs::remove_dir_all(&dest);
        peer.push(measure(
            &format!("cp -a {} {}", src.display(), dest.display()),
            work,
        ));
        std::fs::remove_dir_all(&dest).unwrap();
    }
    rows.push(row("checkout", "`cp -a`", &cairn, &peer));

    // Both packed: git by `git gc`, cairn by `cairn gc` (which also gives back the pages a
    // removed worktree's cache and rewritten records left free inside the file).
    sh(&format!("{GIT} gc -q"), &g_dir);
    let store_bytes_before_gc = disk_usage(&store);
    sh(&cairn_cmd(&store, "gc"), work);
    let size = Size {
        files,
        rows,
        store_bytes: disk_usage(&store),
        store_bytes_before_gc,
        tables: harness::table_bytes(&store),
        git_bytes: disk_usage(&g_dir.join(".git")),
    };
    for d in [&c_dir, &g_dir, &store] {
        let _ = std::fs::remove_dir_all(d);
    }
    size
}

fn serve(store: &Path) -> Child {
    let server = Command::new(harness::cairn_binary())
        .arg("--store")
        .arg(store)
        .arg("serve")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let socket = camino::Utf8PathBuf::from_path_buf(store.join("serve.sock")).unwrap();
    while cairn_client::Client::connect(&socket).is_err() {
        std::thread::sleep(Duration::from_millis(20));
    }
    server
}

fn print(size: &Size) {
    println!("\n#### {} files\n", size.files);
    println!("| row | cairn | peer | peer time | ratio | cairn peak RSS | peer peak RSS |");
    println!("|---|---|---|---|---|---|---|");
    for r in &size.rows {
        let peer =
            |v: Option<f64>, unit: &str| v.map(|v| format!("{v:.1} {unit}")).unwrap_or("—".into());
        let ratio = r
            .peer_ms
            .map(|p| format!("{:.2}", r.cairn_ms / p))
            .unwrap_or("—".into());
        println!(
            "| {} | {:.1} ms | {} | {} | {ratio} | {:.0} MiB | {} |",
            r.name,
            r.cairn_ms,
            if r.peer.is_empty() { "—" } else { r.peer },
            peer(r.peer_ms, "ms"),
            r.cairn_rss_mib,
            peer(r.peer_rss_mib, "MiB"),
        );
    }
    println!(
        "| store on disk after `cairn gc` / `.git` after `git gc` | {:.1} MB | | {:.1} MB | {:.2} | | |",
        size.store_bytes as f64 / 1e6,
        size.git_bytes as f64 / 1e6,
        size.store_bytes as f64 / size.git_bytes as f64
    );
    let per_file = |bytes: u64| bytes as f64 / size.files as f64;
    println!(
        "\nper file: store {:.0} bytes ({:.0} before `cairn gc`), .git {:.0} bytes",
        per_file(size.store_bytes),
        per_file(size.store_bytes_before_gc),
        per_file(size.git_bytes)
    );
    let tables: Vec<String> = size
        .tables
        .iter()
        .filter(|(_, bytes)| per_file(*bytes) >= 0.5)
        .map(|(name, bytes)| format!("{name} {:.0}", per_file(*bytes)))
        .collect();
    println!("by table, bytes per file: {}", tables.join(", "));
}

/// Time, memory and bytes against file count, cairn solid and git dashed, log scales.
fn draw(sizes: &[Size], path: &Path) {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (1200, 420)).into_drawing_area();
    root.fill(&WHITE).unwrap();
    let panels = root.split_evenly((1, 3));
    let files: Vec<f64> = sizes.iter().map(|s| s.files as f64).collect();
    let (lo, hi) = (files[0] * 0.8, files[files.len() - 1] * 1.25);
    type Series = (String, Vec<f64>, bool);
    fn find<'a>(s: &'a Size, name: &str) -> &'a Row {
        s.rows.iter().find(|r| r.name == name).unwrap()
    }
    let mut time: Vec<Series> = Vec::new();
    for (name, label) in [
        ("onboard", "onboard / git add+commit"),
        (
            "snapshot, nothing changed (no server)",
            "snapshot / git status",
        ),
        ("checkout", "checkout / cp -a"),
    ] {
        time.push((
            label.into(),
            sizes.iter().map(|s| find(s, name).cairn_ms / 1e3).collect(),
            false,
        ));
        time.push((
            String::new(),
            sizes
                .iter()
                .map(|s| find(s, name).peer_ms.unwrap() / 1e3)
                .collect(),
            true,
        ));
    }
    let snapshot = |s| find(s, "snapshot, nothing changed (no server)");
    let memory: Vec<Series> = vec![
        (
            "snapshot / git status".into(),
            sizes.iter().map(|s| snapshot(s).cairn_rss_mib).collect(),
            false,
        ),
        (
            String::new(),
            sizes
                .iter()
                .map(|s| snapshot(s).peer_rss_mib.unwrap())
                .collect(),
            true,
        ),
    ];
    let bytes: Vec<Series> = vec![
        (
            "store / .git".into(),
            sizes.iter().map(|s| s.store_bytes as f64 / 1e6).collect(),
            false,
        ),
        (
            String::new(),
            sizes.iter().map(|s| s.git_bytes as f64 / 1e6).collect(),
            true,
        ),
    ];
    let colors = [RED, BLUE, GREEN];
    for (panel, (title, unit, series)) in panels.iter().zip([
        ("time", "seconds", time),
        ("peak memory", "MiB", memory),
        ("bytes on disk", "MB", bytes),
    ]) {
        let values = series.iter().flat_map(|s| s.1.iter().copied());
        let (min, max) = values.fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("{title} (cairn solid, git dashed)"),
                ("sans-serif", 18),
            )
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(55)
            .build_cartesian_2d((lo..hi).log_scale(), (min * 0.7..max * 1.4).log_scale())
            .unwrap();
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .x_labels(4)
            .y_labels(6)
            .x_desc("files")
            .y_desc(unit)
            .x_label_formatter(&|v| format!("{:.0}k", v / 1e3))
            .draw()
            .unwrap();
        for (i, (label, values, dashed)) in series.iter().enumerate() {
            let color = colors[(i / 2) % colors.len()];
            let points: Vec<(f64, f64)> =
                files.iter().copied().zip(values.iter().copied()).collect();
            if *dashed {
                chart
                    .draw_series(DashedLineSeries::new(
                        points.clone(),
                        6,
                        4,
                        color.stroke_width(2),
                    ))
                    .unwrap();
            } else {
                let drawn = chart
                    .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                    .unwrap();
                if !label.is_empty() {
                    drawn.label(label.clone()).legend(move |(x, y)| {
                        PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2))
                    });
                }
            }
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .unwrap();
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .unwrap();
    }
    root.present().unwrap();
}

fn main() {
    let sizes: Vec<usize> = std::env::var("CAIRN_BENCH_FILES")
        .unwrap_or_else(|_| "10000,100000,1000000".into())
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .expect("CAIRN_BENCH_FILES: numbers of files, comma-separated")
        })
        .collect();
    let mut measured = Vec::new();
    for &files in &sizes {
        let work = tempfile::tempdir().unwrap();
        let size = at(files, work.path());
        print(&size);
        measured.push(size);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let json = root.join("target/bench-scale.json");
    std::fs::write(&json, serde_json::to_vec_pretty(&measured).unwrap()).unwrap();
    if measured.len() > 1 {
        let image = root.join("docs/scale.svg");
        draw(&measured, &image);
        println!("\nwrote {} and {}", json.display(), image.display());
    }
}
