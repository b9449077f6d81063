//! A store written by the format 1 build (`fixtures/store-format-1`: two worktrees, a
//! checkpoint, an undo, a merge into git, a ref) reads exactly as it did then, after the
//! upgrade to side tables that its first open does.

use camino::Utf8PathBuf;

use crate::support::Env;

fn fixture() -> Utf8PathBuf {
    Utf8PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/store-format-1")
}

fn expected(name: &str) -> String {
    std::fs::read_to_string(fixture().join("expected").join(name)).unwrap()
}

#[test]
fn a_format_1_store_reads_as_it_did_with_format_1() {
    let env = Env::new();
    std::fs::create_dir_all(env.store()).unwrap();
    std::fs::copy(
        fixture().join("store.redb"),
        env.store().join(cas::DATABASE_FILE),
    )
    .unwrap();
    for (args, file) in [
        (&["worktree", "list"][..], "worktree-list.json"),
        (&["op", "log", "/tmp/fx/wt"][..], "op-log-wt.json"),
        (&["op", "log", "/tmp/fx/proj"][..], "op-log-proj.json"),
        (&["log", "ea722df952d0"][..], "log.json"),
        (&["fsck"][..], "fsck.json"),
        (&["ref", "list"][..], "ref-list.json"),
    ] {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = env.cairn(&all);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            expected(file),
            "{args:?}"
        );
    }
    let out = env.cairn(&["show", "ea722df952d0:a.txt"]);
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        expected("show-a.txt")
    );

    // Everything in it is held by a ref, a worktree or an op-log entry: gc keeps it all.
    let (code, gc) = env.json(&["gc", "--dry-run"]);
    assert_eq!(code, 0, "{gc}");
    assert_eq!(gc["removed"], serde_json::json!([]), "{gc}");
}
