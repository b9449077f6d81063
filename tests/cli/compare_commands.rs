//! `cairn compare` on real attempts (checkouts of one base, edited and snapshotted): the
//! groups of agreeing attempts on each path (deletions included), their change counts and
//! checks, equal trees, the base, the refusals, and the table in 80 columns.

use std::time::Duration;

use camino::Utf8PathBuf;
use serde_json::{Value, json};

use crate::mcp_client::Mcp;
use crate::support::{Env, Server, stderr, stdout};

/// A project of `files` onboarded: its folder and snapshot.
fn onboard(env: &Env, name: &str, files: &[(&str, &str)]) -> (Utf8PathBuf, String) {
    let dir = env.path().join(name);
    for (path, content) in files {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, content).unwrap();
    }
    let (code, v) = env.json(&["onboard", dir.as_str()]);
    assert_eq!(code, 0, "{v}");
    (dir, v["snapshot"].as_str().unwrap().to_owned())
}

/// An attempt: `base` checked out as `name`, changed by `edit`, snapshotted. Its
/// snapshot and tree.
fn attempt(env: &Env, base: &str, name: &str, edit: impl FnOnce(&Utf8PathBuf)) -> (String, String) {
    let dir = env.path().join(name);
    let (code, v) = env.json(&["checkout", base, dir.as_str()]);
    assert_eq!(code, 0, "{v}");
    edit(&dir);
    let (code, v) = env.json(&["snapshot", dir.as_str()]);
    assert_eq!(code, 0, "{v}");
    (
        v["snapshot"].as_str().unwrap().to_owned(),
        v["tree"].as_str().unwrap().to_owned(),
    )
}

fn write(dir: &Utf8PathBuf, path: &str, content: &str) {
    std::fs::write(dir.join(path), content).unwrap();
}

fn compare(env: &Env, args: &[&str]) -> Value {
    let mut all = vec!["compare"];
    all.extend_from_slice(args);
    let (code, v) = env.json(&all);
    assert_eq!(code, 0, "{v}");
    v
}

/// A summary as the JSON has it, with no checks.
fn unchecked(id: &str, tree: &str, files: u64, insertions: u64, deletions: u64) -> Value {
    json!({
        "id": id, "tree": tree, "files": files, "insertions": insertions,
        "deletions": deletions, "checks": [],
    })
}

const BASE: &[(&str, &str)] = &[
    ("shared.txt", "broken\n"),
    ("doomed.txt", "old line\n"),
    ("keep.txt", "kept\n"),
];

/// Three attempts at one base: A and B agree on `shared.txt`, C differs; A deletes
/// `doomed.txt`, B edits it, C leaves it; only C adds `only.txt`.
fn three_attempts(env: &Env) -> (String, [(String, String); 3]) {
    let (_, base) = onboard(env, "project", BASE);
    let a = attempt(env, &base, "a", |d| {
        write(d, "shared.txt", "fixed\n");
        std::fs::remove_file(d.join("doomed.txt")).unwrap();
    });
    let b = attempt(env, &base, "b", |d| {
        write(d, "shared.txt", "fixed\n");
        write(d, "doomed.txt", "new line\nand another\n");
    });
    let c = attempt(env, &base, "c", |d| {
        write(d, "shared.txt", "fixed otherwise\n");
        write(d, "only.txt", "mine\n");
    });
    (base, [a, b, c])
}

#[test]
fn attempts_are_grouped_by_what_they_hold_at_each_changed_path() {
    let env = Env::new();
    let (base, [(a, a_tree), (b, b_tree), (c, c_tree)]) = three_attempts(&env);
    let v = compare(&env, &[&a, &b, &c]);
    assert_eq!(
        v,
        json!({
            "base": base,
            "snapshots": [
                // `shared.txt` -1 +1, `doomed.txt` -1.
                unchecked(&a, &a_tree, 2, 1, 2),
                // `shared.txt` -1 +1, `doomed.txt` -1 +2.
                unchecked(&b, &b_tree, 2, 3, 2),
                // `shared.txt` -1 +1, `only.txt` +1.
                unchecked(&c, &c_tree, 2, 2, 1),
            ],
            "paths": [
                {
                    "path": "doomed.txt",
                    "groups": [[a], [b], [c]],
                    "unchanged": [c],
                    "deleted": [a],
                },
                {
                    "path": "only.txt",
                    "groups": [[a, b], [c]],
                    "unchanged": [a, b],
                    "deleted": [],
                },
                {
                    "path": "shared.txt",
                    "groups": [[a, b], [c]],
                    "unchanged": [],
                    "deleted": [],
                },
            ],
            "identical": [],
        })
    );
    // The counts are `diff --stat`'s.
    for (id, summary) in [&a, &b, &c].iter().zip(v["snapshots"].as_array().unwrap()) {
        let (code, d) = env.json(&["diff", &base, id]);
        assert_eq!(code, 0, "{d}");
        assert_eq!(d["stats"]["files"], summary["files"]);
        assert_eq!(d["stats"]["insertions"], summary["insertions"]);
        assert_eq!(d["stats"]["deletions"], summary["deletions"]);
    }

    // The table: one column an attempt, the same number where they agree.
    let out = env.cairn(&["compare", &a, &b, &c]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let row = |path: &str| -> Vec<String> {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{path} ")))
            .unwrap_or_else(|| panic!("no row for {path}:\n{text}"));
        line.split_whitespace().skip(1).map(str::to_owned).collect()
    };
    assert_eq!(row("path"), ["A", "B", "C"], "{text}");
    assert_eq!(row("doomed.txt"), ["-", "1", "."], "{text}");
    assert_eq!(row("only.txt"), [".", ".", "1"], "{text}");
    assert_eq!(row("shared.txt"), ["1", "1", "2"], "{text}");
    assert!(text.contains(&format!("base {}", &base[..12])), "{text}");
    for (label, id, counts) in [("A", &a, "+1 -2"), ("B", &b, "+3 -2"), ("C", &c, "+2 -1")] {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{label} {}", &id[..12])))
            .unwrap_or_else(|| panic!("no legend line for {label}:\n{text}"));
        assert!(line.contains(counts), "{line}");
        assert!(line.contains("2 files"), "{line}");
    }
}

#[test]
fn equal_trees_are_identical_and_an_explicit_base_widens_the_paths() {
    let env = Env::new();
    let (project, first) = onboard(&env, "project", BASE);
    // A second base on top of the first: the attempts' nearest common ancestor.
    write(&project, "keep.txt", "kept, edited\n");
    let (code, v) = env.json(&["snapshot", project.as_str()]);
    assert_eq!(code, 0, "{v}");
    let second = v["snapshot"].as_str().unwrap().to_owned();
    let fix = |d: &Utf8PathBuf| write(d, "shared.txt", "fixed\n");
    let (x, x_tree) = attempt(&env, &second, "x", fix);
    let (y, y_tree) = attempt(&env, &second, "y", fix);
    let (z, z_tree) = attempt(&env, &second, "z", |d| write(d, "shared.txt", "other\n"));
    assert_eq!(x_tree, y_tree);

    let v = compare(&env, &[&x, &z, &y]);
    assert_eq!(
        v,
        json!({
            "base": second,
            "snapshots": [
                unchecked(&x, &x_tree, 1, 1, 1),
                unchecked(&z, &z_tree, 1, 1, 1),
                unchecked(&y, &y_tree, 1, 1, 1),
            ],
            "paths": [{
                "path": "shared.txt",
                "groups": [[x, y], [z]],
                "unchanged": [],
                "deleted": [],
            }],
            "identical": [[x, y]],
        })
    );
    let text = stdout(&env.cairn(&["compare", &x, &z, &y]));
    assert!(text.contains("identical trees: A = C"), "{text}");

    // Against the first base, `keep.txt` (changed on the way) is a path all agree on.
    let v = compare(&env, &["--base", &first, &x, &z, &y]);
    assert_eq!(v["base"], first.as_str());
    assert_eq!(
        v["paths"],
        json!([
            {"path": "keep.txt", "groups": [[x, z, y]], "unchanged": [], "deleted": []},
            {"path": "shared.txt", "groups": [[x, y], [z]], "unchanged": [], "deleted": []},
        ])
    );
    assert_eq!(v["snapshots"][0]["files"], 2);
    assert_eq!(v["snapshots"][0]["insertions"], 2);
    assert_eq!(v["snapshots"][0]["deletions"], 2);
    assert_eq!(v["identical"], json!([[x, y]]));
}

#[test]
fn each_attempt_shows_the_checks_of_its_tree() {
    let env = Env::new();
    let (_, [(a, _), (b, _), (c, _)]) = three_attempts(&env);
    let check = [
        "--check",
        "fixed",
        "--",
        "grep",
        "-qx",
        "fixed",
        "shared.txt",
    ];
    for (id, passes) in [(&a, true), (&c, false)] {
        let mut args = vec!["verify", id.as_str()];
        args.extend(check);
        let (code, v) = env.json(&args);
        assert_eq!(code, if passes { 0 } else { 1 }, "{v}");
    }
    let v = compare(&env, &[&a, &b, &c]);
    let checks = |at: usize| v["snapshots"][at]["checks"].as_array().unwrap().clone();
    assert_eq!(checks(0).len(), 1, "{v}");
    assert_eq!(checks(0)[0]["check"], "fixed");
    assert_eq!(checks(0)[0]["passed"], true);
    assert_eq!(checks(1), Vec::<Value>::new(), "{v}");
    assert_eq!(checks(2).len(), 1, "{v}");
    assert_eq!(checks(2)[0]["passed"], false);
    assert_eq!(checks(2)[0]["exit_code"], 1);
    // As `checks` lists them.
    let (_, listed) = env.json(&["checks", &c]);
    assert_eq!(listed["checks"].as_array().unwrap(), &checks(2));

    let text = stdout(&env.cairn(&["compare", &a, &b, &c]));
    let legend = |label: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{label} ")))
            .unwrap_or_else(|| panic!("no legend line for {label}:\n{text}"))
            .to_owned()
    };
    assert!(legend("A").ends_with("fixed pass"), "{text}");
    assert!(legend("B").ends_with("no checks"), "{text}");
    assert!(legend("C").ends_with("fixed FAIL"), "{text}");
}

#[test]
fn bad_names_the_same_snapshot_twice_and_unrelated_histories_are_refused() {
    let env = Env::new();
    let (base, [(a, _), (b, _), _]) = three_attempts(&env);

    let (code, v) = env.json(&["compare", &a, "no-such-attempt"]);
    assert_eq!(code, 2, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no-such-attempt"),
        "{v}"
    );
    let (code, v) = env.json(&["compare", &a, &b, "--base", "no-such-base"]);
    assert_eq!(code, 2, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no-such-base"),
        "{v}"
    );

    // A prefix and the whole id of one snapshot.
    let (code, v) = env.json(&["compare", &a[..12], &b, &a]);
    assert_eq!(code, 2, "{v}");
    assert_eq!(v["error"]["code"], "usage", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains(&a[..12]) && message.contains(&a), "{v}");

    let out = env.cairn(&["compare", &a]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("SNAP"), "{}", stderr(&out));

    // A history of its own: no common ancestor with the attempts.
    let stranger = env
        .commit(&[("x.txt", b"x\n")], Vec::new(), "unrelated")
        .to_string();
    let (code, v) = env.json(&["compare", &a, &stranger]);
    assert_eq!(code, 2, "{v}");
    assert_eq!(v["error"]["code"], "no_base", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains(&a) && message.contains(&stranger), "{v}");
    // Unless a base is named.
    let v = compare(&env, &["--base", &base, &a, &stranger]);
    assert_eq!(v["base"], base.as_str());
}

#[test]
fn eight_attempts_with_long_paths_fit_in_80_columns() {
    let env = Env::new();
    let deep = format!(
        "src/{}module_with_a_rather_long_name.rs",
        "nested_folder/".repeat(8)
    );
    let files: Vec<(String, Vec<u8>)> = (0..4)
        .map(|i| (format!("{deep}{i}"), b"base\n".to_vec()))
        .collect();
    fn tree(files: &[(String, Vec<u8>)]) -> Vec<(&str, &[u8])> {
        files
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_slice()))
            .collect()
    }
    let base = env.commit(&tree(&files), Vec::new(), "base");
    let mut ids = Vec::new();
    for n in 0..8u8 {
        let mut mine = files.clone();
        // Attempts agree in pairs on the first file; each changes another of its own.
        mine[0].1 = vec![b'a' + n / 2, b'\n'];
        mine[1 + usize::from(n % 3)].1 = vec![b'0' + n, b'\n'];
        ids.push(env.commit(&tree(&mine), vec![base], "attempt").to_string());
    }
    // Checks with long names on two of them.
    for (id, command, exit) in [(&ids[0], "true", 0), (&ids[5], "false", 1)] {
        let (code, v) = env.json(&[
            "verify",
            id,
            "--check",
            "the-integration-suite-against-a-real-database",
            "--",
            command,
        ]);
        assert_eq!(code, exit, "{v}");
    }
    let args: Vec<&str> = std::iter::once("compare")
        .chain(ids.iter().map(String::as_str))
        .collect();
    let out = env.cairn(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for line in text.lines() {
        assert!(
            line.chars().count() <= 80,
            "{} columns: {line:?}\n{text}",
            line.chars().count()
        );
    }
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["path", "A", "B", "C", "D", "E", "F", "G", "H"]),
        "{text}"
    );
    // Shortened in the middle: the file's name stays whole.
    let row = text
        .lines()
        .find(|l| l.starts_with("src/") && l.contains("...") && l.contains("long_name.rs0 "))
        .unwrap_or_else(|| panic!("no shortened row for the first file:\n{text}"));
    assert_eq!(
        row.split_whitespace().skip(1).collect::<Vec<_>>(),
        ["1", "1", "2", "2", "3", "3", "4", "4"],
        "{text}"
    );
    assert!(
        text.contains("the-integration-suite-against-a-real-database pass"),
        "{text}"
    );
    assert!(
        text.contains("the-integration-suite-against-a-real-database FAIL"),
        "{text}"
    );
    for (label, id) in ["A", "B", "C", "D", "E", "F", "G", "H"].iter().zip(&ids) {
        assert!(text.contains(&format!("{label} {}", &id[..12])), "{text}");
    }
}

#[test]
fn the_route_and_the_tool_answer_as_the_command_line() {
    let env = Env::new();
    let (_, [(a, _), (b, _), (c, _)]) = three_attempts(&env);
    let expected = compare(&env, &[&a, &b, &c]);
    let args = json!({ "snapshots": [a, b, c] });
    {
        let server = Server::start(&env);
        let client = server.client();
        let (status, answer) = client.call("compare", &args).unwrap();
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer, expected);
        // One snapshot: the engine refuses it (the command line's parser does too).
        let (status, answer) = client
            .call("compare", &json!({ "snapshots": [a] }))
            .unwrap();
        assert_eq!(status, 422, "{answer}");
        assert_eq!(answer["error"]["code"], "usage", "{answer}");
        assert!(answer.to_string().contains("at least two"), "{answer}");
        assert!(server.stop().success());
    }
    let mut mcp = Mcp::start(&env, &[]);
    mcp.call(1, "compare", args);
    let (is_error, answer) = mcp.tool_answer(1, Duration::from_secs(60));
    assert!(!is_error, "{answer}");
    assert_eq!(answer, expected);
}
