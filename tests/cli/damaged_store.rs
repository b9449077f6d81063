//! A damaged database file: every command reports it (exit 3 naming the store; `fsck` exit 1
//! listing what it could not read) and none panics.

use camino::Utf8Path;

use crate::support::{Env, stderr, stdout};

const PAGE: usize = 4096;

/// Checks one command's answer on a damaged store; returns whether it failed.
fn check_answer(
    page: usize,
    args: &[&str],
    out: &std::process::Output,
    store: &Utf8Path,
    fsck: bool,
) -> bool {
    let code = out.status.code();
    let err = stderr(out);
    let text = stdout(out);
    let what = format!("page {page}, {args:?}: exit {code:?}\nstdout: {text}\nstderr: {err}");
    assert!(!err.contains("panicked"), "{what}");
    match code {
        Some(0) => false,
        Some(1) if fsck => {
            let v: serde_json::Value = serde_json::from_str(text.trim()).expect(&what);
            let problems = v["problems"].as_array().expect(&what);
            assert!(!problems.is_empty(), "fsck lists what it found: {what}");
            assert!(
                v["message"].as_str().expect(&what).contains(store.as_str()),
                "{what}"
            );
            true
        }
        Some(3) => {
            let v: serde_json::Value = serde_json::from_str(text.trim()).expect(&what);
            let message = v["error"]["message"].as_str().expect(&what);
            assert!(v["error"]["code"].is_string(), "{what}");
            assert!(message.contains(store.as_str()), "names the store: {what}");
            true
        }
        _ => panic!("a damaged store gives exit 3 (fsck: 1 or 3): {what}"),
    }
}

#[test]
fn a_damaged_page_anywhere_is_reported_and_never_panics() {
    let env = Env::new();
    let src = env.path().join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    for (name, body) in [
        ("a.txt", "alpha\n"),
        ("b.txt", "beta\n"),
        ("sub/c.txt", "gamma\n"),
    ] {
        std::fs::write(src.join(name), body).unwrap();
    }
    let (code, v) = env.json(&["onboard", src.as_str()]);
    assert_eq!(code, 0, "{v}");
    let snap = v["snapshot"].as_str().unwrap().to_owned();
    let pristine = std::fs::read(env.store().join(cas::DATABASE_FILE)).unwrap();
    assert!(pristine.len().is_multiple_of(PAGE) && pristine.len() >= 4 * PAGE);

    let damaged = env.path().join("damaged");
    std::fs::create_dir_all(&damaged).unwrap();
    let db = damaged.join(cas::DATABASE_FILE);
    let mut failed_pages = 0;
    for page in 0..pristine.len() / PAGE {
        let mut bytes = pristine.clone();
        bytes[page * PAGE] ^= 0xff;
        std::fs::write(&db, &bytes).unwrap();
        let dest = env.path().join(format!("wt{page}"));
        let commands: [(Vec<&str>, bool); 4] = [
            (vec!["fsck"], true),
            (vec!["show", &snap], false),
            (vec!["log", &snap], false),
            (vec!["checkout", &snap, dest.as_str()], false),
        ];
        let mut any_failed = false;
        for (args, fsck) in &commands {
            let mut cmd = env.command();
            cmd.args(["--json", "--store", damaged.as_str()]).args(args);
            let out = cmd.output().unwrap();
            any_failed |= check_answer(page, args, &out, &damaged, *fsck);
        }
        failed_pages += usize::from(any_failed);
    }
    assert!(
        failed_pages > 0,
        "flipping page-type bytes damages the store somewhere"
    );
}
