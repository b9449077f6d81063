//! `cairn-git`: the gitoxide backend of `cairn-engine`. [`Gitoxide`] implements
//! [`cairn_engine::Git`] with `merge_back` (the one crate that knows gitoxide): the git
//! source of an onboarded directory, `onboard --git`, `merge`, `combine` and recovering an
//! interrupted `merge --checkout`, with each failure's exit status and `--json` code. It is
//! the only glue between the engine and git; the engine itself links neither.
//!
//! An embedder adds both crates and gives the engine this backend; here a whole agent loop,
//! from onboarding a git repository to merging the agent's work back as a commit:
//!
//! ```
//! use cairn_engine::{Call, CheckoutOptions, DiffOptions, Engine, MergeOptions, OnboardOptions,
//!     SnapshotOptions};
//! use cairn_git::Gitoxide;
//! # fn git(dir: &std::path::Path, args: &[&str]) {
//! #     let ok = std::process::Command::new("git").arg("-C").arg(dir).args(args)
//! #         .env("GIT_AUTHOR_NAME", "a").env("GIT_AUTHOR_EMAIL", "a@example.com")
//! #         .env("GIT_COMMITTER_NAME", "a").env("GIT_COMMITTER_EMAIL", "a@example.com")
//! #         .status().expect("git runs").success();
//! #     assert!(ok, "git {args:?}");
//! # }
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let tmp = tempfile::tempdir()?;
//! # let dir = camino::Utf8PathBuf::try_from(tmp.path().to_path_buf())?;
//! // A git repository with one commit.
//! let repo = dir.join("repo");
//! std::fs::create_dir(&repo)?;
//! # git(repo.as_std_path(), &["init", "-q", "-b", "main"]);
//! std::fs::write(repo.join("hello.txt"), "hello\n")?;
//! # git(repo.as_std_path(), &["add", "."]);
//! # git(repo.as_std_path(), &["commit", "-q", "-m", "first"]);
//!
//! // Open (creating) a store with git support, and act from `dir`.
//! let engine = Engine::create(dir.join("store"))?.with_git(Gitoxide);
//! let call = Call::new(dir.clone());
//!
//! // Onboard the repository, and check its snapshot out where an agent may work.
//! let onboarded = engine.onboard(&call, OnboardOptions::new(&repo))?;
//! assert!(onboarded.source.is_some(), "the commit it came from is recorded");
//! let work = dir.join("agent");
//! engine.checkout(&call, CheckoutOptions::new(onboarded.snapshot.to_string(), &work))?;
//!
//! // The agent edits; snapshot what it did and look at the change.
//! std::fs::write(work.join("hello.txt"), "hello, world\n")?;
//! let snap = engine.snapshot(&call, SnapshotOptions::new(&work).message("greet the world"))?;
//! let diff = engine.diff(
//!     &call,
//!     DiffOptions::new(onboarded.snapshot.to_string(), snap.snapshot.to_string()),
//! )?;
//! assert_eq!(diff.modified.len(), 1);
//!
//! // Merge it back into the repository as a commit on a new branch.
//! let merged = engine.merge(&call, MergeOptions::new(snap.snapshot.to_string(), &repo))?;
//! assert!(merged.merged, "{:?}", merged.conflicts);
//! # Ok(())
//! # }
//! ```
#![deny(clippy::unwrap_used)]

/// Where `merge_back` keeps what a format 1 store held in a table of its own.
pub use merge_back::FORMAT_1_TABLES;

use cairn_engine::{
    Code, Git, GitCombine, GitCombined, GitError, GitImport, GitImported, GitMerge, GitMerged,
    GitRecovered,
};
use camino::Utf8Path;
use merge_back::{CombineTreesError, ExportError, ImportError, MergeError, MergeSnapshotError};

/// The engine's git backend through gitoxide (`merge_back`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Gitoxide;

impl Git for Gitoxide {
    fn source(&self, dir: &Utf8Path) -> Option<cas::GitSource> {
        merge_back::git_source(dir)
    }

    fn import(&self, store: &cas::Store, import: &GitImport<'_>) -> Result<GitImported, GitError> {
        let out = merge_back::import(
            store,
            import.repo,
            import.rev,
            import.message,
            import.labels,
            import.deny,
            import.records,
        )
        .map_err(import_error)?;
        Ok(GitImported {
            snapshot: out.snapshot,
            tree: out.tree,
            commit: out.commit,
            files: out.files,
            bytes: out.bytes,
            skipped: out.skipped,
        })
    }

    fn merge(&self, store: &cas::Store, merge: &GitMerge<'_>) -> Result<GitMerged, GitError> {
        let options = merge_back::MergeSnapshotOptions {
            repo: merge.repo,
            snapshot: merge.snapshot,
            base: merge.base,
            branch: merge.branch,
            message: merge.message,
            checkout: merge.checkout,
            trailers: merge.trailers,
        };
        let out = merge_back::merge_snapshot(store, &options).map_err(merge_error)?;
        Ok(GitMerged {
            base: out.base,
            commit: out.commit,
            conflicts: out
                .conflicts
                .into_iter()
                .map(|c| (c.path, kind_name(c.kind)))
                .collect(),
            dirty: out.dirty,
        })
    }

    fn combine(
        &self,
        store: &cas::Store,
        combine: &GitCombine<'_>,
    ) -> Result<GitCombined, GitError> {
        let out = merge_back::combine_trees(store, combine.base, combine.inputs)
            .map_err(combine_error)?;
        Ok(GitCombined {
            tree: out.tree,
            objects: out.objects,
            conflicts: out
                .conflicts
                .into_iter()
                .map(|c| (c.path, kind_name(c.kind), c.inputs))
                .collect(),
        })
    }

    fn recover_merge(
        &self,
        store: &cas::Store,
        dir: &Utf8Path,
    ) -> Result<Option<GitRecovered>, GitError> {
        let done = merge_back::recover_checkout(store, dir).map_err(merge_error)?;
        Ok(done.map(|d| GitRecovered {
            workdir: d.workdir,
            commit: d.commit,
            paths: d.paths,
        }))
    }
}

/// A conflict's kind as `cairn merge` reports it (`content`, `add/add`, ...).
fn kind_name(kind: merge_back::ConflictKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn merge_error(e: MergeSnapshotError) -> GitError {
    use MergeSnapshotError as E;
    let code = match &e {
        E::Store(s) | E::Export(ExportError::Store(s)) => Code::of_store(s),
        E::Git { .. } | E::Checkout { .. } | E::Export(_) | E::Merge(MergeError::Git { .. }) => {
            Code::Git
        }
        E::Interrupted { .. } => Code::Interrupted,
        E::BranchExists { .. } | E::BranchConflict { .. } => Code::BranchExists,
        E::InProgress { .. } => Code::RepositoryBusy,
        E::NoBase { .. } => Code::NoBase,
        E::InvalidBranch { .. } => Code::InvalidName,
        _ => Code::InvalidInput,
    };
    GitError::new(code, e)
}

fn combine_error(e: CombineTreesError) -> GitError {
    let code = match &e {
        CombineTreesError::Store(s) | CombineTreesError::Export(ExportError::Store(s)) => {
            Code::of_store(s)
        }
        CombineTreesError::Scratch { .. } => Code::Io,
        CombineTreesError::Refused { .. } => Code::InvalidInput,
        _ => Code::Git,
    };
    GitError::new(code, e)
}

fn import_error(e: ImportError) -> GitError {
    let code = match &e {
        ImportError::Store(s) => Code::of_store(s),
        ImportError::Git { .. } => Code::Git,
        _ => Code::InvalidInput,
    };
    GitError::new(code, e)
}
