//! A temporary store, a git repository onboarded into it, and an agent's checkout (shared
//! with `cairn-git`'s tests, which give the engine its git backend).

#![allow(dead_code)]

use std::process::Command;

use cairn_engine::{Call, CheckoutOptions, Engine, OnboardOptions, SnapshotOptions};
use camino::{Utf8Path, Utf8PathBuf};

/// Runs git in `dir`, failing the test if it fails; its stdout.
pub fn git(dir: &Utf8Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir.as_str())
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir.as_str())
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub struct World {
    _tmp: tempfile::TempDir,
    pub dir: Utf8PathBuf,
    pub engine: Engine,
    /// A git repository with one commit, onboarded.
    pub repo: Utf8PathBuf,
    /// Its onboarded snapshot.
    pub base: String,
    /// A checkout of it, where an agent works.
    pub work: Utf8PathBuf,
}

impl World {
    /// A world whose engine has no git backend.
    pub fn new() -> World {
        World::with_engine(|store| Engine::create(store).expect("a store"))
    }

    /// A world whose engine `open` opens on the store folder it is given.
    pub fn with_engine(open: impl FnOnce(Utf8PathBuf) -> Engine) -> World {
        let tmp = tempfile::tempdir().expect("a temporary directory");
        let dir = Utf8PathBuf::try_from(tmp.path().canonicalize().expect("canonical"))
            .expect("a UTF-8 temporary directory");
        let repo = dir.join("repo");
        std::fs::create_dir_all(repo.join("src")).expect("mkdir");
        git(&repo, &["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("src/lib.rs"), "fn a() {}\n").expect("write");
        std::fs::write(repo.join("README"), "hello\n").expect("write");
        git(&repo, &["add", "."]);
        git(&repo, &["commit", "-q", "-m", "first"]);
        let engine = open(dir.join("store"));
        let call = Call::new(dir.clone());
        let onboarded = engine
            .onboard(&call, OnboardOptions::new(&repo))
            .expect("onboard");
        let work = dir.join("work");
        engine
            .checkout(
                &call,
                CheckoutOptions::new(onboarded.snapshot.to_string(), &work),
            )
            .expect("checkout");
        World {
            _tmp: tmp,
            dir,
            engine,
            repo,
            base: onboarded.snapshot.to_string(),
            work,
        }
    }

    pub fn call(&self) -> Call<'static> {
        Call::new(self.dir.clone())
    }

    /// Edits the agent's checkout and snapshots it; the new snapshot.
    pub fn edit(&self) -> String {
        std::fs::write(self.work.join("src/lib.rs"), "fn a() { changed }\n").expect("write");
        std::fs::write(self.work.join("NEW"), "new\n").expect("write");
        self.engine
            .snapshot(
                &self.call(),
                SnapshotOptions::new(&self.work).message("edit"),
            )
            .expect("snapshot")
            .snapshot
            .to_string()
    }
}

/// `value` has every field in `names`.
#[track_caller]
pub fn has(value: &serde_json::Value, names: &[&str]) {
    for name in names {
        assert!(value.get(name).is_some(), "no {name:?} in {value}");
    }
}

/// Every item of the list `value[list]` (which must not be empty) has `names`.
#[track_caller]
pub fn items_have(value: &serde_json::Value, list: &str, names: &[&str]) {
    let items = value[list]
        .as_array()
        .unwrap_or_else(|| panic!("{list} is no list: {value}"));
    assert!(!items.is_empty(), "{list} is empty: {value}");
    for item in items {
        has(item, names);
    }
}

/// An outcome as the JSON a face sends.
pub fn json(outcome: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(outcome).expect("an outcome serializes")
}

/// The `path`s of the list `value[list]`, in order.
#[track_caller]
pub fn paths(value: &serde_json::Value, list: &str) -> Vec<String> {
    value[list]
        .as_array()
        .unwrap_or_else(|| panic!("{list} is no list: {value}"))
        .iter()
        .map(|item| {
            item["path"]
                .as_str()
                .unwrap_or_else(|| panic!("an item of {list} without a path: {value}"))
                .to_owned()
        })
        .collect()
}
