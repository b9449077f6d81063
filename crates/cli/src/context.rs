//! What every command needs: output mode and the store, found as SPEC.md says.

use camino::{Utf8Path, Utf8PathBuf};
use cas::{OpenOptions, Store};

use crate::error::CliError;

pub struct Ctx {
    pub json: bool,
    store_flag: Option<Utf8PathBuf>,
}

impl Ctx {
    pub fn new(json: bool, store_flag: Option<Utf8PathBuf>) -> Ctx {
        Ctx { json, store_flag }
    }

    /// `--store` / `$CAIRN_STORE`, else the nearest `.cairn/` in the current directory or its
    /// ancestors, else `$XDG_DATA_HOME/cairn` (`~/.local/share/cairn`).
    pub fn store_path(&self) -> Result<Utf8PathBuf, CliError> {
        let cwd = current_dir()?;
        if let Some(p) = &self.store_flag {
            return Ok(absolute(&cwd, p));
        }
        for dir in cwd.ancestors() {
            let candidate = dir.join(".cairn");
            if candidate.is_dir() {
                return Ok(candidate);
            }
        }
        let data = match std::env::var("XDG_DATA_HOME") {
            Ok(d) if !d.is_empty() => Utf8PathBuf::from(d),
            _ => {
                let home = std::env::var("HOME").map_err(|_| {
                    CliError::usage(
                        "no_store",
                        "no store found: pass --store, or set CAIRN_STORE or HOME",
                    )
                })?;
                Utf8PathBuf::from(home).join(".local/share")
            }
        };
        Ok(data.join("cairn"))
    }

    fn open(&self, create: bool) -> Result<Store, CliError> {
        self.open_with(create, false)
    }

    fn open_with(&self, create: bool, read_only: bool) -> Result<Store, CliError> {
        let path = self.store_path()?;
        let options = OpenOptions {
            create,
            read_only,
            on_wait: Some(|root| {
                eprintln!("cairn: waiting for store {root}: another process holds it");
            }),
            ..OpenOptions::from_env()
        };
        Ok(Store::open(&path, &options)?)
    }

    /// Opens the store for a command that only reads: a missing store is an error (exit 2),
    /// nothing in it changes, and other readers may hold it at the same time.
    pub fn open_read_only(&self) -> Result<Store, CliError> {
        self.open_with(false, true)
    }

    /// Opens an existing store for writing: a missing store is an error (exit 2).
    pub fn open_existing(&self) -> Result<Store, CliError> {
        self.open(false)
    }

    /// Opens the store for a writing command, creating it if missing.
    pub fn open_or_create(&self) -> Result<Store, CliError> {
        self.open(true)
    }
}

pub fn current_dir() -> Result<Utf8PathBuf, CliError> {
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::store("io", format!("current directory: {e}")))?;
    Utf8PathBuf::from_path_buf(cwd).map_err(|p| {
        CliError::usage(
            "invalid_path",
            format!("{}: path is not valid UTF-8", p.display()),
        )
    })
}

/// `p` made absolute against `cwd`, with `.` and `..` components resolved lexically.
pub fn absolute(cwd: &Utf8Path, p: &Utf8Path) -> Utf8PathBuf {
    let joined = if p.is_absolute() {
        p.to_owned()
    } else {
        cwd.join(p)
    };
    let mut out = Utf8PathBuf::new();
    for c in joined.components() {
        match c {
            camino::Utf8Component::CurDir => {}
            camino::Utf8Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_str()),
        }
    }
    out
}

/// Tree paths from `-- PATH…` arguments: relative to the worktree root as given, or
/// absolute inside `root`; `.` components dropped, `..` refused.
pub fn tree_paths(
    root: Option<&Utf8Path>,
    raw: &[std::ffi::OsString],
) -> Result<Vec<Vec<u8>>, CliError> {
    use std::os::unix::ffi::OsStrExt;
    let quote = diff::quote_path;
    let mut out = Vec::new();
    for p in raw {
        let bytes = p.as_bytes();
        let rel = match (bytes.starts_with(b"/"), root) {
            (true, Some(root)) => match bytes.strip_prefix(root.as_str().as_bytes()) {
                Some(rest) if rest.is_empty() || rest.starts_with(b"/") => rest,
                _ => {
                    return Err(CliError::usage(
                        "invalid_path",
                        format!("{}: outside the worktree {root}", quote(bytes)),
                    ));
                }
            },
            (true, None) => {
                return Err(CliError::usage(
                    "invalid_path",
                    format!("{}: an absolute path needs a worktree", quote(bytes)),
                ));
            }
            (false, _) => bytes,
        };
        let mut parts = Vec::new();
        for c in rel.split(|&b| b == b'/') {
            match c {
                b"" | b"." => {}
                b".." => {
                    return Err(CliError::usage(
                        "invalid_path",
                        format!("{}: '..' is not allowed", quote(bytes)),
                    ));
                }
                c => parts.push(c),
            }
        }
        out.push(parts.join(&b'/'));
    }
    Ok(out)
}

/// A snapshot spec where no worktree is named: a checkpoint name of the worktree holding
/// the current directory, else a ref name or unique id prefix (SPEC.md's order).
pub fn resolve_snapshot(reader: &cas::Reader, spec: &str) -> Result<cas::SnapshotId, CliError> {
    let record = match current_dir() {
        Ok(cwd) => fs_manager::find_worktree(reader, &cwd)?,
        Err(_) => None,
    };
    match record.as_ref().and_then(|r| r.checkpoint(spec)) {
        Some(c) => Ok(c.snapshot),
        None => Ok(reader.resolve_snapshot(spec)?),
    }
}

/// A snapshot spec in the context of a worktree: its checkpoint name, else a ref name or
/// unique id prefix.
pub fn resolve_in(
    reader: &cas::Reader,
    record: &cas::WorktreeRecord,
    spec: &str,
) -> Result<cas::SnapshotId, CliError> {
    match record.checkpoint(spec) {
        Some(c) => Ok(c.snapshot),
        None => Ok(reader.resolve_snapshot(spec)?),
    }
}
