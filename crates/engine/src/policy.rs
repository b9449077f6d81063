//! `policy`, `policy allow`, `policy revoke`, and the grant requests of agents: a worktree's
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

use crate::engine::{Call, Engine, registered};
use crate::error::{Code, Error, IoError};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;

/// Longest `reason` of a request or grant, in bytes.
pub const MAX_REASON: usize = 1000;
/// Longest `by` of a request, in bytes.
pub const MAX_ASKER: usize = 200;
/// Most paths one request or grant names.
pub const MAX_GRANT_PATHS: usize = 64;
/// Most open requests a worktree holds; more are refused until a person decides.
pub const MAX_OPEN_REQUESTS: usize = 64;

/// `policy [WORKTREE]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyOptions {
    /// The worktree (default: the caller's directory).
    #[serde(default)]
    #[schemars(with = "Option<String>", extend("x-default-cwd" = true))]
    pub worktree: Option<Utf8PathBuf>,
    /// Set by `cairn run` as a sandboxed run starts: the next-run grants are taken in the
    /// same transaction that reads them (logged `policy_spent`) and returned in `taken`,
    /// so two runs never both get them.
    #[serde(default)]
    #[schemars(extend("x-cli-only" = true))]
    pub take_once: bool,
}

/// `policy allow WORKTREE (--write PATH… | --network | --request ID) [--once] [--yes]
/// [--confirm PATH]…`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyAllowOptions {
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// Absolute, existing, canonical paths to make writable.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub write: Vec<Utf8PathBuf>,
    /// Allow TCP bind and connect.
    #[serde(default)]
    pub network: bool,
    /// For the next run only.
    #[serde(default)]
    pub once: bool,
    /// A person confirmed the grant (asked on a terminal, `--yes`, or MCP elicitation).
    #[serde(default)]
    #[schemars(extend("x-cli-only" = true))]
    pub yes: bool,
    /// Paths the person named again: every system directory or credentials path granted
    /// must be among them.
    #[serde(default)]
    #[schemars(with = "Vec<String>", extend("x-cli-only" = true))]
    pub confirm: Vec<Utf8PathBuf>,
    /// Grant what the open request of this number asks for (instead of `write`,
    /// `network` and `once`), and close it.
    #[serde(default)]
    #[schemars(extend("x-cli-only" = true))]
    pub request: Option<u64>,
    /// Why the grant is needed, shown to the person who decides (at most 1000 bytes).
    #[serde(default)]
    pub reason: Option<String>,
}

/// `policy revoke WORKTREE (--write PATH… | --network | --request ID) [--once]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyRevokeOptions {
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// Writable paths, as granted.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub write: Vec<Utf8PathBuf>,
    /// The network.
    #[serde(default)]
    pub network: bool,
    /// Next-run-only grants.
    #[serde(default)]
    pub once: bool,
    /// Deny the open request of this number (instead of taking grants back).
    #[serde(default)]
    #[schemars(extend("x-cli-only" = true))]
    pub request: Option<u64>,
}

/// An agent's request for a grant, which a person decides on.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyRequestOptions {
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// Absolute, existing, canonical paths to make writable.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub write: Vec<Utf8PathBuf>,
    /// TCP bind and connect.
    #[serde(default)]
    pub network: bool,
    /// For the next run only.
    #[serde(default)]
    pub once: bool,
    /// Why, in the asker's words.
    #[serde(default)]
    pub reason: Option<String>,
    /// Who asks: the MCP client, or the HTTP peer (set by the face, not by the asker).
    pub by: String,
}

impl PolicyAllowOptions {
    /// What a `policy_allow` from an agent (MCP, HTTP) becomes: a request asked by `by`.
    /// Granting a listed request is a person's decision, so naming one is refused.
    pub fn into_request(self, by: String) -> Result<PolicyRequestOptions, Error> {
        if let Some(id) = self.request {
            return Err(PolicyError::RequestIsAPersons {
                worktree: self.worktree,
                id,
            }
            .into());
        }
        Ok(PolicyRequestOptions {
            worktree: self.worktree,
            write: self.write,
            network: self.network,
            once: self.once,
            reason: self.reason,
            by,
        })
    }
}

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
    fn of(record: fs_manager::WorktreeRecord) -> PolicyOutcome {
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
fn asked(verb: &'static str, writable: Vec<Utf8PathBuf>, network: bool) -> Result<GrantSet, Error> {
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
fn bounded(name: &'static str, text: Option<&str>, max: usize) -> Result<(), Error> {
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
fn user() -> Option<String> {
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
fn words(what: &GrantSet, once: bool) -> String {
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

fn entry(op: &str, detail: String, by: Option<String>) -> OpRecord {
    OpRecord {
        detail: Some(detail),
        by,
        ..OpRecord::new(op, None, None)
    }
}

/// The user's home directory, canonical, for [`path_policy::sensitive`].
fn home() -> Option<std::path::PathBuf> {
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

/// Refuses a grant the person did not confirm, or a system directory or credentials path
/// they did not name.
fn confirmed(
    root: &Utf8Path,
    what: &GrantSet,
    once: bool,
    sensitive: &[(Utf8PathBuf, path_policy::Sensitive)],
    options: &PolicyAllowOptions,
) -> Result<(), Error> {
    for named in &options.confirm {
        if !what.writable.contains(named) {
            return Err(PolicyError::ConfirmsNothing {
                path: named.clone(),
            }
            .into());
        }
    }
    if !options.yes {
        return Err(PolicyError::NotConfirmed {
            root: root.to_owned(),
            grant: words(what, once),
        }
        .into());
    }
    if let Some((path, why)) = sensitive
        .iter()
        .find(|(path, _)| !options.confirm.contains(path))
    {
        return Err(PolicyError::NotNamed {
            path: path.clone(),
            why: why.clone(),
        }
        .into());
    }
    Ok(())
}

impl Engine {
    /// `cairn policy [WORKTREE]`; with `take_once`, also takes the next-run grants.
    pub fn policy(&self, call: &Call, options: PolicyOptions) -> Result<PolicyOutcome, Error> {
        let dir = call.dir(options.worktree.as_deref());
        if options.take_once {
            let store = self.store(Access::Write)?;
            let root = registered(&store.reader()?, &dir)?.root;
            let mut taken = GrantSet::default();
            let record = self.worktrees.change_grants(&store, &root, |grants, _| {
                taken = std::mem::take(&mut grants.once);
                Ok::<_, Error>(
                    (!taken.is_empty()).then(|| entry("policy_spent", words(&taken, true), user())),
                )
            })?;
            return Ok(PolicyOutcome {
                taken: Some(taken),
                ..PolicyOutcome::of(record)
            });
        }
        let store = self.store(Access::Read)?;
        let record = registered(&store.reader()?, &dir)?;
        Ok(PolicyOutcome::of(record))
    }

    /// `cairn policy allow`: validates grants a person confirmed and remembers them, logged
    /// as `policy_allow`; with `request`, grants an open request and closes it.
    pub fn policy_allow(
        &self,
        call: &Call,
        options: PolicyAllowOptions,
    ) -> Result<PolicyOutcome, Error> {
        bounded("reason", options.reason.as_deref(), MAX_REASON)?;
        let store = self.store(Access::Write)?;
        let root = registered(&store.reader()?, &call.path(&options.worktree))?.root;
        let (what, once, request) = match options.request {
            Some(id) => {
                if !options.write.is_empty() || options.network {
                    return Err(PolicyError::RequestAndGrant { verb: "allow", id }.into());
                }
                let record = registered(&store.reader()?, &root)?;
                let request = open_request(&root, &record.requests, id)?.clone();
                (request.grant.clone(), request.once, Some(request))
            }
            None => (
                asked("allow", options.write.clone(), options.network)?,
                options.once,
                None,
            ),
        };
        let store_dir = std::fs::canonicalize(store.root().as_std_path())
            .map_err(|e| IoError::new(store.root(), e))?;
        let mut sensitive = Vec::new();
        for path in &what.writable {
            if let Some(why) = check_writable(path, &store_dir)? {
                sensitive.push((path.clone(), why));
            }
        }
        confirmed(&root, &what, once, &sensitive, &options)?;
        let mut detail = words(&what, once);
        if let Some(r) = &request {
            detail.push_str(&format!(" (request {} by {})", r.id, r.by));
        }
        if let Some(reason) = &options.reason {
            detail.push_str(&format!(": {reason}"));
        }
        let record = self
            .worktrees
            .change_grants(&store, &root, |grants, requests| {
                if let Some(r) = &request {
                    // Still open: not denied since it was read (its number is never reused).
                    open_request(&root, requests, r.id)?;
                    requests.open.retain(|o| o.id != r.id);
                }
                let set = if once {
                    &mut grants.once
                } else {
                    &mut grants.always
                };
                let mut added = GrantSet::default();
                for path in &what.writable {
                    if !set.writable.contains(path) {
                        set.writable.push(path.clone());
                        added.writable.push(path.clone());
                    }
                }
                added.network = what.network && !set.network;
                set.network |= what.network;
                Ok::<_, Error>(
                    (!added.is_empty() || request.is_some())
                        .then(|| entry("policy_allow", detail, user())),
                )
            })?;
        Ok(PolicyOutcome::of(record))
    }

    /// `cairn policy revoke`: takes grants back, logged as `policy_revoke` (one that was
    /// not granted is an error); with `request`, denies an open request (`policy_deny`).
    pub fn policy_revoke(
        &self,
        call: &Call,
        options: PolicyRevokeOptions,
    ) -> Result<PolicyOutcome, Error> {
        let store = self.store(Access::Write)?;
        let root = registered(&store.reader()?, &call.path(&options.worktree))?.root;
        if let Some(id) = options.request {
            if !options.write.is_empty() || options.network {
                return Err(PolicyError::RequestAndGrant { verb: "revoke", id }.into());
            }
            let record = self.worktrees.change_grants(&store, &root, |_, requests| {
                let r = open_request(&root, requests, id)?.clone();
                requests.open.retain(|o| o.id != id);
                let detail = format!("request {id} by {}: {}", r.by, words(&r.grant, r.once));
                Ok::<_, Error>(Some(entry("policy_deny", detail, user())))
            })?;
            return Ok(PolicyOutcome::of(record));
        }
        let asked = asked("revoke", options.write, options.network)?;
        let once = options.once;
        let kind = if once { "next-run " } else { "" };
        let record = self.worktrees.change_grants(&store, &root, |grants, _| {
            let set = if once {
                &mut grants.once
            } else {
                &mut grants.always
            };
            let missing = |what: String| PolicyError::NoSuchGrant {
                root: root.clone(),
                kind,
                what,
            };
            let mut taken = GrantSet::default();
            for path in &asked.writable {
                match set.writable.iter().position(|p| p == path) {
                    Some(i) => taken.writable.push(set.writable.remove(i)),
                    None => return Err(Error::from(missing(format!("to write {path}")))),
                }
            }
            if asked.network && !set.network {
                return Err(Error::from(missing("of the network".into())));
            }
            taken.network = asked.network;
            set.network &= !asked.network;
            Ok((!taken.is_empty()).then(|| entry("policy_revoke", words(&taken, once), user())))
        })?;
        Ok(PolicyOutcome::of(record))
    }

    /// An agent's `policy_allow` (through MCP or HTTP): checks what it asks for as a grant
    /// would be checked, and records it as a request for a person to decide on, logged as
    /// `policy_request`. Asking again for what an open request asks answers with that one.
    pub fn policy_request(
        &self,
        call: &Call,
        options: PolicyRequestOptions,
    ) -> Result<PolicyOutcome, Error> {
        bounded("reason", options.reason.as_deref(), MAX_REASON)?;
        bounded("by", Some(&options.by), MAX_ASKER)?;
        let what = asked("allow", options.write, options.network)?;
        let store = self.store(Access::Write)?;
        let root = registered(&store.reader()?, &call.path(&options.worktree))?.root;
        let store_dir = std::fs::canonicalize(store.root().as_std_path())
            .map_err(|e| IoError::new(store.root(), e))?;
        for path in &what.writable {
            check_writable(path, &store_dir)?;
        }
        let once = options.once;
        let mut id = 0;
        let record = self.worktrees.change_grants(&store, &root, |_, requests| {
            if let Some(same) = requests
                .open
                .iter()
                .find(|r| r.grant == what && r.once == once)
            {
                id = same.id;
                return Ok(None);
            }
            if requests.open.len() >= MAX_OPEN_REQUESTS {
                return Err(PolicyError::TooManyRequests { root: root.clone() }.into());
            }
            requests.last += 1;
            id = requests.last;
            let mut detail = format!("request {id}: {}", words(&what, once));
            if let Some(reason) = &options.reason {
                detail.push_str(&format!(": {reason}"));
            }
            requests.open.push(GrantRequest {
                id,
                grant: what.clone(),
                once,
                by: options.by.clone(),
                reason: options.reason.clone(),
                asked: jiff::Timestamp::now(),
            });
            Ok::<_, Error>(Some(entry(
                "policy_request",
                detail,
                Some(options.by.clone()),
            )))
        })?;
        let message = format!(
            "request {id} recorded, nothing granted yet: a person grants it with `cairn policy allow {root} --request {id}` or denies it with `cairn policy revoke {root} --request {id}`"
        );
        Ok(PolicyOutcome {
            requested: Some(id),
            message: Some(message),
            ..PolicyOutcome::of(record)
        })
    }
}

/// The open request `id` of the worktree at `root`.
fn open_request<'a>(
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

// What each verb of this module says of itself beyond its types (see `VerbSpec`).

verb! {
    /// A worktree's remembered sandbox grants: the paths `cairn run` of it may write beyond the worktree, and whether it may use the network; `once` holds those for the next run only; `requests` lists the grants asked for that wait for a person. Reading is allowed everywhere.
    Policy(PolicyOptions) -> PolicyOutcome = "policy" via policy [Route, Tool];
    /// Ask for a grant: writing beneath paths, or the network, for every later `cairn run` of a worktree (or, with once, the next one only). Granting is the user's decision: this records a request (who asked, what, why) that `cairn policy` lists and a person grants or denies on a terminal; an MCP client that supports elicitation asks its user at once. Ask for exactly what a run's `denied` listed, and say why. A path must be absolute, existing and canonical, never the store's folder; /proc, /sys and /dev are never granted; system directories and the user's credentials are granted only when the person names them.
    PolicyAllow(PolicyAllowOptions) -> PolicyOutcome = "policy_allow" via policy_allow [Route, Tool];
    /// Take back grants of a worktree (with once: next-run-only grants), recorded in its op log; one that was not granted is an error.
    PolicyRevoke(PolicyRevokeOptions) -> PolicyOutcome = "policy_revoke" via policy_revoke [Route, Tool];
    /// Record a grant an agent asks for, for a person to decide on.
    PolicyRequest(PolicyRequestOptions) -> PolicyOutcome = "policy_request" via policy_request [];
}

impl VerbSpec for verbs::Policy {
    const EXAMPLE: Option<&'static str> =
        Some(r#"{"worktree": "wt", "cwd": "/home/agent/project"}"#);
}

impl VerbSpec for verbs::PolicyAllow {
    const EXAMPLE: Option<&'static str> =
        Some(r#"{"worktree": "wt", "write": ["/home/agent/cache"], "cwd": "/home/agent/project"}"#);
}

impl VerbSpec for verbs::PolicyRevoke {
    const EXAMPLE: Option<&'static str> =
        Some(r#"{"worktree": "wt", "network": true, "cwd": "/home/agent/project"}"#);
}

impl VerbSpec for verbs::PolicyRequest {}
