//! `policy`, `policy allow`, `policy revoke`: a worktree's remembered sandbox grants, which
//! every later `cairn run` of it applies (reading stays allowed everywhere).

use std::path::Path;

use camino::{Utf8Path, Utf8PathBuf};
use fs_manager::{GrantSet, OpRecord, SandboxGrants};
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, registered};
use crate::error::Error;
use crate::store::Access;

/// `policy [WORKTREE]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyOptions {
    /// The worktree (default: the caller's directory).
    #[serde(default)]
    pub worktree: Option<Utf8PathBuf>,
}

/// `policy allow WORKTREE (--write PATH… | --network) [--once] [--yes]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyAllowOptions {
    /// The worktree.
    pub worktree: Utf8PathBuf,
    /// Absolute, existing, canonical paths to make writable.
    #[serde(default)]
    pub write: Vec<Utf8PathBuf>,
    /// Allow TCP bind and connect.
    #[serde(default)]
    pub network: bool,
    /// For the next run only.
    #[serde(default)]
    pub once: bool,
    /// Confirms a grant that opens `/` or `$HOME` whole.
    #[serde(default)]
    pub yes: bool,
}

/// `policy revoke WORKTREE (--write PATH… | --network) [--once]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyRevokeOptions {
    /// The worktree.
    pub worktree: Utf8PathBuf,
    /// Writable paths to take back, as granted.
    #[serde(default)]
    pub write: Vec<Utf8PathBuf>,
    /// Take back the network.
    #[serde(default)]
    pub network: bool,
    /// Take back next-run-only grants (else remembered ones).
    #[serde(default)]
    pub once: bool,
    /// Set by `cairn run` when it used these next-run-only grants: they are dropped as
    /// spent (logged `policy_spent`), and one already gone is no error.
    #[serde(default)]
    pub spent: bool,
}

/// A worktree's sandbox grants.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PolicyOutcome {
    /// The worktree.
    pub worktree: Utf8PathBuf,
    /// Its grants: `{writable, network, once: {writable, network}}`.
    pub policy: SandboxGrants,
}

/// Which grants of which worktree a change is to, and its op-log name.
struct Target<'a> {
    worktree: &'a Utf8Path,
    once: bool,
    op: &'static str,
}

/// The grants a call names; naming none is bad usage.
fn asked(verb: &str, writable: Vec<Utf8PathBuf>, network: bool) -> Result<GrantSet, Error> {
    let asked = GrantSet { writable, network };
    if asked.is_empty() {
        return Err(Error::usage(
            "usage",
            format!("policy {verb}: name a writable path (--write PATH) or --network"),
        ));
    }
    Ok(asked)
}

fn invalid(message: String) -> Error {
    Error::usage("invalid_grant", message)
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

fn entry(op: &str, what: &GrantSet, once: bool) -> OpRecord {
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
    OpRecord {
        detail: Some(words.join(" ")),
        by: user(),
        ..OpRecord::new(op, None, None)
    }
}

/// Checks a writable grant, when it is given and again when a run uses it: absolute,
/// existing, canonical (spelled as it resolves, so not a symlink swapped in since), neither
/// the store's folder nor inside or around it, and `$HOME` or a folder holding it only with
/// `yes`.
pub fn check_writable(path: &Utf8Path, store: &Path, yes: bool) -> Result<(), Error> {
    if !path.is_absolute() {
        return Err(invalid(format!("{path}: a grant needs an absolute path")));
    }
    let canonical = match std::fs::canonicalize(path) {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(invalid(format!("{path}: no such file or directory")));
        }
        Err(e) => return Err(Error::failure("io", format!("{path}: {e}"))),
    };
    if canonical.as_os_str() != path.as_std_path().as_os_str() {
        return Err(invalid(format!(
            "{path}: not a canonical path (it resolves to {}); grant that path",
            canonical.display()
        )));
    }
    if canonical.starts_with(store) {
        let is = if canonical == store { "is" } else { "inside" };
        return Err(invalid(format!(
            "{path}: {is} the store's folder {}, which a sandboxed command may never write",
            store.display()
        )));
    }
    if store.starts_with(&canonical) {
        let never = if canonical == Path::new("/") {
            " (so `/` is never granted)"
        } else {
            ""
        };
        return Err(invalid(format!(
            "{path}: holds the store's folder {}, which a sandboxed command may never write{never}",
            store.display()
        )));
    }
    let home = std::env::var_os("HOME").and_then(|h| std::fs::canonicalize(h).ok());
    let whole = if canonical == Path::new("/") {
        Some("the whole filesystem")
    } else if home.as_deref().is_some_and(|h| h.starts_with(&canonical)) {
        Some("the whole home directory")
    } else {
        None
    };
    match whole {
        Some(what) if !yes => Err(invalid(format!(
            "{path}: a grant here opens {what} to writing; pass --yes if that is meant"
        ))),
        _ => Ok(()),
    }
}

impl Engine {
    /// `cairn policy [WORKTREE]`.
    pub fn policy(&self, call: &Call, options: PolicyOptions) -> Result<PolicyOutcome, Error> {
        let dir = call.dir(options.worktree.as_deref());
        let store = self.store(Access::Read)?;
        let record = registered(&store.reader()?, &dir)?;
        Ok(PolicyOutcome {
            worktree: record.root,
            policy: record.grants,
        })
    }

    /// `cairn policy allow`: validates and remembers grants, logged as `policy_allow`.
    pub fn policy_allow(
        &self,
        call: &Call,
        options: PolicyAllowOptions,
    ) -> Result<PolicyOutcome, Error> {
        let asked = asked("allow", options.write, options.network)?;
        let store = self.store(Access::Write)?;
        let store_dir = std::fs::canonicalize(store.root().as_std_path())
            .map_err(|e| Error::failure("io", format!("{}: {e}", store.root())))?;
        for path in &asked.writable {
            check_writable(path, &store_dir, options.yes)?;
        }
        let target = Target {
            worktree: &options.worktree,
            once: options.once,
            op: "policy_allow",
        };
        self.change_grants(call, &store, &target, |set, _| {
            let mut added = GrantSet::default();
            for path in &asked.writable {
                if !set.writable.contains(path) {
                    set.writable.push(path.clone());
                    added.writable.push(path.clone());
                }
            }
            added.network = asked.network && !set.network;
            set.network |= asked.network;
            Ok(added)
        })
    }

    /// `cairn policy revoke`: takes grants back, logged as `policy_revoke` (or
    /// `policy_spent` when a run used them); one that was not granted is an error.
    pub fn policy_revoke(
        &self,
        call: &Call,
        options: PolicyRevokeOptions,
    ) -> Result<PolicyOutcome, Error> {
        let asked = asked("revoke", options.write, options.network)?;
        let store = self.store(Access::Write)?;
        let spent = options.spent;
        let target = Target {
            worktree: &options.worktree,
            once: options.once || spent,
            op: if spent {
                "policy_spent"
            } else {
                "policy_revoke"
            },
        };
        let kind = if target.once { "next-run " } else { "" };
        self.change_grants(call, &store, &target, |set, root| {
            let missing = |what: String| {
                Error::usage(
                    "unknown_grant",
                    format!("{root}: has no {kind}grant {what}"),
                )
            };
            let mut taken = GrantSet::default();
            for path in &asked.writable {
                match set.writable.iter().position(|p| p == path) {
                    Some(i) => taken.writable.push(set.writable.remove(i)),
                    None if spent => {}
                    None => return Err(missing(format!("to write {path}"))),
                }
            }
            if asked.network && !set.network && !spent {
                return Err(missing("of the network".into()));
            }
            taken.network = asked.network && set.network;
            set.network &= !asked.network;
            Ok(taken)
        })
    }

    /// Edits the grants of `target`'s worktree under its lock: `edit` changes the set
    /// (remembered, or next-run only) and returns what it changed, which is logged.
    fn change_grants(
        &self,
        call: &Call,
        store: &crate::store::StoreRef<'_>,
        target: &Target<'_>,
        edit: impl FnOnce(&mut GrantSet, &Utf8Path) -> Result<GrantSet, Error>,
    ) -> Result<PolicyOutcome, Error> {
        let root = registered(&store.reader()?, &call.path(target.worktree))?.root;
        let record = self.worktrees.change_grants(store, &root, |grants| {
            let set = if target.once {
                &mut grants.once
            } else {
                &mut grants.always
            };
            let changed = edit(set, &root)?;
            Ok::<_, Error>((!changed.is_empty()).then(|| entry(target.op, &changed, target.once)))
        })?;
        Ok(PolicyOutcome {
            worktree: record.root,
            policy: record.grants,
        })
    }
}
