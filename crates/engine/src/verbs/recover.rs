//! `recover [DIR]`: an operation a crash interrupted finished or rolled back (and the views
//! killed `verify`s left removed).

use camino::Utf8PathBuf;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine};
use crate::error::Error;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// `recover [DIR]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecoverOptions {
    /// The worktree or repository (default: the caller's directory).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub dir: Option<Utf8PathBuf>,
}

/// What `recover` finished.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecoverOutcome {
    /// The worktree (or repository).
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// The operation finished (none: nothing to do).
    pub recovered: Option<String>,
    /// Paths it wrote.
    pub paths: u64,
    /// For a `merge --checkout`: the commit HEAD is at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

impl Engine {
    /// `cairn recover [DIR]`.
    pub fn recover(&self, call: &Call, options: RecoverOptions) -> Result<RecoverOutcome, Error> {
        let dir = call.dir(options.dir.as_deref());
        // What a killed `verify` left, whichever worktree this is about.
        crate::verbs::verify::remove_stale_views();
        let store = self.store(Access::Write)?;
        // A repository left half way by `merge --checkout` (registered as a worktree or not).
        let recovered = match self.git() {
            Some(git) => git.recover_merge(&store, &dir)?,
            None => match crate::git::pending_merge(&store, &dir)? {
                Some(repo) => return Err(crate::git::no_git(&repo)),
                None => None,
            },
        };
        if let Some(done) = recovered {
            let onboarded = fs_manager::find_worktree(&store.reader()?, &done.workdir)?
                .is_some_and(|r| r.root == done.workdir);
            if onboarded {
                let capture = fs_manager::CaptureOptions {
                    message: "merge, finished by recover",
                    ..fs_manager::CaptureOptions::default()
                };
                self.worktrees
                    .record_change(&store, &done.workdir, "merge", &capture)?;
            }
            return Ok(RecoverOutcome {
                worktree: done.workdir,
                recovered: Some("merge --checkout".to_owned()),
                paths: done.paths,
                commit: Some(done.commit),
            });
        }
        let out = self.worktrees.recover(&store, &dir)?;
        Ok(RecoverOutcome {
            worktree: out.root,
            recovered: out.op,
            paths: out.paths,
            commit: None,
        })
    }
}

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Finish or roll back an operation a crash interrupted.
    Recover(RecoverOptions) -> RecoverOutcome = "recover" via recover [];
}

impl VerbSpec for verbs::Recover {}
