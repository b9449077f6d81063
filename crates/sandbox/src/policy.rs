//! What a sandboxed command may do, and enforcing it with Landlock.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, PathBeneath, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope, path_beneath_rules,
};

use cairn_engine::SandboxPolicy;
use path_policy::{GrantError, OpenGrant, open_grant};

/// Enforcing a policy failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The kernel does not enforce Landlock (or not the features the policy needs).
    #[error(
        "Landlock is not available on this kernel, so the command cannot be confined (pass --no-sandbox to run it unconfined)"
    )]
    Unavailable,
    /// Building or applying the ruleset failed.
    #[error("Landlock: {0}")]
    Ruleset(String),
    /// A writable path is not what may be granted (any more): a symlink on its way, a
    /// pseudo file system, missing.
    #[error(transparent)]
    Grant(#[from] GrantError),
    /// A read-only subpath could not be made read-only (no private mount namespace).
    #[error("cannot protect {} from the command: {reason}", path.display())]
    ReadOnly {
        /// The subpath.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
}

/// Gives this process and what it executes a private mount namespace (inside a user
/// namespace when not root) in which each existing `hidden` directory is covered by an empty
/// read-only tmpfs and each existing `read_only` path is bind-mounted over itself read-only.
/// Landlock then forbids changing the mounts, so the command cannot uncover them, and a
/// server that refuses peers of another mount namespace knows a sandboxed caller. Must run
/// while the process has a single thread.
fn protect(read_only: &[PathBuf], hidden: &[PathBuf]) -> Result<(), SandboxError> {
    use rustix::mount::{MountFlags, MountPropagationFlags};
    let paths: Vec<&PathBuf> = read_only.iter().filter(|p| p.exists()).collect();
    let hidden: Vec<&PathBuf> = hidden.iter().filter(|p| p.is_dir()).collect();
    let first = Path::new("/");
    let fail = |path: &Path, what: &str, e: &dyn std::fmt::Display| SandboxError::ReadOnly {
        path: path.to_owned(),
        reason: format!("{what}: {e}"),
    };
    let uid = rustix::process::getuid();
    let gid = rustix::process::getgid();
    let mut flags = rustix::thread::UnshareFlags::NEWNS;
    if !uid.is_root() {
        flags |= rustix::thread::UnshareFlags::NEWUSER;
    }
    // `unshare` is deprecated only for `UnshareFlags::FILES`, which is not used here.
    #[allow(deprecated)]
    rustix::thread::unshare(flags).map_err(|e| fail(first, "unshare", &e))?;
    if !uid.is_root() {
        let (u, g) = (uid.as_raw(), gid.as_raw());
        std::fs::write("/proc/self/setgroups", "deny").map_err(|e| fail(first, "setgroups", &e))?;
        std::fs::write("/proc/self/uid_map", format!("{u} {u} 1"))
            .map_err(|e| fail(first, "uid_map", &e))?;
        std::fs::write("/proc/self/gid_map", format!("{g} {g} 1"))
            .map_err(|e| fail(first, "gid_map", &e))?;
    }
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )
    .map_err(|e| fail(first, "private mounts", &e))?;
    for path in hidden {
        let empty =
            MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
        rustix::mount::mount(
            "cairn-hidden",
            path.as_path(),
            "tmpfs",
            empty,
            c"size=4k,mode=0555",
        )
        .map_err(|e| fail(path, "hiding it", &e))?;
    }
    for path in paths {
        rustix::mount::mount_bind(path.as_path(), path.as_path())
            .map_err(|e| fail(path, "bind mount", &e))?;
        rustix::mount::mount_remount(path.as_path(), MountFlags::BIND | MountFlags::RDONLY, "")
            .map_err(|e| fail(path, "read-only remount", &e))?;
    }
    Ok(())
}

/// Confines the calling thread, and every program it executes from now on, to `policy`:
/// reading is allowed everywhere; writing only beneath the policy's writable roots,
/// `scratch` (a private temporary directory) and the terminal and null devices; TCP bind
/// and connect only if the policy allows the network.
///
/// Each writable path is opened once, following no symlink on its way, and refused if it
/// is a pseudo file system ([`open_grant`]); that handle is what Landlock is given, so a
/// path swapped for a symlink after it was checked grants nothing else.
///
/// Landlock only adds rights beneath a directory, so `read_only_subpaths` below a writable
/// root are made read-only first by bind-mounting each over itself read-only in a private
/// mount namespace (`protect`); this must run while the process has a single thread.
///
/// Landlock is asked to log the denials of the programs executed from now on
/// (`LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON`; by default it logs only those before an
/// `execve`, and the command is executed): see [`crate::audit`]. The outcome says whether
/// the kernel took that.
pub fn enforce(policy: &SandboxPolicy, scratch: &Path) -> Result<Enforced, SandboxError> {
    let open = |paths: &[PathBuf]| -> Result<Vec<OpenGrant>, GrantError> {
        paths
            .iter()
            .map(PathBuf::as_path)
            .chain([scratch])
            .map(open_grant)
            .collect()
    };
    let writable = match policy {
        SandboxPolicy::DangerFullAccess => {
            return Ok(Enforced {
                denials_logged: false,
            });
        }
        SandboxPolicy::ReadOnly { hidden } => {
            let writable = open(&[])?;
            protect(&[], hidden)?;
            writable
        }
        SandboxPolicy::WorkspaceWrite {
            writable_roots,
            read_only_subpaths,
            hidden,
            ..
        } => {
            let writable = open(writable_roots)?;
            protect(read_only_subpaths, hidden)?;
            writable
        }
    };
    let abi = ABI::V5;
    let err = |e: landlock::RulesetError| SandboxError::Ruleset(e.to_string());
    // Abstract Unix sockets and signals stay within the sandbox (Landlock ABI 6; ignored by
    // older kernels): no session bus or X server reached by name, no process outside killed.
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .map_err(err)?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .map_err(err)?;
    if !policy.network() {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(err)?;
    }
    let devices: Vec<&Path> = ["/dev/null", "/dev/zero", "/dev/tty", "/dev/full"]
        .into_iter()
        .map(Path::new)
        .filter(|p| p.exists())
        .collect();
    let status = ruleset
        .create()
        .map_err(err)?
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi)))
        .map_err(err)?
        .add_rules(writable.iter().map(|g| {
            let access = if g.is_dir {
                AccessFs::from_all(abi)
            } else {
                AccessFs::from_file(abi)
            };
            Ok::<_, landlock::RulesetError>(PathBeneath::new(&g.fd, access))
        }))
        .map_err(err)?
        .add_rules(path_beneath_rules(
            devices,
            AccessFs::from_read(abi) | AccessFs::WriteFile,
        ))
        .map_err(err)?
        .log_new_exec(true)
        .map_err(err)?
        .restrict_self()
        .map_err(err)?;
    match status.ruleset {
        RulesetStatus::NotEnforced => Err(SandboxError::Unavailable),
        _ => Ok(Enforced {
            denials_logged: status.log_new_exec,
        }),
    }
}

/// What [`enforce`] put in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Enforced {
    /// Whether Landlock logs the denials of executed programs (Landlock ABI 7).
    pub denials_logged: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_round_trip_through_json() {
        let p = SandboxPolicy::WorkspaceWrite {
            writable_roots: vec!["/work/agent".into()],
            read_only_subpaths: vec!["/work/agent/.git".into()],
            hidden: vec!["/work/agent/.cairn".into()],
            network: false,
        };
        let json = serde_json::to_string(&p).unwrap();
        assert!(json.contains("\"mode\":\"workspace-write\""), "{json}");
        assert_eq!(serde_json::from_str::<SandboxPolicy>(&json).unwrap(), p);
        let ro: SandboxPolicy = serde_json::from_str(r#"{"mode":"read-only"}"#).unwrap();
        assert_eq!(ro, SandboxPolicy::ReadOnly { hidden: Vec::new() });
        assert_eq!(ro.label(), "read-only");
    }
}
