//! `checks`: the attestations recorded of a snapshot's tree (`verify`), newest first, and a
//! check's recorded output.

use cas::{AttestationId, SnapshotId, TreeId};
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, resolve_snapshot};
use crate::error::{Code, Error};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// `checks SNAP [--log NAME]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChecksOptions {
    /// The snapshot whose tree's checks to list (a ref, id prefix or checkpoint name).
    #[schemars(extend("x-snapshot" = true))]
    pub snapshot: String,
    /// Also the recorded output (stdout, then stderr) of the newest run of this check.
    #[serde(default)]
    pub log: Option<String>,
}

impl ChecksOptions {
    /// The checks of `snapshot`.
    pub fn new(snapshot: impl Into<String>) -> ChecksOptions {
        ChecksOptions {
            snapshot: snapshot.into(),
            log: None,
        }
    }
}

/// One recorded check.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckEntry {
    /// The attestation.
    #[schemars(with = "String")]
    pub attestation: AttestationId,
    /// The check's name.
    pub check: String,
    /// The command and its arguments.
    pub command: Vec<String>,
    /// The environment values it was run with.
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// Whether it passed.
    pub passed: bool,
    /// The command's exit status (128 + the signal's number if a signal ended it).
    pub exit_code: i32,
    /// Whether it outlived its timeout and was killed.
    #[serde(default)]
    pub timed_out: bool,
    /// How long it ran.
    pub duration_ms: u64,
    /// When it started (RFC 3339).
    pub started: String,
    /// The host it ran on.
    pub host: String,
    /// The cairn version that ran it.
    pub version: String,
    /// The fingerprint (`SHA256:…`) of the key of the first signature that matches the
    /// attestation's bytes, if any. Who that is, an allowed-signers file says.
    pub signed_by: Option<String>,
}

/// A check's recorded output.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckLog {
    /// The attestation it is of.
    #[schemars(with = "String")]
    pub attestation: AttestationId,
    /// The check's name.
    pub check: String,
    /// Its stdout (bytes that are not UTF-8 replaced).
    pub stdout: String,
    /// Whether stdout was cut at 16 MiB.
    pub stdout_cut: bool,
    /// Its stderr.
    pub stderr: String,
    /// Whether stderr was cut at 16 MiB.
    pub stderr_cut: bool,
}

/// What `checks` found.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ChecksOutcome {
    /// The snapshot.
    #[schemars(with = "String")]
    pub snapshot: SnapshotId,
    /// Its tree.
    #[schemars(with = "String")]
    pub tree: TreeId,
    /// The attestations of the tree, newest first.
    pub checks: Vec<CheckEntry>,
    /// With `log`: the newest run's output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<CheckLog>,
}

/// Why `checks` could not answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChecksError {
    /// `--log NAME` of a check never recorded for the tree.
    #[error("snapshot {snapshot} (tree {tree}) has no check named {check:?}")]
    NoSuchCheck {
        /// The snapshot.
        snapshot: SnapshotId,
        /// Its tree.
        tree: TreeId,
        /// The name.
        check: String,
    },
    /// The recorded attestations cannot be read.
    #[error(transparent)]
    Record(#[from] cas::AttestationReadError),
}

crate::error::coded!(ChecksError);

impl ChecksError {
    /// Its code.
    pub fn code(&self) -> Code {
        match self {
            ChecksError::NoSuchCheck { .. } => Code::UnknownId,
            ChecksError::Record(cas::AttestationReadError::Corrupt { .. }) => Code::Corrupt,
            ChecksError::Record(_) => Code::Store,
        }
    }
}

/// The fingerprint of the first of `signatures` that is a signature of `bytes`.
pub(crate) fn signed_by(signatures: &[(String, Vec<u8>)], bytes: &[u8]) -> Option<String> {
    signatures.iter().find_map(|(_, armored)| {
        let signature = attest::Signature::from_pem(&String::from_utf8_lossy(armored)).ok()?;
        signature
            .matches(bytes)
            .ok()
            .map(|()| signature.fingerprint())
    })
}

impl Engine {
    /// The checks recorded of a snapshot's tree (by `verify` of it or of any snapshot with
    /// the same tree), newest first; with `log`, the recorded output of that check's newest
    /// run.
    pub fn checks(&self, call: &Call, options: ChecksOptions) -> Result<ChecksOutcome, Error> {
        let store = self.store(Access::Read)?;
        let reader = store.reader()?;
        let snapshot = resolve_snapshot(&reader, &call.cwd, &options.snapshot)?;
        let tree = reader.snapshot(snapshot)?.tree;
        let mut found = reader.attestations(tree).map_err(ChecksError::from)?;
        found.sort_by(|(a_id, a), (b_id, b)| (b.started, b_id).cmp(&(a.started, a_id)));
        let mut checks = Vec::with_capacity(found.len());
        for (id, a) in &found {
            let signatures = reader.attestation_signatures(*id)?;
            checks.push(CheckEntry {
                attestation: *id,
                check: a.check.clone(),
                command: a.command.clone(),
                env: a.env.clone(),
                passed: a.exit.passed(),
                exit_code: a.exit.code,
                timed_out: a.exit.timed_out,
                duration_ms: a.duration_ms,
                started: a.started.to_string(),
                host: a.host.clone(),
                version: a.version.clone(),
                signed_by: signed_by(&signatures, &a.encode()),
            });
        }
        let log = match &options.log {
            None => None,
            Some(name) => {
                let (id, a) = found
                    .iter()
                    .find(|(_, a)| a.check == *name)
                    .ok_or_else(|| ChecksError::NoSuchCheck {
                        snapshot,
                        tree,
                        check: name.clone(),
                    })?;
                let text = |blob| -> Result<String, Error> {
                    Ok(String::from_utf8_lossy(&reader.blob(blob)?).into_owned())
                };
                Some(CheckLog {
                    attestation: *id,
                    check: a.check.clone(),
                    stdout: text(a.stdout.blob)?,
                    stdout_cut: a.stdout.cut,
                    stderr: text(a.stderr.blob)?,
                    stderr_cut: a.stderr.cut,
                })
            }
        };
        Ok(ChecksOutcome {
            snapshot,
            tree,
            checks,
            log,
        })
    }
}

verb! {
    /// The checks recorded of a snapshot's tree, newest first (each with who signed it, if anyone); with `log`, the recorded output of that check's newest run.
    Checks(ChecksOptions) -> ChecksOutcome = "checks" via checks [Route, Tool];
}

// What this verb says of itself beyond its types (see `VerbSpec`).

impl VerbSpec for verbs::Checks {
    const READS_ONLY: bool = true;

    fn named_snapshots(options: &Self::Options) -> Vec<&str> {
        vec![options.snapshot.as_str()]
    }

    const EXAMPLE: Option<&'static str> =
        Some(r#"{"snapshot": "3f2a9c", "log": "tests", "cwd": "/home/agent/project"}"#);
}
