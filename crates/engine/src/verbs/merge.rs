//! `merge`: bring a snapshot back into the git repository it came from.

use camino::Utf8PathBuf;
use cas::{AttestationId, SnapshotId, TreeId};
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, resolve_snapshot};
use crate::error::{Code, Error};
use crate::git::GitMerge;
use crate::path::RawPath;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;
use crate::worktrees::canonical_dir as canonical;

/// `merge SNAP --into REPO [--base SNAP] [--branch B] [--checkout] [-m MSG] [--require
/// NAME]… [--signed-by FILE]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MergeOptions {
    /// The snapshot to merge.
    #[schemars(extend("x-snapshot" = true))]
    pub snapshot: String,
    /// The git repository.
    #[schemars(with = "String")]
    pub into: Utf8PathBuf,
    /// The common ancestor (default: the nearest ancestor onboarded from the repository).
    #[serde(default)]
    #[schemars(extend("x-cli-only" = true, "x-snapshot" = true))]
    pub base: Option<String>,
    /// The branch to create.
    #[serde(default)]
    pub branch: Option<String>,
    /// Commit to the current branch and update its files.
    #[serde(default)]
    pub checkout: bool,
    /// Commit message.
    #[serde(default)]
    pub message: Option<String>,
    /// Checks the snapshot's tree must have a passing attestation of (`verify`), or nothing is merged; each becomes a `Cairn-Verified: NAME ATTESTATION` trailer of the commit.
    #[serde(default)]
    pub require: Vec<String>,
    /// An allowed-signers file (ssh-keygen's format): a required check counts only if a key it lists signed its attestation.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub signed_by: Option<Utf8PathBuf>,
}

impl MergeOptions {
    /// Merge `snapshot` into the repository `into`, on a new branch.
    pub fn new(snapshot: impl Into<String>, into: impl Into<Utf8PathBuf>) -> MergeOptions {
        MergeOptions {
            snapshot: snapshot.into(),
            into: into.into(),
            ..MergeOptions::default()
        }
    }
}

/// A conflicting path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MergeConflictOut {
    /// The path.
    pub path: RawPath,
    /// `content`, `add/add`, `modify/delete`, `type`, `rename`, `binary`.
    pub kind: String,
}

/// A required check that does not count, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Unverified {
    /// The check's name.
    pub check: String,
    /// Why it does not count: no attestation, failed (exit N / timed out), not signed, signed by a key the allowed signers do not list, or a signature that does not match the attestation's bytes.
    pub reason: String,
}

/// A required check and the attestation that proves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Verified {
    /// The check's name.
    pub check: String,
    /// Its passing attestation.
    #[schemars(with = "String")]
    pub attestation: AttestationId,
    /// With `signed_by`: the fingerprint of the listed key that signed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
}

/// Why `merge --require` cannot be weighed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequireError {
    /// A name no check can have.
    #[error("--require {name:?}: a check's name is 1 to 255 characters, no control characters")]
    Name {
        /// The name.
        name: String,
    },
    /// `--signed-by` without `--require`: it would require nothing.
    #[error("--signed-by {path}: it says whose checks count, so it needs --require NAME")]
    SignedByAlone {
        /// The allowed-signers file.
        path: Utf8PathBuf,
    },
    /// The allowed-signers file cannot be read or has a line cairn cannot apply.
    #[error("--signed-by {0}")]
    Signers(#[from] attest::SignersError),
    /// The recorded attestations of the tree cannot be read.
    #[error(transparent)]
    Record(#[from] cas::AttestationReadError),
}

crate::error::coded!(RequireError);

impl RequireError {
    /// Its code.
    pub fn code(&self) -> Code {
        match self {
            RequireError::Name { .. }
            | RequireError::SignedByAlone { .. }
            | RequireError::Signers(_) => Code::Usage,
            RequireError::Record(cas::AttestationReadError::Corrupt { .. }) => Code::Corrupt,
            RequireError::Record(_) => Code::Store,
        }
    }
}

/// What `merge` did: a commit, or conflicts or dirty paths and nothing written (a refusal).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MergeOutcome {
    /// Whether a commit was made.
    pub merged: bool,
    /// The commit.
    pub commit: Option<String>,
    /// Its branch.
    pub branch: Option<String>,
    /// The common ancestor used (refused for `unverified`, before one was looked for: the `base` given, else the snapshot itself).
    pub base: SnapshotId,
    /// Conflicting paths.
    pub conflicts: Vec<MergeConflictOut>,
    /// Paths with uncommitted changes the merge must change.
    pub dirty: Vec<RawPath>,
    /// For an onboarded repository merged with `checkout`: its new snapshot.
    pub worktree_snapshot: Option<SnapshotId>,
    /// The snapshot merged.
    pub snapshot: SnapshotId,
    /// The repository.
    #[schemars(with = "String")]
    pub repository: Utf8PathBuf,
    /// Required checks that do not count (nothing was merged).
    #[serde(default)]
    pub unverified: Vec<Unverified>,
    /// Required checks and their attestations (the commit's `Cairn-Verified` trailers).
    #[serde(default)]
    pub verified: Vec<Verified>,
    /// The refusal, when nothing was merged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The required checks, each once, in the order given, checked as names.
fn required(options: &MergeOptions) -> Result<Vec<&str>, RequireError> {
    if options.require.is_empty()
        && let Some(path) = &options.signed_by
    {
        return Err(RequireError::SignedByAlone { path: path.clone() });
    }
    let mut names: Vec<&str> = Vec::with_capacity(options.require.len());
    for name in &options.require {
        crate::verbs::verify::check_name(name)
            .map_err(|_| RequireError::Name { name: name.clone() })?;
        if !names.contains(&name.as_str()) {
            names.push(name);
        }
    }
    Ok(names)
}

/// Weighs each required check against the attestations of `tree`: a check counts if an
/// attestation of it passed (with `signers`: and one of its signatures is by a key they
/// list and matches its bytes); the newest such is its proof. Otherwise the reason names
/// what the newest attestation of it lacks.
fn weigh(
    reader: &cas::Reader,
    tree: TreeId,
    names: &[&str],
    signers: Option<&attest::AllowedSigners>,
) -> Result<(Vec<Verified>, Vec<Unverified>), Error> {
    let mut found = reader.attestations(tree).map_err(RequireError::from)?;
    found.sort_by(|(a_id, a), (b_id, b)| (b.started, b_id).cmp(&(a.started, a_id)));
    let mut verified = Vec::new();
    let mut unverified = Vec::new();
    for &name in names {
        let of_check: Vec<_> = found.iter().filter(|(_, a)| a.check == name).collect();
        let passing: Vec<_> = of_check.iter().filter(|(_, a)| a.exit.passed()).collect();
        let refuse = |reason: String| Unverified {
            check: name.to_owned(),
            reason,
        };
        let Some((newest_id, _)) = passing.first() else {
            unverified.push(refuse(match of_check.first() {
                None => "no attestation".to_owned(),
                Some((id, a)) => failed(*id, &a.exit),
            }));
            continue;
        };
        let Some(signers) = signers else {
            verified.push(Verified {
                check: name.to_owned(),
                attestation: *newest_id,
                signed_by: None,
            });
            continue;
        };
        // The newest passing attestation a listed key signed; else why the newest is not.
        let mut why = None;
        for (id, attestation) in &passing {
            match trusted_signature(reader, *id, &attestation.encode(), signers)? {
                Ok(fingerprint) => {
                    verified.push(Verified {
                        check: name.to_owned(),
                        attestation: *id,
                        signed_by: Some(fingerprint),
                    });
                    why = None;
                    break;
                }
                Err(reason) => {
                    why.get_or_insert(reason);
                }
            }
        }
        if let Some(reason) = why {
            unverified.push(refuse(reason));
        }
    }
    Ok((verified, unverified))
}

/// Why a check failed, as `unverified` says it.
fn failed(id: AttestationId, exit: &cas::Exit) -> String {
    let how = if exit.timed_out {
        "timed out".to_owned()
    } else if let Some(signal) = exit.signal {
        format!("killed by signal {signal}")
    } else {
        format!("exit {}", exit.code)
    };
    format!("failed ({how}; attestation {id})")
}

/// The fingerprint of a key `signers` list whose signature of attestation `id` matches
/// `bytes`; or why none counts (of its signatures, the most telling: an altered one first).
fn trusted_signature(
    reader: &cas::Reader,
    id: AttestationId,
    bytes: &[u8],
    signers: &attest::AllowedSigners,
) -> Result<Result<String, String>, Error> {
    let signatures = reader.attestation_signatures(id)?;
    if signatures.is_empty() {
        return Ok(Err(format!("not signed (attestation {id})")));
    }
    let mut unlisted = None;
    for (fingerprint, armored) in &signatures {
        let signature = match attest::Signature::from_pem(&String::from_utf8_lossy(armored)) {
            Ok(signature) => signature,
            Err(e) => {
                return Ok(Err(format!(
                    "its signature by {fingerprint} does not match the attestation's bytes ({e}; attestation {id})"
                )));
            }
        };
        match signers.check(bytes, &signature) {
            Ok(trusted) => return Ok(Ok(trusted.fingerprint)),
            Err(attest::Untrusted::UnknownKey { fingerprint }) => {
                unlisted.get_or_insert(fingerprint);
            }
            Err(attest::Untrusted::Mismatch { fingerprint, .. }) => {
                return Ok(Err(format!(
                    "the signature by {fingerprint} does not match the attestation's bytes (attestation {id})"
                )));
            }
            Err(other) => {
                return Ok(Err(format!("{other} (attestation {id})")));
            }
        }
    }
    let fingerprint = unlisted.unwrap_or_default();
    Ok(Err(format!(
        "signed by {fingerprint}, a key the allowed signers do not list (attestation {id})"
    )))
}

impl Engine {
    /// `cairn merge SNAP --into REPO`.
    pub fn merge(&self, call: &Call, options: MergeOptions) -> Result<MergeOutcome, Error> {
        let names = required(&options)?;
        let signers = options
            .signed_by
            .as_ref()
            .map(|path| attest::AllowedSigners::read(&call.path(path)))
            .transpose()
            .map_err(RequireError::from)?;
        let repo = canonical(&call.path(&options.into))?;
        let git = self.git_for(&repo)?;
        let store = self.store(Access::Write)?;
        // `--checkout` writes the repository's working files: never in or around the store.
        if options.checkout {
            fs_manager::check_apart(&store, &repo)?;
        }
        let (snapshot, base) = {
            let reader = store.reader()?;
            let snapshot = resolve_snapshot(&reader, &call.cwd, &options.snapshot)?;
            let base = options
                .base
                .as_deref()
                .map(|b| resolve_snapshot(&reader, &call.cwd, b))
                .transpose()?;
            (snapshot, base)
        };
        // Weighed before anything touches the repository: an unproven snapshot changes nothing.
        let (verified, unverified) = {
            let reader = store.reader()?;
            let tree = reader.snapshot(snapshot)?.tree;
            weigh(&reader, tree, &names, signers.as_ref())?
        };
        if !unverified.is_empty() {
            let why: Vec<String> = unverified
                .iter()
                .map(|u| format!("{} ({})", u.check, u.reason))
                .collect();
            return Ok(MergeOutcome {
                merged: false,
                commit: None,
                branch: None,
                base: base.unwrap_or(snapshot),
                conflicts: Vec::new(),
                dirty: Vec::new(),
                worktree_snapshot: None,
                snapshot,
                repository: repo,
                message: Some(format!(
                    "snapshot {snapshot} is not verified: {}; the repository is unchanged",
                    why.join(", ")
                )),
                unverified,
                verified,
            });
        }
        let trailers: Vec<(String, String)> = verified
            .iter()
            .map(|v| {
                (
                    "Cairn-Verified".to_owned(),
                    format!("{} {}", v.check, v.attestation),
                )
            })
            .collect();
        // Merging into an onboarded repository's files: capture them first, so edits never
        // snapshotted are kept and `undo` of the merge restores exactly them.
        let registered = options.checkout
            && fs_manager::find_worktree(&store.reader()?, &repo)?.is_some_and(|r| r.root == repo);
        if registered {
            let capture = fs_manager::CaptureOptions {
                message: "live state before merge",
                ..fs_manager::CaptureOptions::default()
            };
            self.worktrees
                .record_change(&store, &repo, "capture", &capture)?;
        }
        let merge = GitMerge {
            repo: &repo,
            snapshot,
            base,
            branch: options.branch.as_deref(),
            message: options.message.as_deref(),
            checkout: options.checkout,
            trailers: &trailers,
        };
        let out = git.merge(&store, &merge)?;
        // The merge changed an onboarded repository's files: record that in its op log.
        let mut recorded = None;
        if registered && out.commit.is_some() {
            let message = format!("merge of {}", snapshot.short(12));
            let capture = fs_manager::CaptureOptions {
                message: &message,
                ..fs_manager::CaptureOptions::default()
            };
            recorded = Some(
                self.worktrees
                    .record_change(&store, &repo, "merge", &capture)?
                    .snapshot,
            );
        }
        let message = match &out.commit {
            Some(_) => None,
            None if !out.dirty.is_empty() => Some(format!(
                "{repo}: {} path(s) the merge must change have uncommitted changes; nothing was written",
                out.dirty.len()
            )),
            None => Some(format!(
                "{repo}: merging snapshot {snapshot} conflicts in {} path(s); the repository is unchanged",
                out.conflicts.len()
            )),
        };
        let (commit, branch) = match out.commit {
            Some((c, b)) => (Some(c), Some(b)),
            None => (None, None),
        };
        Ok(MergeOutcome {
            merged: commit.is_some(),
            commit,
            branch,
            base: out.base,
            conflicts: out
                .conflicts
                .into_iter()
                .map(|(path, kind)| MergeConflictOut {
                    path: RawPath::from(path),
                    kind,
                })
                .collect(),
            dirty: out.dirty.into_iter().map(RawPath::from).collect(),
            worktree_snapshot: recorded,
            snapshot,
            repository: repo,
            message,
            unverified: Vec::new(),
            verified,
        })
    }
}

impl Engine {
    /// [`Engine::merge`] for [`crate::Outcome`], which holds this large outcome boxed.
    pub(crate) fn merge_boxed(
        &self,
        call: &Call,
        options: MergeOptions,
    ) -> Result<Box<MergeOutcome>, Error> {
        self.merge(call, options).map(Box::new)
    }
}

// What each verb of this module says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Three-way merge a snapshot into the git repository it came from, as a commit on a new branch (or with checkout: the current branch, index and files). Conflicts are reported and the repository is left exactly as it was.
    Merge(MergeOptions) -> Box<MergeOutcome> = "merge" via merge_boxed [Route, Tool];
}

impl VerbSpec for verbs::Merge {
    fn named_snapshots(options: &Self::Options) -> Vec<&str> {
        std::iter::once(options.snapshot.as_str())
            .chain(options.base.as_deref())
            .collect()
    }

    fn refusal(outcome: &Self::Outcome) -> Option<&str> {
        outcome.message.as_deref()
    }

    const REFUSED: Option<&'static str> = Some(
        "A negative answer, nothing changed: conflicts (`conflicts`), uncommitted changes in paths the merge must change (`dirty`), or required checks without a passing (trusted) attestation (`unverified`); the repository is unchanged; `message` says why.",
    );

    const EXAMPLE: Option<&'static str> =
        Some(r#"{"snapshot": "base", "into": "repo", "cwd": "/home/agent/project"}"#);
}
