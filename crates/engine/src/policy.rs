//! What `policy`, `policy allow`, `policy revoke` and `policy_request` share: a worktree's
//! remembered sandbox grants, which every later `cairn run` of it applies (reading stays
//! allowed everywhere).
//!
//! Granting is a person's decision. `policy_allow` grants only when the person confirmed it
//! (`yes`: asked on a terminal, `--yes`, or MCP elicitation) and, for a system directory
//! or the user's credentials, named the path again (`confirm`). An agent asks instead
//! (`policy_request`, what MCP's and HTTP's `policy_allow` become): the request is listed
//! by `policy` until a person grants it (`policy_allow` with `request`) or denies it
//! (`policy_revoke` with `request`). Pseudo file systems are never granted.

use std::path::Path;

use camino::{Utf8Path, Utf8PathBuf};
use fs_manager::{GrantRequest, GrantRequests, GrantSet, OpRecord, SandboxGrants};
use serde::{Deserialize, Serialize};

use crate::error::{Code, Error, IoError};

/// Longest `reason` of a request or grant, in bytes.
pub const MAX_REASON: usize = 1000;
/// Longest `by` of a request, in bytes.
pub const MAX_ASKER: usize = 200;
/// Most paths one request or grant names.
pub const MAX_GRANT_PATHS: usize = 64;
/// Most open requests a worktree holds; more are refused until a person decides.
pub const MAX_OPEN_REQUESTS: usize = 64;

/// A worktree's sandbox grants and the requests waiting for a person.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PolicyOutcome {
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// Its grants: `{writable, network, once: {writable, network}}`.
    pub policy: SandboxGrants,
    /// Grants agents asked for, oldest first, each `{id, writable, network, once, by,
    /// reason, asked}`.
    #[serde(default)]
    pub requests: Vec<GrantRequest>,
    /// The request this call recorded (a `policy_allow` through MCP or HTTP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<u64>,
    /// For `take_once`: the next-run grants this call took for its run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken: Option<GrantSet>,
    /// For a recorded request: how a person grants or denies it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl PolicyOutcome {
    pub(crate) fn of(record: fs_manager::WorktreeRecord) -> PolicyOutcome {
        PolicyOutcome {
            worktree: record.root,
            policy: record.grants,
            requests: record.requests.open,
            requested: None,
            taken: None,
            message: None,
        }
    }
}

/// Why a grant, a request or a revocation is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// An agent naming a listed request to grant it.
    #[error(
        "{worktree}: granting request {id} is a person's decision: cairn policy allow {worktree} --request {id} on a terminal"
    )]
    RequestIsAPersons {
        /// The worktree.
        worktree: Utf8PathBuf,
        /// The request.
        id: u64,
    },
    /// Neither a path nor the network named.
    #[error("policy {verb}: name a writable path (--write PATH) or --network")]
    NothingNamed {
        /// `allow` or `revoke`.
        verb: &'static str,
    },
    /// More paths than one grant takes.
    #[error("policy {verb}: {count} paths named; at most {MAX_GRANT_PATHS} at once")]
    TooManyPaths {
        /// `allow` or `revoke`.
        verb: &'static str,
        /// How many.
        count: usize,
    },
    /// A free text argument past its limit.
    #[error("{name}: {len} bytes; at most {max}")]
    TooLong {
        /// The argument.
        name: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A relative path.
    #[error("{path}: a grant needs an absolute path")]
    NotAbsolute {
        /// The path.
        path: Utf8PathBuf,
    },
    /// A path that is not there.
    #[error("{path}: no such file or directory")]
    Missing {
        /// The path.
        path: Utf8PathBuf,
    },
    /// A path spelled otherwise than it resolves.
    #[error("{path}: not a canonical path (it resolves to {}); grant that path", canonical.display())]
    NotCanonical {
        /// The path.
        path: Utf8PathBuf,
        /// What it resolves to.
        canonical: std::path::PathBuf,
    },
    /// The store's folder, or a path in it.
    #[error(
        "{path}: {is} the store's folder {}, which a sandboxed command may never write",
        store.display()
    )]
    InStore {
        /// The path.
        path: Utf8PathBuf,
        /// `is` or `inside`.
        is: &'static str,
        /// The store's folder.
        store: std::path::PathBuf,
    },
    /// A path holding the store's folder.
    #[error(
        "{path}: holds the store's folder {}, which a sandboxed command may never write{never}",
        store.display()
    )]
    HoldsStore {
        /// The path.
        path: Utf8PathBuf,
        /// The store's folder.
        store: std::path::PathBuf,
        /// What it means for `/`.
        never: &'static str,
    },
    /// A path never granted (a pseudo file system, a symlink on the way).
    #[error(transparent)]
    NotGrantable(path_policy::GrantError),
    /// `--confirm` of a path the grant does not write.
    #[error("--confirm {path}: not a path this grant writes")]
    ConfirmsNothing {
        /// The path.
        path: Utf8PathBuf,
    },
    /// A grant not confirmed.
    #[error(
        "{root}: granting {grant} is a person's decision: run cairn policy allow on a terminal to be asked, or pass --yes"
    )]
    NotConfirmed {
        /// The worktree.
        root: Utf8PathBuf,
        /// The grant, in words.
        grant: String,
    },
    /// A system directory or credentials path confirmed but not named.
    #[error(
        "{path}: writing here reaches {why}; --yes is not enough: name it to confirm (--confirm {path}), or answer on a terminal"
    )]
    NotNamed {
        /// The path.
        path: Utf8PathBuf,
        /// What it reaches.
        why: path_policy::Sensitive,
    },
    /// A request named together with a grant of its own.
    #[error(
        "policy {verb} --request {id}: {}; name no --write or --network with it",
        if *verb == "allow" { "grants what the request asks" } else { "denies the request" }
    )]
    RequestAndGrant {
        /// `allow` or `revoke`.
        verb: &'static str,
        /// The request.
        id: u64,
    },
    /// Revoking a grant the worktree does not have.
    #[error("{root}: has no {kind}grant {what}")]
    NoSuchGrant {
        /// The worktree.
        root: Utf8PathBuf,
        /// `next-run ` or nothing.
        kind: &'static str,
        /// The grant, in words.
        what: String,
    },
    /// Too many requests wait already.
    #[error(
        "{root}: {MAX_OPEN_REQUESTS} grant requests wait for a person already (cairn policy {root} lists them)"
    )]
    TooManyRequests {
        /// The worktree.
        root: Utf8PathBuf,
    },
    /// No such open request.
    #[error("{root}: has no open grant request {id} (cairn policy {root} lists them)")]
    NoSuchRequest {
        /// The worktree.
        root: Utf8PathBuf,
        /// The request.
        id: u64,
    },
}

crate::error::coded!(PolicyError);

impl PolicyError {
    /// Its code.
    pub fn code(&self) -> Code {
        use PolicyError as E;
        match self {
            E::RequestIsAPersons { .. } => Code::NotPermitted,
            E::NothingNamed { .. } | E::ConfirmsNothing { .. } | E::RequestAndGrant { .. } => {
                Code::Usage
            }
            E::TooManyPaths { .. }
            | E::NotAbsolute { .. }
            | E::Missing { .. }
            | E::NotCanonical { .. }
            | E::InStore { .. }
            | E::HoldsStore { .. }
            | E::NotGrantable(_) => Code::InvalidGrant,
            E::TooLong { .. } => Code::InvalidInput,
            E::NotConfirmed { .. } | E::NotNamed { .. } => Code::ConfirmationNeeded,
            E::NoSuchGrant { .. } => Code::UnknownGrant,
            E::TooManyRequests { .. } => Code::TooManyRequests,
            E::NoSuchRequest { .. } => Code::UnknownRequest,
        }
    }
}

/// The grants a call names; naming none is bad usage.
pub(crate) fn asked(
    verb: &'static str,
    writable: Vec<Utf8PathBuf>,
    network: bool,
) -> Result<GrantSet, Error> {
    let asked = GrantSet { writable, network };
    if asked.is_empty() {
        return Err(PolicyError::NothingNamed { verb }.into());
    }
    if asked.writable.len() > MAX_GRANT_PATHS {
        return Err(PolicyError::TooManyPaths {
            verb,
            count: asked.writable.len(),
        }
        .into());
    }
    Ok(asked)
}

/// A free text argument no longer than `max` bytes.
pub(crate) fn bounded(name: &'static str, text: Option<&str>, max: usize) -> Result<(), Error> {
    match text {
        Some(t) if t.len() > max => Err(PolicyError::TooLong {
            name,
            len: t.len(),
            max,
        }
        .into()),
        _ => Ok(()),
    }
}

/// Who is changing the grants: the user this engine runs as.
pub(crate) fn user() -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(|| {
            std::fs::metadata("/proc/self")
                .ok()
                .map(|m| format!("uid {}", m.uid()))
        })
}

/// The grant's words in the op log: `--write P… --network --once`.
pub(crate) fn words(what: &GrantSet, once: bool) -> String {
    let mut words: Vec<String> = what
        .writable
        .iter()
        .map(|p| format!("--write {p}"))
        .collect();
    if what.network {
        words.push("--network".into());
    }
    if once {
        words.push("--once".into());
    }
    words.join(" ")
}

pub(crate) fn entry(op: &str, detail: String, by: Option<String>) -> OpRecord {
    OpRecord {
        detail: Some(detail),
        by,
        ..OpRecord::new(op, None, None)
    }
}

/// The user's home directory, canonical, for [`path_policy::sensitive`].
pub(crate) fn home() -> Option<std::path::PathBuf> {
    std::env::var_os("HOME").and_then(|h| std::fs::canonicalize(h).ok())
}

/// Checks a writable grant, when it is asked for, given, and again when a run uses it:
/// absolute, existing, canonical (spelled as it resolves, so not a symlink swapped in
/// since), opened without following a symlink and never a pseudo file system (nor under or
/// holding one), and neither the store's folder nor inside or around it. Returns why a
/// person must name it, if it is a system directory or the user's credentials.
pub fn check_writable(
    path: &Utf8Path,
    store: &Path,
) -> Result<Option<path_policy::Sensitive>, Error> {
    let path_buf = || path.to_owned();
    if !path.is_absolute() {
        return Err(PolicyError::NotAbsolute { path: path_buf() }.into());
    }
    let canonical = match std::fs::canonicalize(path) {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(PolicyError::Missing { path: path_buf() }.into());
        }
        Err(e) => return Err(IoError::new(path, e).into()),
    };
    if canonical.as_os_str() != path.as_std_path().as_os_str() {
        return Err(PolicyError::NotCanonical {
            path: path_buf(),
            canonical,
        }
        .into());
    }
    if canonical.starts_with(store) {
        let is = if canonical == store { "is" } else { "inside" };
        return Err(PolicyError::InStore {
            path: path_buf(),
            is,
            store: store.to_owned(),
        }
        .into());
    }
    if store.starts_with(&canonical) {
        let never = if canonical == Path::new("/") {
            " (so `/` is never granted)"
        } else {
            ""
        };
        return Err(PolicyError::HoldsStore {
            path: path_buf(),
            store: store.to_owned(),
            never,
        }
        .into());
    }
    // What the path is now, by a handle opened without following a symlink: the same
    // check the sandbox makes on the handle it gives Landlock.
    match path_policy::open_grant(path.as_std_path()) {
        Ok(_) => {}
        Err(path_policy::GrantError::Io { path, source }) => {
            return Err(IoError::new(path.display(), source).into());
        }
        Err(e) => return Err(PolicyError::NotGrantable(e).into()),
    }
    Ok(path_policy::sensitive(&canonical, home().as_deref()))
}

/// The open request `id` of the worktree at `root`.
pub(crate) fn open_request<'a>(
    root: &Utf8Path,
    requests: &'a GrantRequests,
    id: u64,
) -> Result<&'a GrantRequest, Error> {
    requests.open.iter().find(|r| r.id == id).ok_or_else(|| {
        PolicyError::NoSuchRequest {
            root: root.to_owned(),
            id,
        }
        .into()
    })
}
