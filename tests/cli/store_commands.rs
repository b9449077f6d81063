use std::time::Duration;

use cas::{OpenOptions, Store};

use crate::support::{Env, stderr, stdout};

#[test]
fn init_creates_a_store_and_is_idempotent() {
    let env = Env::new();
    let target = env.path().join("proj/.cairn");
    let out = env
        .command()
        .args(["--json", "init", target.as_str()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["store"], target.as_str());
    assert!(target.join(cas::DATABASE_FILE).is_file());
    let again = env
        .command()
        .args(["init", target.as_str()])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0));
    assert!(stdout(&again).contains("already exists"));
    // Default path: ./.cairn
    let out = env.command().arg("init").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(env.path().join(".cairn").join(cas::DATABASE_FILE).is_file());
}

#[test]
fn read_only_commands_on_a_missing_store_exit_2_and_create_nothing() {
    let env = Env::new();
    for args in [
        &["fsck"][..],
        &["log", "main"],
        &["show", "abcdef"],
        &["ref", "list"],
    ] {
        let out = env.cairn(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&out).contains(env.store().as_str()),
            "{args:?}: {}",
            stderr(&out)
        );
        let (code, v) = env.json(args);
        assert_eq!(code, 2);
        assert_eq!(v["error"]["code"], "store_missing");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains(env.store().as_str())
        );
    }
    assert!(!env.store().exists());
}

#[test]
fn store_discovery_finds_the_nearest_dot_cairn_and_honours_the_environment() {
    let env = Env::new();
    let proj = env.path().join("proj");
    let deep = proj.join("a/b");
    std::fs::create_dir_all(&deep).unwrap();
    let out = env
        .command()
        .current_dir(&proj)
        .args(["init"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let out = env
        .command()
        .current_dir(&deep)
        .args(["--json", "fsck"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // CAIRN_STORE wins over discovery.
    let other = env.path().join("elsewhere");
    let out = env
        .command()
        .current_dir(&deep)
        .env("CAIRN_STORE", other.as_str())
        .arg("fsck")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains(other.as_str()));
    // Outside any project: the per-user default store.
    let out = env
        .command()
        .args(["--json", "init", "--help"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let out = env.command().arg("fsck").output().unwrap();
    assert!(
        stderr(&out).contains(".local/share/cairn"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn refs_set_list_and_remove() {
    let env = Env::new();
    let a = env.commit(&[("a.txt", b"1")], vec![], "first");
    let (code, v) = env.json(&["ref", "set", "main", &a.short(8)]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["refs"][0]["snapshot"], a.to_hex());
    let (_, v) = env.json(&["ref", "list"]);
    assert_eq!(
        v["refs"],
        serde_json::json!([{ "name": "main", "snapshot": a.to_hex() }])
    );
    let (code, v) = env.json(&["ref", "set", "bad name", "main"]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (2, Some("invalid_name"))
    );
    let (code, v) = env.json(&["ref", "set", "x", "0123456789"]);
    assert_eq!((code, v["error"]["code"].as_str()), (2, Some("unknown_id")));
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("0123456789")
    );
    let (code, _) = env.json(&["ref", "rm", "main"]);
    assert_eq!(code, 0);
    let (code, v) = env.json(&["ref", "rm", "main"]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (2, Some("unknown_ref"))
    );
}

#[test]
fn show_prints_listings_and_verified_bytes() {
    let env = Env::new();
    let s = env.commit(
        &[("README", b"hello\n"), ("src/main.rs", b"fn main() {}\n")],
        vec![],
        "m",
    );
    let out = env.cairn(&["show", &s.short(10)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let listing = stdout(&out);
    assert!(
        listing.contains("file ") && listing.contains("\tREADME\n") && listing.contains("tree "),
        "{listing}"
    );
    let out = env.cairn(&["show", &format!("{}:src/main.rs", s.short(10))]);
    assert_eq!(out.stdout, b"fn main() {}\n");
    let (code, v) = env.json(&["show", &format!("{}:src", s.to_hex())]);
    assert_eq!(code, 0);
    assert_eq!(v["entries"][0]["name"], "main.rs");
    assert_eq!(v["entries"][0]["size"], 13);
    // A blob by its id (b3sum of the content).
    let blob = blake3::hash(b"hello\n").to_hex().to_string();
    assert_eq!(env.cairn(&["show", &blob]).stdout, b"hello\n");
    let (code, v) = env.json(&["show", &format!("{}:nope", s.short(10))]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (2, Some("invalid_path"))
    );
    assert!(v["error"]["message"].as_str().unwrap().contains("nope"));
}

#[test]
fn log_lists_history_newest_first() {
    let env = Env::new();
    let a = env.commit(&[("a", b"1")], vec![], "one");
    let b = env.commit(&[("a", b"2")], vec![a], "two");
    let c = env.commit(&[("a", b"3")], vec![b], "three");
    assert_eq!(
        env.cairn(&["ref", "set", "main", &c.to_hex()])
            .status
            .code(),
        Some(0)
    );
    let (code, v) = env.json(&["log", "main"]);
    assert_eq!(code, 0);
    let ids: Vec<&str> = v["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![c.to_hex(), b.to_hex(), a.to_hex()]);
    let first = &v["snapshots"][0];
    for field in ["id", "tree", "parents", "message", "labels", "created"] {
        assert!(first.get(field).is_some(), "missing {field}: {first}");
    }
    assert_eq!(first["labels"], serde_json::json!(["task=42"]));
    assert_eq!(first["parents"], serde_json::json!([b.to_hex()]));
    let (_, v) = env.json(&["log", "main", "-n", "1"]);
    assert_eq!(v["snapshots"].as_array().unwrap().len(), 1);
    let human = stdout(&env.cairn(&["log", "main"]));
    assert!(human.starts_with(&format!("snapshot {c}\n")), "{human}");
    assert!(human.contains("    three\n"));
}

#[test]
fn fsck_and_show_refuse_a_corrupt_blob() {
    let env = Env::new();
    let mut content = vec![0u8; 30_000]; // incompressible, so stored as is
    blake3::Hasher::new()
        .update(b"seed")
        .finalize_xof()
        .fill(&mut content);
    let s = env.commit(&[("data.bin", &content)], vec![], "m");
    let (code, v) = env.json(&["fsck"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["problems"], serde_json::json!([]));

    let db = env.store().join(cas::DATABASE_FILE);
    let mut bytes = std::fs::read(&db).unwrap();
    let needle = &content[10_000..10_064];
    let hits: Vec<usize> = bytes
        .windows(64)
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect();
    assert!(
        !hits.is_empty(),
        "the blob's bytes are in the database file"
    );
    for at in hits {
        bytes[at + 20] ^= 0x01;
    }
    std::fs::write(&db, bytes).unwrap();

    let blob = blake3::hash(&content).to_hex().to_string();
    let (code, v) = env.json(&["fsck"]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["problems"][0]["name"], blob);
    assert!(v["message"].as_str().unwrap().contains("1 problem"));
    let out = env.cairn(&["fsck"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains(&blob));
    let out = env.cairn(&["show", &format!("{}:data.bin", s.to_hex())]);
    assert_eq!(out.status.code(), Some(3));
    assert!(out.stdout.is_empty(), "no wrong bytes are printed");
    assert!(stderr(&out).contains(&blob), "{}", stderr(&out));
}

#[test]
fn gc_drops_unreferenced_snapshots() {
    let env = Env::new();
    let keep = env.commit(&[("k", b"keep")], vec![], "keep");
    let drop_me = env.commit(&[("d", b"drop me")], vec![], "drop");
    env.cairn(&["ref", "set", "main", &keep.to_hex()]);
    let (code, v) = env.json(&["gc", "--dry-run"]);
    assert_eq!(code, 0);
    assert_eq!(v["removed"].as_array().unwrap().len(), 3, "{v}");
    assert_eq!(
        env.cairn(&["show", &drop_me.to_hex()]).status.code(),
        Some(0),
        "dry run keeps it"
    );
    let (code, v) = env.json(&["gc"]);
    assert_eq!(code, 0);
    assert!(
        v["removed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"] == drop_me.to_hex() && r["kind"] == "snapshot")
    );
    assert!(v["bytes_freed"].as_u64().unwrap() > 0);
    assert_eq!(
        env.cairn(&["show", &drop_me.to_hex()]).status.code(),
        Some(2)
    );
    assert_eq!(env.cairn(&["show", "main"]).status.code(), Some(0));
    assert_eq!(env.json(&["fsck"]).0, 0);
}

#[test]
fn usage_errors_exit_2_with_a_json_error_object() {
    let env = Env::new();
    let (code, v) = env.json(&["no-such-command"]);
    assert_eq!(code, 2);
    assert_eq!(v["error"]["code"], "usage");
    let out = env.cairn(&["ref"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_busy_store_is_waited_for_and_the_wait_is_bounded() {
    let env = Env::new();
    let s = env.commit(&[("a", b"1")], vec![], "m");
    let held = Store::open(&env.store(), &OpenOptions::default()).unwrap();
    let out = env
        .command()
        .env("CAIRN_LOCK_TIMEOUT", "0.3")
        .args(["--store", env.store().as_str(), "fsck"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = stderr(&out);
    assert!(
        err.contains("waiting for store") && err.contains(env.store().as_str()),
        "{err}"
    );
    // Released while the command waits: it goes on and succeeds. It must really have
    // waited: said so while the store was held, and still been running when it was let go.
    let mut child = env
        .command()
        .args([
            "--store",
            env.store().as_str(),
            "ref",
            "set",
            "main",
            &s.to_hex(),
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (said_waiting, waiting) = std::sync::mpsc::channel();
    let child_stderr = child.stderr.take().unwrap();
    let reading = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut all = String::new();
        for line in std::io::BufReader::new(child_stderr).lines() {
            let line = line.unwrap();
            if line.contains("waiting for store") {
                let _ = said_waiting.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let said = waiting.recv_timeout(Duration::from_secs(30));
    let running_at_release = child.try_wait().unwrap().is_none();
    drop(held);
    let status = child.wait().unwrap();
    let err = reading.join().unwrap();
    assert!(said.is_ok(), "never said it waits for the store: {err}");
    assert!(err.contains(env.store().as_str()), "{err}");
    assert!(
        running_at_release,
        "finished before the store was let go: {err}"
    );
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(env.json(&["ref", "list"]).1["refs"][0]["name"], "main");
}

#[test]
fn two_processes_write_to_one_store_at_once() {
    let env = Env::new();
    let s = env.commit(&[("a", b"1")], vec![], "m");
    let workers: Vec<_> = (0..2)
        .map(|w| {
            let store = env.store();
            let bin = env!("CARGO_BIN_EXE_cairn");
            let s = s.to_hex();
            std::thread::spawn(move || {
                for i in 0..15 {
                    let out = std::process::Command::new(bin)
                        .args([
                            "--store",
                            store.as_str(),
                            "ref",
                            "set",
                            &format!("w{w}/r{i}"),
                            &s,
                        ])
                        .output()
                        .unwrap();
                    assert_eq!(
                        out.status.code(),
                        Some(0),
                        "{}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(
        env.json(&["ref", "list"]).1["refs"]
            .as_array()
            .unwrap()
            .len(),
        30
    );
}

#[test]
fn read_only_commands_share_the_store_and_change_no_byte() {
    let env = Env::new();
    let s = env.commit(&[("a", b"1")], vec![], "m");
    env.cairn(&["ref", "set", "main", &s.to_hex()]);
    let db = env.store().join(cas::DATABASE_FILE);
    let before = std::fs::read(&db).unwrap();
    // Another reader holds the store: readers do not wait for each other.
    let reader = Store::open(
        &env.store(),
        &OpenOptions {
            read_only: true,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    for args in [
        &["fsck"][..],
        &["log", "main"],
        &["show", "main"],
        &["ref", "list"],
        &["worktree", "list"],
    ] {
        let out = env
            .command()
            .env("CAIRN_LOCK_TIMEOUT", "0.2")
            .args(["--store", env.store().as_str()])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    }
    // A writer does wait for the reader.
    let out = env
        .command()
        .env("CAIRN_LOCK_TIMEOUT", "0.2")
        .args(["--store", env.store().as_str(), "ref", "set", "x", "main"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    drop(reader);
    assert!(
        std::fs::read(&db).unwrap() == before,
        "read-only commands left the file as it was"
    );
}

#[test]
fn init_without_a_path_creates_the_store_that_store_or_cairn_store_names() {
    let env = Env::new();
    // --store, relative to the current directory.
    let out = env
        .command()
        .args(["--json", "--store", "named", "init"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let named = env.path().join("named");
    assert_eq!(v["store"], named.as_str());
    assert!(named.join(cas::DATABASE_FILE).is_file());
    // $CAIRN_STORE.
    let from_env = env.path().join("from-env");
    let out = env
        .command()
        .env("CAIRN_STORE", from_env.as_str())
        .arg("init")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains(from_env.as_str()), "{}", stdout(&out));
    assert!(from_env.join(cas::DATABASE_FILE).is_file());
    // PATH wins over both.
    let given = env.path().join("given");
    let out = env
        .command()
        .env("CAIRN_STORE", from_env.as_str())
        .args(["--store", "named", "init", given.as_str()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(given.join(cas::DATABASE_FILE).is_file());
    assert!(
        !env.path().join(".cairn").exists(),
        "no ./.cairn when a store is named"
    );
}

#[test]
fn a_lock_timeout_that_is_not_a_number_of_seconds_exits_2_naming_it() {
    let env = Env::new();
    env.commit(&[("a", b"1")], vec![], "m");
    for value in ["1e300", "NaN", "inf", "-inf", "-1", "abc", "1e20", "5s"] {
        for args in [&["fsck"][..], &["init"], &["ref", "list"]] {
            let out = env
                .command()
                .env("CAIRN_LOCK_TIMEOUT", value)
                .args(["--store", env.store().as_str()])
                .args(args)
                .output()
                .unwrap();
            assert_eq!(
                out.status.code(),
                Some(2),
                "{value} {args:?}: {}",
                stderr(&out)
            );
            let err = stderr(&out);
            assert!(
                err.contains("CAIRN_LOCK_TIMEOUT") && err.contains(value),
                "{value}: {err}"
            );
        }
        let out = env
            .command()
            .env("CAIRN_LOCK_TIMEOUT", value)
            .args(["--json", "--store", env.store().as_str(), "fsck"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["error"]["code"], "invalid_env", "{v}");
        assert!(v["error"]["message"].as_str().unwrap().contains(value));
    }
    // Valid values (and an empty one, as if unset) still work.
    for value in ["0", "2.5", " 3 ", ""] {
        let out = env
            .command()
            .env("CAIRN_LOCK_TIMEOUT", value)
            .args(["--store", env.store().as_str(), "fsck"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{value:?}: {}", stderr(&out));
    }
}

#[test]
fn steps_back_after_a_name_or_id_reach_parents_and_ancestors() {
    let env = Env::new();
    let a = env.commit(&[("a", b"1")], vec![], "one");
    let b = env.commit(&[("a", b"2")], vec![a], "two");
    let c = env.commit(&[("a", b"3")], vec![b], "three");
    let x = env.commit(&[("x", b"x")], vec![], "other root");
    let m = env.commit(&[("a", b"4")], vec![c, x], "combined");
    assert_eq!(env.json(&["ref", "set", "main", &m.to_hex()]).0, 0);
    let first = |spec: &str| {
        let (code, v) = env.json(&["log", spec, "-n", "1"]);
        assert_eq!(code, 0, "log {spec}: {v}");
        v["snapshots"][0]["id"].as_str().unwrap().to_owned()
    };
    let prefix = &m.to_hex()[..8];
    for (spec, want) in [
        ("main^0", m),
        ("main^", c),
        ("main^1", c),
        ("main^2", x),
        ("main~", c),
        ("main~1", c),
        ("main~3", a),
        ("main~1^", b),
        ("main^^~1", a),
        (&format!("{prefix}~2"), b),
    ] {
        assert_eq!(first(spec), want.to_hex(), "{spec}");
    }
    // Every verb that takes a snapshot: show and diff too.
    let shown = env.cairn(&["show", "main~2:a"]);
    assert_eq!(shown.stdout, b"2", "{}", stderr(&shown));
    let (code, v) = env.json(&["diff", "main~1", "main"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["modified"][0]["path"], "a", "{v}");
    assert_eq!(v["added"], serde_json::json!([]), "{v}");

    // A worktree's checkpoint names take steps too.
    let wt = env.path().join("wt");
    std::fs::create_dir_all(&wt).unwrap();
    std::fs::write(wt.join("f"), "1").unwrap();
    let (code, one) = env.json(&["checkpoint", wt.as_str(), "--name", "one"]);
    assert_eq!(code, 0, "{one}");
    std::fs::write(wt.join("f"), "2").unwrap();
    let (code, two) = env.json(&["checkpoint", wt.as_str(), "--name", "two"]);
    assert_eq!(code, 0, "{two}");
    let out = env
        .command()
        .current_dir(&wt)
        .arg("--store")
        .arg(env.store().as_str())
        .args(["--json", "log", "two~1", "-n", "1"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["snapshots"][0]["id"], one["snapshot"], "{v}");

    // Past the history, or not steps at all: unknown, naming the spec and why.
    for (spec, why) in [
        ("main~4", format!("snapshot {a} has no parent")),
        ("main^3", format!("snapshot {m} has 2 parent(s), not 3")),
        ("main~x", "only steps back may follow".to_owned()),
        ("main~1Ò", "only steps back may follow".to_owned()),
        ("main^Ò^", "only steps back may follow".to_owned()),
        ("main^-1", "only steps back may follow".to_owned()),
        ("~1", "only steps back may follow".to_owned()),
        ("main~99999999999", "only steps back may follow".to_owned()),
    ] {
        let (code, v) = env.json(&["log", spec]);
        assert_eq!(code, 2, "{spec}: {v}");
        assert_eq!(v["error"]["code"], "unknown_id", "{spec}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("'{spec}'")) && message.contains(&why),
            "{spec}: {message}"
        );
    }
}
