//! A remote that stays fast as packs pile up: a push or fetch lists only the indexes
//! named after what its store saw last, finds what a lagging clock named earlier by one
//! full listing, and remote gc repacks small packs so their count stays bounded.

use camino::{Utf8Path, Utf8PathBuf};

use crate::remote_commands::{Machine, RemoteTarget, id_of, tree_of};
use crate::support::stderr;

fn file_target(root: &Utf8Path) -> RemoteTarget {
    RemoteTarget {
        url: format!("file://{}", root.join("remote")),
        endpoint: None,
        env: Vec::new(),
        conditional: true,
    }
}

/// A snapshot of a folder `name` holding `files`; its id.
fn snap(m: &Machine, name: &str, files: &[(&str, String)]) -> String {
    let p = m.dir.join(name);
    std::fs::create_dir_all(&p).unwrap();
    for (file, content) in files {
        std::fs::write(p.join(file), content).unwrap();
    }
    id_of(&m.ok(&["onboard", p.as_str()]), "snapshot")
}

/// Runs `args` logging every request to the remote; its JSON and the keys each listing
/// of `index/` returned, in order.
fn listed(m: &Machine, args: &[&str]) -> (serde_json::Value, Vec<u64>) {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = m
        .command(&all)
        .env("RUST_LOG", "cairn::remote::request=debug")
        .output()
        .unwrap();
    let log = stderr(&out);
    assert!(out.status.success(), "cairn {args:?}: {log}");
    let keys = log
        .lines()
        .filter(|l| l.contains("cairn::remote::request") && l.contains("LIST index/"))
        .map(|l| {
            let (_, tail) = l.rsplit_once("keys=").unwrap();
            let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().unwrap()
        })
        .collect();
    let json = serde_json::from_slice(&out.stdout).unwrap();
    (json, keys)
}

/// Every file under `remote/index`, by its name there (folders and all).
fn index_names(root: &Utf8Path) -> Vec<String> {
    let dir = root.join("remote/index");
    let mut names = Vec::new();
    let mut stack = vec![dir.clone()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = Utf8PathBuf::from_path_buf(entry.unwrap().path()).unwrap();
            if path.is_dir() {
                stack.push(path);
            } else {
                names.push(path.strip_prefix(&dir).unwrap().to_string());
            }
        }
    }
    names.sort();
    names
}

/// Moves the file under `from` named `name` to `to`, in its folders.
fn move_named(from: &Utf8Path, to: &Utf8Path, name: &str) {
    let target = to.join(name);
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::rename(from.join(name), target).unwrap();
}

/// Renames the index `name` as if written `minutes_ago` minutes ago; its new name.
fn age_index(root: &Utf8Path, name: &str, minutes_ago: u64) -> String {
    let (pack, _) = remote::layout::parse_index_name(name).expect("an index name");
    let now = remote::layout::now_millis();
    let renamed = remote::layout::index_name(now - minutes_ago * 60_000, pack);
    let dir = root.join("remote/index");
    let target = dir.join(&renamed);
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::rename(dir.join(name), target).unwrap();
    renamed
}

#[test]
fn a_second_push_and_fetch_list_only_the_indexes_named_since_the_last() {
    let env = crate::support::Env::new();
    let target = file_target(env.path());
    let a = Machine::new(env.path(), "a", Vec::new(), &target);
    let b = Machine::new(env.path(), "b", Vec::new(), &target);
    a.add_remote(&target);
    b.add_remote(&target);
    for i in 0..5 {
        let s = snap(&a, &format!("s{i}"), &[("f", format!("snapshot {i}"))]);
        a.ok(&["push", &s]);
    }
    // The remote as if those pushes were spread over the last hours.
    let old = index_names(env.path());
    assert_eq!(old.len(), 10, "{old:?}");
    for (i, name) in old.iter().enumerate() {
        age_index(env.path(), name, 60 + 20 * i as u64);
    }
    let first = snap(&a, "first", &[("f", "first".to_owned())]);
    a.ok(&["push", &first]);

    // A fresh store lists everything once.
    let (_, keys) = listed(&b, &["pull", &first]);
    assert_eq!(keys, vec![12], "a first listing is a full one");
    // Then each store lists only what was named since (less the margin): a's next push
    // meets its own last push's indexes, b's next fetch those and the new ones.
    let second = snap(&a, "second", &[("f", "second".to_owned())]);
    let (_, keys) = listed(&a, &["push", &second]);
    assert_eq!(keys, vec![2], "a push lists only the recent indexes");
    let (pulled, keys) = listed(&b, &["pull", &second]);
    assert_eq!(
        keys,
        vec![4],
        "a fetch lists only the recent indexes: {pulled}"
    );
    b.ok(&["checkout", &second, "second"]);
    assert_eq!(
        std::fs::read_to_string(b.dir.join("second/f")).unwrap(),
        "second"
    );
}

#[test]
fn a_pack_named_by_a_lagging_clock_is_still_found_by_a_fetch_that_needs_it() {
    let env = crate::support::Env::new();
    let target = file_target(env.path());
    let a = Machine::new(env.path(), "a", Vec::new(), &target);
    let b = Machine::new(env.path(), "b", Vec::new(), &target);
    a.add_remote(&target);
    b.add_remote(&target);
    let first = snap(&a, "first", &[("f", "first".to_owned())]);
    a.ok(&["push", &first]);
    b.ok(&["pull", &first]);

    // A pushes from a machine whose clock lags by two hours.
    let before = index_names(env.path());
    let late = snap(
        &a,
        "late",
        &[("f", "late".to_owned()), ("g", "more".to_owned())],
    );
    a.ok(&["push", &late]);
    for name in index_names(env.path()) {
        if !before.contains(&name) {
            age_index(env.path(), &name, 120);
        }
    }
    // b's listing starts after what it saw less the margin (first's two indexes): it
    // misses late's, then lists whole.
    let (_, keys) = listed(&b, &["pull", &late]);
    assert_eq!(keys, vec![2, 4], "an incremental listing, then a full one");
    b.ok(&["checkout", &late, "late"]);
    assert_eq!(tree_of(&b.dir.join("late")), tree_of(&a.dir.join("late")));
}

/// `n` snapshots pushed by a, each kept by a ref: `2n` small packs.
fn small_pushes(a: &Machine, n: usize) -> Vec<(String, Utf8PathBuf)> {
    (0..n)
        .map(|i| {
            let name = format!("s{i}");
            let s = snap(
                a,
                &name,
                &[("f", format!("file {i}")), ("shared", "same".repeat(500))],
            );
            a.ok(&["ref", "set", &format!("{name}@origin"), &s]);
            (s, a.dir.join(name))
        })
        .collect()
}

/// Two hours pass for remote gc: every pack and condemnation on the remote is that much
/// older (`--grace` counts hours).
fn two_hours_pass(root: &Utf8Path) {
    let earlier = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    for entry in std::fs::read_dir(root.join("remote/packs")).unwrap() {
        let file = std::fs::File::options()
            .write(true)
            .open(entry.unwrap().path())
            .unwrap();
        file.set_modified(earlier).unwrap();
    }
    let Ok(records) = std::fs::read_dir(root.join("remote/gc")) else {
        return;
    };
    for entry in records {
        let path = entry.unwrap().path();
        let mut record: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        record["at"] = (record["at"].as_i64().unwrap() - 7200).into();
        std::fs::write(&path, serde_json::to_vec(&record).unwrap()).unwrap();
    }
}

fn packs(root: &Utf8Path) -> usize {
    std::fs::read_dir(root.join("remote/packs"))
        .unwrap()
        .count()
}

/// Every snapshot, checked out on a fresh machine, is byte-identical to its source.
fn all_whole(env: &Utf8Path, name: &str, target: &RemoteTarget, snaps: &[(String, Utf8PathBuf)]) {
    let c = Machine::new(env, name, Vec::new(), target);
    c.add_remote(target);
    for (i, (s, source)) in snaps.iter().enumerate() {
        let out = format!("out{i}");
        c.ok(&["checkout", s, &out]);
        assert_eq!(tree_of(&c.dir.join(&out)), tree_of(source), "{s}");
    }
}

#[test]
fn remote_gc_repacks_small_packs_and_every_snapshot_stays_whole() {
    let env = crate::support::Env::new();
    let target = file_target(env.path());
    let a = Machine::new(env.path(), "a", Vec::new(), &target);
    a.add_remote(&target);
    let snaps = small_pushes(&a, 17);
    assert_eq!(packs(env.path()), 34);

    let dry = a.ok(&["gc", "--remote", "origin", "--grace", "0", "--dry-run"]);
    assert_eq!(dry["remote"]["packs_repacked"], 34, "{dry}");
    assert_eq!(packs(env.path()), 34, "a dry run writes nothing");
    let gc = a.ok(&["gc", "--remote", "origin", "--grace", "0"]);
    assert_eq!(gc["remote"]["packs_repacked"], 34, "{gc}");
    assert_eq!(gc["remote"]["packs_written"], 1, "{gc}");
    // The originals are condemned, not deleted: the next gc deletes them.
    assert_eq!(packs(env.path()), 35);
    let next = a.ok(&["gc", "--remote", "origin", "--grace", "0"]);
    assert_eq!(next["remote"]["packs_removed"], 34, "{next}");
    assert_eq!(next["remote"]["packs_repacked"], 0, "{next}");
    assert_eq!(packs(env.path()), 1);
    assert_eq!(index_names(env.path()).len(), 1);
    all_whole(env.path(), "c", &target, &snaps);
    // a's own store, which cached the old indexes, pulls whole too.
    a.ok(&["pull"]);
}

#[test]
fn a_push_racing_the_repack_is_never_cut() {
    let env = crate::support::Env::new();
    let target = file_target(env.path());
    let a = Machine::new(env.path(), "a", Vec::new(), &target);
    a.add_remote(&target);
    let mut snaps = small_pushes(&a, 17);
    two_hours_pass(env.path());

    // A push counting on what the small packs hold, caught between its catalog read and
    // its last index: its packs are there, unindexed, while the gc runs.
    let before = index_names(env.path());
    let racer = snap(
        &a,
        "racer",
        &[("shared", "same".repeat(500)), ("new", "new".to_owned())],
    );
    a.ok(&["push", &racer]);
    let held = env.path().join("held");
    let index = env.path().join("remote/index");
    let racers: Vec<String> = index_names(env.path())
        .into_iter()
        .filter(|name| !before.contains(name))
        .collect();
    for name in &racers {
        move_named(&index, &held, name);
    }
    let pin = env.path().join("remote/pins").join(&racer);
    let pin_bytes = std::fs::read(&pin).ok();
    let _ = std::fs::remove_file(&pin);
    let gc = a.ok(&["gc", "--remote", "origin", "--grace", "1"]);
    assert_eq!(gc["remote"]["packs_repacked"], 34, "{gc}");
    assert_eq!(
        gc["remote"]["packs_condemned"], 2,
        "the racer's, unindexed: {gc}"
    );
    assert_eq!(gc["remote"]["packs_removed"], 0, "{gc}");

    // The push ends: its indexes and pin land.
    for name in &racers {
        move_named(&held, &index, name);
    }
    if let Some(bytes) = pin_bytes {
        std::fs::write(&pin, bytes).unwrap();
    }
    a.ok(&["ref", "set", "racer@origin", &racer]);
    two_hours_pass(env.path());
    let next = a.ok(&["gc", "--remote", "origin", "--grace", "1"]);
    assert_eq!(next["remote"]["packs_removed"], 34, "{next}");
    assert_eq!(next["remote"]["packs_rescued"], 2, "{next}");
    snaps.push((racer, a.dir.join("racer")));
    all_whole(env.path(), "c", &target, &snaps);
}

#[test]
fn a_repack_killed_at_any_point_leaves_the_remote_whole() {
    let env = crate::support::Env::new();
    let target = file_target(env.path());
    let a = Machine::new(env.path(), "a", Vec::new(), &target);
    a.add_remote(&target);
    let snaps = small_pushes(&a, 17);
    for delay_ms in [5, 20, 40, 80, 160] {
        let mut child = a
            .command(&["--json", "gc", "--remote", "origin", "--grace", "0"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        all_whole(env.path(), &format!("c{delay_ms}"), &target, &snaps);
    }
    a.ok(&["gc", "--remote", "origin", "--grace", "0"]);
    a.ok(&["gc", "--remote", "origin", "--grace", "0"]);
    assert!(packs(env.path()) < 34, "{}", packs(env.path()));
    all_whole(env.path(), "cend", &target, &snaps);
}

#[test]
fn a_push_after_a_gc_deleted_what_its_store_cached_sends_it_again() {
    let env = crate::support::Env::new();
    let target = file_target(env.path());
    let a = Machine::new(env.path(), "a", Vec::new(), &target);
    let b = Machine::new(env.path(), "b", Vec::new(), &target);
    a.add_remote(&target);
    b.add_remote(&target);
    let dropped = snap(&a, "d", &[("x", "kept by nobody".repeat(50))]);
    a.ok(&["push", &dropped]);
    a.ok(&["ref", "rm", &format!("{dropped}@origin")]);
    // b reads the remote's indexes (and caches them), then a gc deletes those packs.
    let work = b.dir.join("work");
    b.ok(&["checkout", &dropped, work.as_str()]);
    let gc = a.ok(&["gc", "--remote", "origin", "--grace", "0"]);
    assert_eq!(gc["remote"]["packs_removed"], 2, "{gc}");

    // b's next push must not count on what its cache still names.
    std::fs::write(work.join("y"), "new").unwrap();
    let kept = id_of(&b.ok(&["snapshot", work.as_str(), "-m", "y"]), "snapshot");
    let pushed = b.ok(&["push", &kept]);
    assert!(pushed["objects_sent"].as_u64() >= Some(4), "{pushed}");
    let c = Machine::new(env.path(), "c", Vec::new(), &target);
    c.add_remote(&target);
    c.ok(&["checkout", &kept, "out"]);
    assert_eq!(tree_of(&c.dir.join("out")), tree_of(&work));
}

/// Runs `args` on `m` logging its requests: each request's verb and key, in the order
/// sent.
fn requests(m: &Machine, args: &[&str]) -> Vec<(String, String)> {
    request_log(m, args)
        .iter()
        .filter_map(|l| {
            let (_, tail) = l.split_once(": remote origin: ")?;
            let (op, tail) = tail.split_once(' ')?;
            let key = tail.split_whitespace().next()?;
            Some((op.to_owned(), key.to_owned()))
        })
        .collect()
}

/// Runs `args` on `m`, which must succeed: the lines of its request log.
fn request_log(m: &Machine, args: &[&str]) -> Vec<String> {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = m
        .command(&all)
        .env("RUST_LOG", "cairn::remote::request=debug")
        .output()
        .unwrap();
    let log = stderr(&out);
    assert!(out.status.success(), "cairn {args:?}: {log}");
    log.lines()
        .filter(|l| l.contains("cairn::remote::request"))
        .map(str::to_owned)
        .collect()
}

/// Runs `args` on `m`: the keys it wrote (`true`) and deleted (`false`), in the order it
/// sent them.
fn writes(m: &Machine, args: &[&str]) -> Vec<(bool, String)> {
    requests(m, args)
        .into_iter()
        .filter_map(|(op, key)| match op.as_str() {
            "PUT" => Some((true, key)),
            "DELETE" => Some((false, key)),
            _ => None,
        })
        .collect()
}

/// How many records under `gc/` running `args` on `m` read.
fn gc_records_read(m: &Machine, args: &[&str]) -> usize {
    requests(m, args)
        .iter()
        .filter(|(op, key)| op == "GET" && key.starts_with("gc/"))
        .count()
}

fn copy_tree(from: &Utf8Path, to: &Utf8Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&from.join(&name), &to.join(&name));
        } else {
            std::fs::copy(entry.path(), to.join(&name)).unwrap();
        }
    }
}

/// The remote as a run that made `ops` left it when cut after the first `done` of them:
/// the remote as it was before the run (`before`), those writes taken from what the
/// whole run left (`after`; a run deletes nothing it wrote) and those deletions made.
fn cut_after(
    root: &Utf8Path,
    before: &Utf8Path,
    after: &Utf8Path,
    ops: &[(bool, String)],
    done: usize,
) {
    let remote = root.join("remote");
    std::fs::remove_dir_all(&remote).unwrap();
    copy_tree(before, &remote);
    for (wrote, key) in &ops[..done] {
        let at = remote.join(key);
        if *wrote {
            std::fs::create_dir_all(at.parent().unwrap()).unwrap();
            std::fs::copy(after.join(key), &at).unwrap();
        } else {
            let _ = std::fs::remove_file(&at);
        }
    }
}

#[test]
fn a_gc_cut_after_any_of_its_writes_leaves_a_remote_the_next_gcs_keep_whole() {
    let env = crate::support::Env::new();
    let target = file_target(env.path());
    let a = Machine::new(env.path(), "a", Vec::new(), &target);
    a.add_remote(&target);
    let snaps = small_pushes(&a, 17);
    let gc = ["gc", "--remote", "origin", "--grace", "0"];
    // The first gc repacks (and condemns), the second deletes: each is cut after each of
    // its writes in turn, then two more gcs run on what it left.
    for run in 0..2 {
        let before = env.path().join(format!("before{run}"));
        let after = env.path().join(format!("after{run}"));
        copy_tree(&env.path().join("remote"), &before);
        let ops = writes(&a, &gc);
        assert!(
            ops.iter().any(|(w, k)| *w && k.starts_with("packs/")) || run == 1,
            "{ops:?}"
        );
        copy_tree(&env.path().join("remote"), &after);
        // The second run's deletions go many at once: a few cut points among them.
        let points: Vec<usize> = if run == 0 {
            (0..ops.len()).collect()
        } else {
            vec![0, 1, 2, 3, ops.len() / 2, ops.len() - 1]
        };
        for done in points {
            cut_after(env.path(), &before, &after, &ops, done);
            let what = format!("run {run} cut after {done} of {ops:?}");
            all_whole(env.path(), &format!("c{run}-{done}"), &target, &snaps);
            for _ in 0..2 {
                let (code, out) = a.json(&gc);
                assert_eq!(code, 0, "{what}: {out}");
            }
            all_whole(env.path(), &format!("d{run}-{done}"), &target, &snaps);
            assert!(packs(env.path()) < 34, "{what}: {}", packs(env.path()));
        }
        cut_after(env.path(), &before, &after, &ops, ops.len());
    }
}

#[test]
fn a_fetch_killed_while_its_store_records_the_indexes_leaves_every_object_found() {
    let env = crate::support::Env::new();
    let target = file_target(env.path());
    let a = Machine::new(env.path(), "a", Vec::new(), &target);
    a.add_remote(&target);
    let snaps = small_pushes(&a, 17);
    let b = Machine::new(env.path(), "b", Vec::new(), &target);
    b.add_remote(&target);
    // Killed at points through its sync (one transaction writes the cached indexes and
    // where their objects are), then again: each time, what it cached it locates.
    let mut killed = 0;
    for (i, delay_ms) in [1, 3, 6, 10, 20, 40].into_iter().enumerate() {
        let mut child = b
            .command(&["--json", "pull", &snaps[i].0])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        killed += usize::from(child.try_wait().unwrap().is_none());
        let _ = child.kill();
        let _ = child.wait();
        let out = format!("out{i}");
        b.ok(&["pull", &snaps[i].0]);
        b.ok(&["checkout", &snaps[i].0, &out]);
        assert_eq!(tree_of(&b.dir.join(&out)), tree_of(&snaps[i].1));
    }
    assert!(killed > 0, "no pull was still running when killed");
    for (i, (s, source)) in snaps.iter().enumerate().skip(6) {
        let out = format!("out{i}");
        b.ok(&["pull", s]);
        b.ok(&["checkout", s, &out]);
        assert_eq!(tree_of(&b.dir.join(&out)), tree_of(source), "{s}");
    }
}

#[test]
fn a_store_reads_the_gc_records_again_only_when_their_keys_change() {
    let env = crate::support::Env::new();
    let target = file_target(env.path());
    let a = Machine::new(env.path(), "a", Vec::new(), &target);
    let b = Machine::new(env.path(), "b", Vec::new(), &target);
    a.add_remote(&target);
    b.add_remote(&target);
    let snaps = small_pushes(&a, 17);
    let gc = ["gc", "--remote", "origin", "--grace", "0"];
    let repacked = a.ok(&gc);
    assert_eq!(repacked["remote"]["packs_repacked"], 34, "{repacked}");

    // The record condemning the 34 is read once by each store, then kept in it.
    assert_eq!(gc_records_read(&b, &["pull", &snaps[0].0]), 1);
    assert_eq!(gc_records_read(&b, &["pull", &snaps[1].0]), 0);
    let new = snap(&a, "new", &[("f", "new".to_owned())]);
    assert_eq!(gc_records_read(&a, &["push", &new]), 1);
    let newer = snap(&a, "newer", &[("f", "newer".to_owned())]);
    assert_eq!(gc_records_read(&a, &["push", &newer]), 0);
    // What the store kept still says what is condemned: b's push counts on none of it.
    let work = b.dir.join("work");
    b.ok(&["checkout", &snaps[2].0, work.as_str()]);
    std::fs::write(work.join("g"), "b's").unwrap();
    let mine = id_of(&b.ok(&["snapshot", work.as_str(), "-m", "g"]), "snapshot");
    assert_eq!(gc_records_read(&b, &["push", &mine]), 0);

    // A gc writes new records: each store reads them on its next sync.
    let removed = a.ok(&gc);
    assert_eq!(removed["remote"]["packs_removed"], 34, "{removed}");
    assert_eq!(gc_records_read(&b, &["pull", &newer]), 1);
    let c = Machine::new(env.path(), "c", Vec::new(), &target);
    c.add_remote(&target);
    c.ok(&["checkout", &mine, "out"]);
    assert_eq!(tree_of(&c.dir.join("out")), tree_of(&work));
    all_whole(env.path(), "d", &target, &snaps);
}

/// The names each listing of `index/` read from the folder remote, running `args` on `m`.
fn names_read(m: &Machine, args: &[&str]) -> Vec<u64> {
    request_log(m, args)
        .iter()
        .filter(|l| l.contains("LIST index/"))
        .map(|l| {
            let (_, tail) = l.split_once("read=Some(").expect("a folder's listing");
            let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().unwrap()
        })
        .collect()
}

#[test]
fn a_listing_from_the_mark_reads_only_the_folders_of_indexes_named_since() {
    let env = crate::support::Env::new();
    let target = file_target(env.path());
    let a = Machine::new(env.path(), "a", Vec::new(), &target);
    a.add_remote(&target);
    for i in 0..20 {
        let s = snap(&a, &format!("s{i}"), &[("f", format!("snapshot {i}"))]);
        a.ok(&["push", &s]);
    }
    // Forty indexes, as if pushed two days ago, a minute apart.
    let old = index_names(env.path());
    assert_eq!(old.len(), 40, "{old:?}");
    for (i, name) in old.iter().enumerate() {
        age_index(env.path(), name, 2 * 24 * 60 + i as u64);
    }
    let first = snap(&a, "first", &[("f", "first".to_owned())]);
    a.ok(&["push", &first]);
    // The next push lists from its mark: the names of the day folders, of today's
    // folders of minutes, and of the files of the last few minutes; not the forty.
    let second = snap(&a, "second", &[("f", "second".to_owned())]);
    let read = names_read(&a, &["push", &second]);
    assert_eq!(read.len(), 1, "{read:?}");
    assert!(
        read[0] <= 10,
        "{} names read for a listing from the mark",
        read[0]
    );
}
