//! A damaged database file: every command reports it (exit 3 naming the store; `fsck` exit 1
//! listing what it could not read) and none panics.

use camino::Utf8Path;

use crate::support::{Env, stderr, stdout};

const PAGE: usize = 4096;

/// Checks one command's answer on a store damaged as `damage` says; returns whether it
/// failed.
fn check_answer(
    damage: &str,
    args: &[&str],
    out: &std::process::Output,
    store: &Utf8Path,
    fsck: bool,
) -> bool {
    let code = out.status.code();
    let err = stderr(out);
    let text = stdout(out);
    let what = format!("{damage}, {args:?}: exit {code:?}\nstdout: {text}\nstderr: {err}");
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

/// A store of a few pages, made by onboarding a small folder: its snapshot and its
/// database file's bytes.
fn small_store(env: &Env) -> (String, Vec<u8>) {
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
    (snap, pristine)
}

#[test]
fn a_damaged_page_anywhere_is_reported_and_never_panics() {
    let env = Env::new();
    let (snap, pristine) = small_store(&env);

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
            any_failed |= check_answer(&format!("page {page}"), args, &out, &damaged, *fsck);
        }
        failed_pages += usize::from(any_failed);
    }
    assert!(
        failed_pages > 0,
        "flipping page-type bytes damages the store somewhere"
    );
}

/// Flipped bits in the allocator's region page: a write (checkout) on such a store gets an
/// answer naming the store, never an abort or a panic. redb can panic in its allocator while
/// holding a lock that a table's drop then needs (a panic while unwinding aborts the
/// process), and its closing commit can panic when the store is dropped.
#[test]
fn a_damaged_allocator_page_never_aborts_a_write() {
    let env = Env::new();
    let (snap, pristine) = small_store(&env);
    let damaged = env.path().join("damaged");
    std::fs::create_dir_all(&damaged).unwrap();
    let db = damaged.join(cas::DATABASE_FILE);
    // Where this store's allocator keeps what those two trip over.
    for at in (PAGE + 136..PAGE + 152).chain(PAGE + 240..PAGE + 248) {
        for bit in 0..8 {
            let mut bytes = pristine.clone();
            bytes[at] ^= 1 << bit;
            std::fs::write(&db, &bytes).unwrap();
            let dest = env.path().join(format!("wt{at}-{bit}"));
            let args = ["checkout", &snap, dest.as_str()];
            let mut cmd = env.command();
            cmd.args(["--json", "--store", damaged.as_str()]).args(args);
            let out = cmd.output().unwrap();
            check_answer(
                &format!("bit {bit} of byte {at}"),
                &args,
                &out,
                &damaged,
                false,
            );
        }
    }
}

/// A blob that a stored tree names but the store cannot find (its key damaged) is a damaged
/// store (exit 3, `corrupt`), not an unknown id the user gave (exit 2).
#[test]
fn a_missing_blob_that_a_tree_names_is_corruption() {
    let env = Env::new();
    let content = b"the content of a file whose key gets damaged\n";
    let snap = env.commit(&[("f.txt", content)], vec![], "m").to_hex();
    let blob = blake3::hash(content);
    let db = env.store().join(cas::DATABASE_FILE);
    let pristine = std::fs::read(&db).unwrap();
    let hits: Vec<usize> = pristine
        .windows(32)
        .enumerate()
        .filter(|(_, w)| *w == blob.as_bytes())
        .map(|(i, _)| i)
        .collect();
    assert!(!hits.is_empty(), "the blob id is in the file");
    let mut corrupt = 0;
    for at in hits {
        let mut bytes = pristine.clone();
        bytes[at + 31] ^= 0x01;
        std::fs::write(&db, &bytes).unwrap();
        let dest = env.path().join(format!("wt{at}"));
        let out = env.cairn(&["--json", "checkout", &snap, dest.as_str()]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        match out.status.code() {
            Some(0) => {}
            // Damage to one object names the object (the blob, or the tree naming it).
            Some(3) => {
                assert_eq!(v["error"]["code"], "corrupt", "{v}");
                let message = v["error"]["message"].as_str().unwrap();
                corrupt += usize::from(message.contains(blob.to_hex().as_str()));
            }
            code => panic!("flipping a bit of the id at {at}: exit {code:?}, {v}"),
        }
    }
    assert!(
        corrupt > 0,
        "some copy of the id is the blob's key, its loss named"
    );
}
