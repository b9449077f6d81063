//! `cairn ui` in a real browser: Debian's chromium driven by playwright-core
//! (`tests/ui/*.mjs`), against scenes made with the real CLI. What the page shows is
//! compared with what the CLI's JSON says; screenshots of each view are kept in
//! `target/ui-screenshots/`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use camino::Utf8PathBuf;
use serde_json::{Value, json};

use crate::support::{Env, attempt, project, replace, stderr, stdout};
use crate::ui_server::Ui;

/// `tests/ui/`: the scenarios and their package.json.
fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/ui")
}

/// Where the scenarios leave their screenshots: `target/ui-screenshots/`.
fn screenshots_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .join("ui-screenshots")
}

/// Debian's chromium and `tests/ui/node_modules`, installed when missing
/// (`tests/ui/setup.sh`, once per test process; processes wait for each other there).
fn browser_ready() {
    static READY: OnceLock<()> = OnceLock::new();
    READY.get_or_init(|| {
        let out = Command::new("bash")
            .arg(scenarios_dir().join("setup.sh"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tests/ui/setup.sh (chromium and playwright-core for the browser tests): {}",
            stderr(&out)
        );
    });
}

/// Runs `tests/ui/NAME.mjs` with `input` (plus the screenshot folder) and returns what it
/// printed; a failing scenario fails the test with its reason.
fn scenario(name: &str, mut input: Value) -> Value {
    browser_ready();
    input["screenshots"] = json!(screenshots_dir());
    let out = Command::new("node")
        .arg(scenarios_dir().join(format!("{name}.mjs")))
        .env("CAIRN_UI_INPUT", input.to_string())
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "scenario {name} failed:\n{}{text}",
        stderr(&out)
    );
    serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("scenario {name} printed no JSON ({e}): {text:?}"))
}

/// `cairn --json ARGS…`, which must succeed.
fn ok(env: &Env, args: &[&str]) -> Value {
    let (code, v) = env.json(args);
    assert_eq!(code, 0, "cairn {args:?}: {v}");
    v
}

/// An agent's session in one worktree, recorded as agents record it: onboarded, three
/// turns snapshotted with messages and labels (one renames a file, one deletes one), a
/// named checkpoint between them, and an edit never snapshotted.
struct Session {
    dir: Utf8PathBuf,
    /// The snapshots, oldest first.
    states: Vec<String>,
    /// The named checkpoint: its snapshot and name.
    checkpoint: (String, String),
}

fn session(env: &Env) -> Session {
    let dir = env.path().join("app");
    let write = |path: &str, text: &str| {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "src/main.py",
        "import sys\n\n\ndef main():\n    print('hello')\n\n\nif __name__ == '__main__':\n    main()\n",
    );
    write(
        "src/util.py",
        "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n",
    );
    write("README.md", "# app\n\nA small app.\n");
    write("notes.txt", "todo: config\n");
    let mut states = vec![id(&ok(env, &["onboard", dir.as_str(), "-m", "start"]))];
    let snapshot = |message: &str, labels: &[&str]| {
        let mut args = vec!["snapshot", dir.as_str(), "-m", message];
        for label in labels {
            args.extend(["--label", label]);
        }
        id(&ok(env, &args))
    };

    replace(
        &dir,
        "src/main.py",
        "    print('hello')\n",
        "    config = load()\n    print('hello', config)\n",
    );
    write(
        "src/config.py",
        "def load():\n    return {'debug': False}\n",
    );
    states.push(snapshot(
        "Turn 1: read the config",
        &["turn=1", "tool=edit"],
    ));

    replace(
        &dir,
        "README.md",
        "A small app.\n",
        "A small app that reads a config.\n",
    );
    let checkpoint = ok(env, &["checkpoint", dir.as_str(), "--name", "config-works"]);
    states.push(id(&checkpoint));
    let name = checkpoint["name"].as_str().unwrap().to_owned();

    std::fs::rename(dir.join("src/util.py"), dir.join("src/helpers.py")).unwrap();
    std::fs::remove_file(dir.join("notes.txt")).unwrap();
    replace(
        &dir,
        "src/main.py",
        "import sys\n",
        "import sys\n\nfrom config import load\n",
    );
    states.push(snapshot(
        "Turn 2: move the helpers",
        &["turn=2", "tool=refactor"],
    ));

    write(
        "tests/test_main.py",
        "from src.main import main\n\n\ndef test_main():\n    main()\n",
    );
    replace(&dir, "src/config.py", "False", "True");
    states.push(snapshot("Turn 3: a test", &["turn=3"]));
    write("scratch.txt", "never snapshotted\n");
    let checkpoint = (states[2].clone(), name);
    Session {
        dir,
        states,
        checkpoint,
    }
}

fn id(v: &Value) -> String {
    v["snapshot"]
        .as_str()
        .unwrap_or_else(|| panic!("no snapshot in {v}"))
        .to_owned()
}

#[test]
fn without_its_token_or_from_a_foreign_host_or_origin_the_page_shows_nothing() {
    let env = Env::new();
    let session = session(&env);
    let ui = Ui::start(&env, &[]);
    let rewind = json!({"dir": session.dir, "to": session.states[0]});
    let seen = scenario(
        "guard",
        json!({"url": ui.url, "bare": format!("{}/", ui.base()), "token": ui.token, "port": ui.port,
               "rewind": rewind}),
    );

    // Without the token: 401, a page saying where to get the URL, and no data.
    let without = &seen["without"];
    assert_eq!(without["status"], 401, "{seen}");
    let hint = without["text"].as_str().unwrap();
    assert!(
        hint.contains("cairn ui"),
        "the page without a token says: {hint:?}"
    );
    assert!(!hint.contains(session.dir.as_str()), "{hint:?}");
    assert_eq!(without["rows"], 0, "{seen}");
    assert_eq!(without["fetch"]["status"], 401, "{seen}");
    let answer: Value = serde_json::from_str(without["fetch"]["body"].as_str().unwrap()).unwrap();
    assert_eq!(answer["error"]["code"], "no_token", "{answer}");

    // With it: the worktrees `worktree list` lists; no cookie (a cookie of 127.0.0.1 goes
    // to every port of it), and the token is out of the address bar.
    let listed = ok(&env, &["worktree", "list"]);
    let paths = |rows: &Value, key: &str| -> Vec<String> {
        let mut paths: Vec<String> = rows
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r[key].as_str().unwrap().to_owned())
            .collect();
        paths.sort();
        paths
    };
    assert_eq!(
        paths(&seen["with"]["rows"], "path"),
        paths(&listed["worktrees"], "path"),
        "{seen}"
    );
    assert_eq!(seen["with"]["cookies"], json!([]), "{seen}");
    let address = seen["with"]["address"].as_str().unwrap();
    assert!(!address.contains(&ui.token), "{address}");
    // A reload of that address: 401, then the page opens itself again with the tab's token.
    let reload = &seen["reload"];
    assert_eq!(
        (&reload["first"], &reload["again"]),
        (&json!(401), &json!(200)),
        "{seen}"
    );
    assert_eq!(
        reload["rows"],
        json!(listed["worktrees"].as_array().unwrap().len()),
        "{seen}"
    );

    // A tab keeping a stale token: `/` and one try with it, both 401, then it stays.
    let stale = &seen["stale"];
    assert_eq!(stale["documents"], json!([401, 401]), "{seen}");
    assert!(
        stale["text"].as_str().unwrap().contains("cairn ui"),
        "{seen}"
    );

    // A name that resolves to 127.0.0.1 but is not the ui's own (DNS rebinding): 403.
    let rebound = &seen["rebound"];
    assert_eq!(rebound["status"], 403, "{seen}");
    let answer: Value = serde_json::from_str(rebound["text"].as_str().unwrap()).unwrap();
    assert_eq!(answer["error"]["code"], "foreign_host", "{answer}");
    assert_eq!(rebound["rows"], 0, "{seen}");
    assert!(
        !rebound["text"]
            .as_str()
            .unwrap()
            .contains(session.dir.as_str())
    );

    // A page on another origin, even knowing the token, reads nothing and changes nothing:
    // the requests with the token that the ui's own page makes (answered) are refused from there.
    let foreign = &seen["foreign"];
    assert_eq!(foreign["read"], Value::Null, "a foreign page read {seen}");
    let own = seen["own"].as_array().unwrap();
    let sent = foreign["requests"].as_array().unwrap();
    assert_eq!(own.len(), 3, "{seen}");
    assert_eq!(sent.len(), 3, "{seen}");
    for (own, sent) in own.iter().zip(sent) {
        // Its own page too needs the token: nothing carries it but the request.
        let answered = if own["token"] == true { 200 } else { 401 };
        assert_eq!(own["status"], answered, "the ui's own page: {own}");
        assert_eq!(
            (&own["path"], &own["token"]),
            (&sent["path"], &sent["token"])
        );
        // With the token, only the Origin tells them apart; without, either guard may
        // refuse.
        let refused: &[u64] = if sent["token"] == true {
            &[403]
        } else {
            &[401, 403]
        };
        assert!(
            refused.contains(&sent["status"].as_u64().unwrap()),
            "the ui answered a foreign page: {sent}"
        );
    }
    let head = ok(&env, &["log", session.dir.as_str(), "-n", "1"]);
    assert_eq!(head["snapshots"][0]["id"], session.states[4], "{head}");
    assert!(session.dir.join("scratch.txt").exists());
}

#[test]
fn the_timeline_shows_each_state_of_an_agent_session_as_log_does() {
    let env = Env::new();
    let session = session(&env);
    let ui = Ui::start(&env, &[]);
    let seen = scenario("timeline", json!({"url": ui.url, "worktree": session.dir}));
    let log = ok(&env, &["log", session.dir.as_str(), "--stat"]);
    let snapshots = log["snapshots"].as_array().unwrap();
    let rows = seen["rows"].as_array().unwrap();
    let ids = |list: &[Value], key: &str| -> Vec<String> {
        list.iter()
            .map(|v| v[key].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(rows, "snapshot"), ids(snapshots, "id"), "{seen}");
    assert_eq!(seen["list"]["total"], snapshots.len().to_string(), "{seen}");
    for (row, entry) in rows.iter().zip(snapshots) {
        let id = entry["id"].as_str().unwrap();
        assert_eq!(row["message"], entry["message"], "{id}: {row}");
        let mut labels: Vec<&Value> = row["labels"].as_array().unwrap().iter().collect();
        let mut want: Vec<&Value> = entry["labels"].as_array().unwrap().iter().collect();
        labels.sort_by_key(|v| v.to_string());
        want.sort_by_key(|v| v.to_string());
        assert_eq!(labels, want, "{id}: {row}");
        assert_eq!(row["created"], entry["created"], "{id}: {row}");
        let stats = &entry["stat"]["stats"];
        let (plus, minus) = (&stats["insertions"], &stats["deletions"]);
        assert_eq!(row["stat"]["insertions"], plus.to_string(), "{id}: {row}");
        assert_eq!(row["stat"]["deletions"], minus.to_string(), "{id}: {row}");
        let text = row["stat"]["text"].as_str().unwrap();
        assert!(
            text.contains(&format!("+{plus}")) && text.contains(&format!("-{minus}")),
            "{id}: the row shows {text:?}, log says +{plus} -{minus}"
        );
        let head = id == session.states[4];
        assert_eq!(row["head"], head.to_string(), "{id}: {row}");
        assert_eq!(row["rewind"], !head, "a rewind action on {id}: {row}");
        let named = (id == session.checkpoint.0).then_some(session.checkpoint.1.as_str());
        assert_eq!(row["checkpoint"].as_str(), named, "{id}: {row}");
    }
}

#[test]
fn a_long_timeline_loads_as_it_scrolls_and_marks_a_head_moved_far_down() {
    let env = Env::new();
    // A history longer than a few pages, written through the library, then checked out.
    let count = 450;
    let mut parent = Vec::new();
    for turn in 0..count {
        let progress = format!("turn {turn}\n");
        let files: [(&str, &[u8]); 2] = [
            ("README.md", b"# long\n"),
            ("progress.txt", progress.as_bytes()),
        ];
        let id = env.commit(&files, parent, &format!("Turn {turn}"));
        parent = vec![id];
    }
    let tip = parent[0].to_string();
    let dir = env.path().join("long");
    ok(&env, &["checkout", &tip, dir.as_str()]);
    let log = ok(&env, &["log", dir.as_str(), "-n", &(count + 1).to_string()]);
    let history: Vec<&str> = log["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(history.len(), count, "{log}");
    let far = history[count - 20];

    let ui = Ui::start(&env, &[]);
    let store = env.store();
    let command = [
        env!("CARGO_BIN_EXE_cairn"),
        "--store",
        store.as_str(),
        "rewind",
        dir.as_str(),
        "--to",
        far,
    ];
    let seen = scenario(
        "scroll",
        json!({"url": ui.url, "worktree": dir, "command": command, "to": far,
               "home": env.path().join("home")}),
    );
    let loaded: Vec<u64> = seen["loaded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .collect();
    assert_eq!(seen["total"], count, "{seen}");
    assert!(loaded[0] < count as u64, "not paged: all {count} at once");
    assert!(loaded.windows(2).all(|w| w[0] < w[1]), "{loaded:?}");
    let rows: Vec<&str> = seen["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(rows, history, "the rows scrolled through, against log");
    assert_eq!(seen["head"], far, "{}", seen["head"]);
    assert_eq!(seen["heads"], 1, "one head marked");
    // Refreshed in place, it shows what a page opened afresh shows.
    let (after, fresh) = (
        seen["after"].as_array().unwrap(),
        seen["fresh"].as_array().unwrap(),
    );
    let differ = after.iter().zip(fresh).position(|(a, f)| a != f);
    assert!(
        after == fresh,
        "after the head moved, the open page shows {} rows, a fresh one {}; first different \
         at row {differ:?}; the head was row {:?} of {}",
        after.len(),
        fresh.len(),
        history.iter().position(|id| *id == far),
        history.len()
    );
}

/// The lines of a unified patch as `cairn diff` prints it, by file (its new path): kind
/// (`add`, `del`, `ctx`), old and new line numbers, text.
fn patch_lines(patch: &str) -> Vec<(String, Vec<Value>)> {
    let mut files: Vec<(String, Vec<Value>)> = Vec::new();
    let (mut old, mut new, mut in_hunk) = (0u64, 0u64, false);
    let number = |range: &str| -> u64 { range[1..].split(',').next().unwrap().parse().unwrap() };
    for line in patch.lines() {
        if let Some(header) = line.strip_prefix("diff --git ") {
            let path = header.rsplit_once(" b/").unwrap().1.to_owned();
            files.push((path, Vec::new()));
            in_hunk = false;
        } else if let Some(hunk) = line.strip_prefix("@@ ") {
            let mut ranges = hunk.split(' ');
            old = number(ranges.next().unwrap());
            new = number(ranges.next().unwrap());
            in_hunk = true;
        } else if in_hunk && !line.starts_with('\\') {
            let (kind, text) = line.split_at(1);
            let lines = &mut files.last_mut().unwrap().1;
            let entry = match kind {
                "+" => {
                    new += 1;
                    json!({"kind": "add", "new": (new - 1).to_string(), "text": text})
                }
                "-" => {
                    old += 1;
                    json!({"kind": "del", "old": (old - 1).to_string(), "text": text})
                }
                _ => {
                    old += 1;
                    new += 1;
                    json!({"kind": "ctx", "old": (old - 1).to_string(),
                           "new": (new - 1).to_string(), "text": text})
                }
            };
            lines.push(entry);
        }
    }
    files
}

/// Checks a diff view the scenario read against `cairn diff A B`: the same files with the
/// same statuses, and in both modes the same lines.
fn assert_diff_as_cli(env: &Env, seen: &Value, a: &str, b: &str) {
    let listed = ok(env, &["diff", a, b]);
    let out = env.cairn(&["diff", a, b]);
    assert!(out.status.success(), "{}", stderr(&out));
    let patch = patch_lines(&stdout(&out));
    let files = seen["files"].as_array().unwrap();
    let mut want: Vec<(String, String)> = ["added", "removed", "modified", "renamed"]
        .iter()
        .flat_map(|k| listed[k].as_array().unwrap().iter())
        .map(|f| {
            let path = f["path"].as_str().or(f["to"].as_str()).unwrap();
            (path.to_owned(), f["status"].as_str().unwrap().to_owned())
        })
        .collect();
    want.sort();
    let mut shown: Vec<(String, String)> = files
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_owned(),
                f["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    shown.sort();
    assert_eq!(shown, want, "files of {a}..{b}: {seen}");
    assert_eq!(seen["stat"]["files"], listed["stats"]["files"].to_string());
    assert_eq!(
        seen["stat"]["insertions"],
        listed["stats"]["insertions"].to_string()
    );
    assert_eq!(
        seen["stat"]["deletions"],
        listed["stats"]["deletions"].to_string()
    );
    for (path, lines) in &patch {
        let file = files
            .iter()
            .find(|f| f["path"] == path.as_str())
            .unwrap_or_else(|| panic!("the page shows no file {path}: {seen}"));
        assert_eq!(
            file["lines"].as_array().unwrap(),
            lines,
            "unified lines of {path}"
        );
        // Side by side: each removed line on the old side, each added one on the new.
        let split: Vec<Value> = file["cells"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["kind"] == "add" || c["kind"] == "del")
            .cloned()
            .collect();
        let want: Vec<Value> = lines
            .iter()
            .filter(|l| l["kind"] != "ctx")
            .map(|l| {
                let side = if l["kind"] == "add" { "new" } else { "old" };
                json!({"side": side, "kind": l["kind"], "line": l[side], "text": l["text"]})
            })
            .collect();
        let sorted = |mut v: Vec<Value>| {
            v.sort_by_key(|c| c.to_string());
            v
        };
        assert_eq!(sorted(split), sorted(want), "side-by-side lines of {path}");
    }
    let renamed = listed["renamed"].as_array().unwrap();
    for r in renamed {
        let file = files.iter().find(|f| f["path"] == r["to"]).unwrap();
        assert_eq!(file["from"], r["from"], "{file}");
    }
}

#[test]
fn a_diff_shows_the_lines_cairn_diff_prints_unified_and_side_by_side() {
    let env = Env::new();
    let session = session(&env);
    let ui = Ui::start(&env, &[]);
    // Turn 2 against its parent (a rename, a deletion, an edit), then the whole session.
    let turn = &session.states[3];
    let seen = scenario(
        "diff",
        json!({"url": ui.url, "hash": format!("#/snapshot/{turn}"), "view": "snapshot",
               "shot": "snapshot"}),
    );
    assert!(
        seen["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["status"] == "R100"),
        "no rename shown: {seen}"
    );
    assert_diff_as_cli(&env, &seen, &session.states[2], turn);

    let (first, last) = (&session.states[0], &session.states[4]);
    let seen = scenario(
        "diff",
        json!({"url": ui.url, "hash": format!("#/diff/{first}/{last}"), "view": "diff",
               "shot": "diff"}),
    );
    assert_diff_as_cli(&env, &seen, first, last);
}

#[test]
fn the_compare_grid_groups_three_attempts_as_compare_does() {
    let env = Env::new();
    let base = project(&env);
    let a = attempt(&env, &base, "attempt-a", |d| {
        replace(d, "lines.txt", "two\n", "TWO\n");
        std::fs::write(d.join("notes.txt"), "fixed\n").unwrap();
    });
    let b = attempt(&env, &base, "attempt-b", |d| {
        replace(d, "lines.txt", "two\n", "TWO\n");
        replace(d, "lines.txt", "nine\n", "NINE\n");
    });
    let c = attempt(&env, &base, "attempt-c", |d| {
        replace(d, "lines.txt", "two\n", "2\n");
        std::fs::write(d.join("notes.txt"), "fixed\n").unwrap();
        std::fs::remove_file(d.join("empty")).unwrap();
    });
    for (id, passes) in [(&a, true), (&c, false)] {
        let (code, v) = env.json(&[
            "verify",
            id,
            "--check",
            "fixed",
            "--",
            "grep",
            "-q",
            "TWO",
            "lines.txt",
        ]);
        assert_eq!(code, if passes { 0 } else { 1 }, "{v}");
    }
    let compared = ok(&env, &["compare", &a, &b, &c]);
    let ui = Ui::start(&env, &[]);
    let seen = scenario(
        "compare",
        json!({"url": ui.url, "hash": format!("#/compare/{a},{b},{c}")}),
    );

    // Each cell is in the group `compare` puts its attempt in, at each path it lists.
    let cells = seen["cells"].as_array().unwrap();
    let paths = compared["paths"].as_array().unwrap();
    assert!(paths.len() >= 3, "{compared}");
    for path in paths {
        let name = path["path"].as_str().unwrap();
        let groups = path["groups"].as_array().unwrap();
        for attempt in [&a, &b, &c] {
            let cell = cells
                .iter()
                .find(|c| c["path"] == name && c["snapshot"] == attempt.as_str())
                .unwrap_or_else(|| panic!("no cell for {name} × {attempt}: {seen}"));
            let group = groups.iter().position(|g| {
                g.as_array()
                    .unwrap()
                    .iter()
                    .any(|id| id == attempt.as_str())
            });
            assert_eq!(
                cell["group"].as_str().map(|g| g.parse::<usize>().unwrap()),
                group,
                "{name} × {attempt}: the page's cell {cell}, compare's groups {groups:?}"
            );
        }
    }
    assert_eq!(cells.len(), paths.len() * 3, "{seen}");
    // Agreeing cells share a colour; different groups at a path do not.
    for path in paths {
        let name = path["path"].as_str().unwrap();
        let at_path: Vec<&Value> = cells.iter().filter(|c| c["path"] == name).collect();
        for x in &at_path {
            for y in &at_path {
                assert_eq!(
                    x["group"] == y["group"],
                    x["colour"] == y["colour"],
                    "colours at {name}: {x} {y}"
                );
            }
        }
    }
    // Each attempt's column: its summary and checks as `compare` gives them.
    let attempts = seen["attempts"].as_array().unwrap();
    for summary in compared["snapshots"].as_array().unwrap() {
        let column = attempts
            .iter()
            .find(|c| c["snapshot"] == summary["id"])
            .unwrap_or_else(|| panic!("no column for {summary}: {seen}"));
        for key in ["files", "insertions", "deletions"] {
            assert_eq!(column[key], summary[key].to_string(), "{key}: {column}");
        }
        let checks: Vec<Value> = summary["checks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| json!({"check": c["check"], "passed": c["passed"].to_string()}))
            .collect();
        assert_eq!(column["checks"].as_array().unwrap(), &checks, "{column}");
        let base = compared["base"].as_str().unwrap();
        let id = summary["id"].as_str().unwrap();
        assert!(
            column["diff"]
                .as_str()
                .unwrap()
                .ends_with(&format!("#/diff/{base}/{id}")),
            "{column}"
        );
    }
}

#[test]
fn a_rewind_from_the_page_changes_the_files_and_cairn_undo_brings_them_back() {
    let env = Env::new();
    let session = session(&env);
    let ui = Ui::start(&env, &[]);
    let dir = session.dir.as_str();
    let to = &session.checkpoint.0;
    let input = |confirm: bool| {
        json!({"url": ui.url, "worktree": session.dir, "to": to,
               "confirm": confirm})
    };
    let differs = |b: &str| {
        ok(&env, &["diff", dir, b])["stats"]["files"]
            .as_u64()
            .unwrap()
    };
    let live_before = differs(&session.states[4]);
    assert!(live_before > 0, "the session leaves a live edit");

    // Cancelled: nothing changes.
    let seen = scenario("rewind", input(false));
    assert_eq!(seen["dialog"], "rewind", "{seen}");
    assert_eq!(differs(&session.states[4]), live_before, "{seen}");
    assert!(session.dir.join("scratch.txt").exists());

    // Confirmed: the worktree holds the checkpoint's files, its head is the checkpoint,
    // and the page says so and offers undo.
    let seen = scenario("rewind", input(true));
    assert_eq!(differs(to), 0, "after the page's rewind: {seen}");
    assert!(!session.dir.join("scratch.txt").exists());
    let listed = ok(&env, &["worktree", "list"]);
    let record = listed["worktrees"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["path"] == dir)
        .unwrap_or_else(|| panic!("{dir} not listed: {listed}"));
    assert_eq!(record["head"], to.as_str(), "{record}");
    assert_eq!(
        seen["head"],
        to.as_str(),
        "the page's head after rewind: {seen}"
    );
    assert_eq!(seen["notice"]["action"], "rewind", "{seen}");
    assert_eq!(seen["notice"]["undo"], true, "{seen}");
    // The rewind, then one refresh of the timeline (the store change it made): the verb
    // calls of the first render, once.
    let calls = &seen["calls"];
    let mut one_refresh = vec![json!("rewind")];
    one_refresh.extend(calls["first_render"].as_array().unwrap().iter().cloned());
    assert!(
        one_refresh.len() > 1,
        "the first render called no verb: {calls}"
    );
    assert_eq!(
        calls["after_rewind"],
        Value::Array(one_refresh),
        "the page's verb calls after one rewind"
    );

    // `cairn undo` brings back the files, the never-snapshotted edit too.
    let undone = ok(&env, &["undo", dir]);
    assert!(
        !undone["reverted"].as_array().unwrap().is_empty(),
        "{undone}"
    );
    assert_eq!(differs(&session.states[4]), live_before, "{undone}");
    assert_eq!(
        std::fs::read_to_string(session.dir.join("scratch.txt")).unwrap(),
        "never snapshotted\n"
    );
}

#[test]
fn an_open_page_follows_changes_another_process_makes() {
    let env = Env::new();
    let session = session(&env);
    let ui = Ui::start(&env, &[]);
    std::fs::write(session.dir.join("src/late.py"), "LATE = True\n").unwrap();
    let store = env.store();
    let command = [
        env!("CARGO_BIN_EXE_cairn"),
        "--store",
        store.as_str(),
        "--json",
        "snapshot",
        session.dir.as_str(),
        "-m",
        "Turn 4: made while the page was open",
    ];
    let seen = scenario(
        "events",
        json!({"url": ui.url, "worktree": session.dir, "command": command,
               "home": env.path().join("home")}),
    );
    let made: Value = serde_json::from_str(seen["output"].as_str().unwrap()).unwrap();
    let new = id(&made);
    assert_eq!(seen["before"][0], session.states[4].as_str(), "{seen}");
    assert_eq!(seen["after"][0], new.as_str(), "{seen}");
    assert_eq!(
        seen["after"].as_array().unwrap().len(),
        session.states.len() + 1
    );
    assert_eq!(seen["navigations"], 0, "the page reloaded: {seen}");
    assert_eq!(seen["same_page"], true, "{seen}");
}

#[test]
fn a_file_a_checks_output_and_the_store_show_what_the_cli_says() {
    let env = Env::new();
    let session = session(&env);
    let head = &session.states[4];
    let (code, verified) = env.json(&[
        "verify",
        head,
        "--check",
        "listing",
        "--",
        "sh",
        "-c",
        "ls src; echo oops >&2",
    ]);
    assert_eq!(code, 0, "{verified}");
    let ui = Ui::start(&env, &[]);
    let seen = scenario(
        "views",
        json!({"url": ui.url, "snapshot": head, "path": "src/main.py", "check": "listing",
               "first": session.states[0]}),
    );
    // The first snapshot's page: its id and the note that nothing comes before it.
    assert_eq!(seen["first"]["id"], session.states[0].as_str(), "{seen}");
    assert!(
        seen["first"]["note"]
            .as_str()
            .is_some_and(|n| n.starts_with("A first snapshot")),
        "{seen}"
    );
    assert_eq!(seen["first"]["files"], 0, "{seen}");
    assert_eq!(seen["first"]["errors"], 0, "{seen}");

    let shown = env.cairn(&["show", &format!("{head}:src/main.py")]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    assert_eq!(seen["file"]["text"], stdout(&shown), "{seen}");

    let checks = ok(&env, &["checks", head]);
    let want: Vec<Value> = checks["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            json!({"check": c["check"], "passed": c["passed"].to_string(),
                        "attestation": c["attestation"]})
        })
        .collect();
    assert_eq!(seen["checks"].as_array().unwrap(), &want, "{seen}");
    let logged = ok(&env, &["checks", head, "--log", "listing"]);
    assert_eq!(
        seen["log"]["stdout"], logged["log"]["stdout"],
        "{seen}\n{logged}"
    );
    assert_eq!(
        seen["log"]["stderr"], logged["log"]["stderr"],
        "{seen}\n{logged}"
    );
    assert!(
        seen["log"]["stdout"].as_str().unwrap().contains("main.py"),
        "{seen}"
    );

    let gc = ok(&env, &["gc", "--dry-run"]);
    assert_eq!(
        seen["store"]["freed"],
        gc["bytes_freed"].to_string(),
        "{seen}\n{gc}"
    );
    assert_eq!(
        seen["store"]["bytes"],
        gc["store_bytes"].to_string(),
        "{seen}\n{gc}"
    );
}
