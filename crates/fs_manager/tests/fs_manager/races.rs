//! Directories swapped for symlinks while rollback, undo and checkout write: nothing is ever
//! written outside the worktree, whatever the timing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use camino::{Utf8Path, Utf8PathBuf};
use fs_manager::{WorktreeCheckoutOptions, WorktreeOnboardOptions, WorktreeRollbackOptions};

use crate::support::*;

/// Every entry below `dir`, with its bytes (or link target), and the directories.
fn everything(dir: &Utf8Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let path = Utf8PathBuf::from_path_buf(e.path()).unwrap();
            let meta = path.symlink_metadata().unwrap();
            let value = if meta.is_symlink() {
                std::fs::read_link(&path)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes()
            } else if meta.is_dir() {
                stack.push(path.clone());
                b"<dir>".to_vec()
            } else {
                std::fs::read(&path).unwrap()
            };
            out.insert(path.to_string(), value);
        }
    }
    out
}

/// Swaps each of `dirs` (under whatever root `roots` holds now) for a symlink to `target`
/// and back, as fast as it can, until told to stop.
fn racer(
    roots: Arc<std::sync::Mutex<Vec<Utf8PathBuf>>>,
    target: Utf8PathBuf,
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicU64>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let list = roots.lock().unwrap().clone();
            for root in &list {
                for dir in ["d0", "d1", "d1/sub"] {
                    let real = root.join(dir);
                    let away = root.join(format!("{dir}.away"));
                    if std::fs::rename(&real, &away).is_ok() {
                        if std::os::unix::fs::symlink(&target, &real).is_ok() {
                            n += 1;
                            std::thread::yield_now();
                            let _ = std::fs::remove_file(&real);
                        }
                        let _ = std::fs::rename(&away, &real);
                    }
                }
            }
            std::thread::yield_now();
        }
        swaps.store(n, Ordering::Relaxed);
    })
}

#[test]
fn symlinks_swapped_in_during_writes_never_lead_outside_the_root() {
    let env = Env::new();
    let outside = env.path("outside");
    write_tree(
        &outside,
        &[("canary.txt", file("canary\n")), ("d/x.txt", file("x\n"))],
    );
    let canary = everything(&outside);
    let wt = env.path("w");
    let state = |tag: &str| -> Vec<(String, Node)> {
        let mut spec = Vec::new();
        for dir in ["d0", "d1", "d1/sub", "d2"] {
            for f in 0..6 {
                spec.push((
                    format!("{dir}/f{f}.txt"),
                    file(&format!("{tag} {dir} {f}\n")),
                ));
            }
        }
        spec.push((format!("d0/only-{tag}.txt"), file(tag)));
        spec
    };
    let write = |root: &Utf8Path, spec: &[(String, Node)]| {
        let refs: Vec<(&str, Node)> = spec.iter().map(|(p, n)| (p.as_str(), n.clone())).collect();
        write_tree(root, &refs);
    };
    write(&wt, &state("a"));
    let a = env
        .worktrees
        .onboard(&env.store, &wt, &WorktreeOnboardOptions::default())
        .unwrap()
        .snapshot;
    std::fs::remove_file(wt.join("d0/only-a.txt")).unwrap();
    write(&wt, &state("b"));
    let b = env
        .worktrees
        .snapshot(&env.store, &wt, &fs_manager::CaptureOptions::default())
        .unwrap()
        .snapshot;

    let roots = Arc::new(std::sync::Mutex::new(vec![wt.clone()]));
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let handle = racer(roots.clone(), outside.clone(), stop.clone(), swaps.clone());

    // How many operations get through the racer depends on how the two threads are
    // scheduled, so run until enough have succeeded to mean something, within a cap.
    let (min_iterations, max_iterations, min_ok) = (1000, 8000, 150);
    let (mut ok, mut failed, mut iterations) = (0u32, 0u32, 0u32);
    for i in 0..max_iterations {
        if i >= min_iterations && ok >= min_ok {
            break;
        }
        iterations += 1;
        let result: Result<(), String> = match i % 4 {
            0 | 1 => {
                let to = if i % 8 < 4 { a } else { b };
                env.worktrees
                    .rollback(&env.store, &wt, to, &WorktreeRollbackOptions::default())
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
            2 => env
                .worktrees
                .undo(&env.store, &wt)
                .map(drop)
                .map_err(|e| e.to_string()),
            _ => {
                let dest = env.path(&format!("co{i}"));
                roots.lock().unwrap().push(dest.clone());
                let r = env
                    .worktrees
                    .checkout(&env.store, b, &dest, &WorktreeCheckoutOptions::default())
                    .map(drop)
                    .map_err(|e| e.to_string());
                roots.lock().unwrap().retain(|r| r != &dest);
                r
            }
        };
        match result {
            Ok(()) => ok += 1,
            Err(_) => {
                failed += 1;
                // A step cut short by the race is finished (or refused) by recover; either
                // way it must not write outside either.
                let _ = env.worktrees.recover(&env.store, &wt);
            }
        }
        assert_eq!(
            everything(&outside),
            canary,
            "iteration {i}: something was written outside the worktree"
        );
    }
    stop.store(true, Ordering::Relaxed);
    handle.join().unwrap();
    let swaps = swaps.load(Ordering::Relaxed);
    eprintln!(
        "{iterations} operations ({ok} done, {failed} refused or failed) against {swaps} swaps"
    );
    assert!(
        swaps > u64::from(iterations),
        "the racer barely ran: {swaps} swaps"
    );
    assert!(
        ok >= min_ok,
        "too few operations succeeded to mean anything: {ok} of {iterations}"
    );
    assert_eq!(everything(&outside), canary);
}
