//! Attestations: the record of one check run against a tree, and its canonical encoding
//! (`docs/format.md`, "Attestation"). Like a tree or a snapshot, an attestation is named by
//! the BLAKE3 (derive-key mode) of that encoding, and decoding accepts only canonical input.

use std::collections::BTreeMap;

use crate::id::{AttestationId, BlobId, TreeId};
use crate::object::{Decoder, ObjectError, hash_with, put_bytes, put_u32};

/// BLAKE3 key-derivation context for attestation ids (format version 1).
pub const ATTESTATION_CONTEXT: &str = "cairn 2026-11-27 attestation v1";

/// The most bytes of a check's stdout (and of its stderr) an attestation keeps: the rest is
/// cut and the output marked cut.
pub const MAX_CHECK_OUTPUT: usize = 16 << 20;

/// How a check's command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// Its exit status (128 + the signal's number if a signal ended it).
    pub code: i32,
    /// The signal that ended it, if one did.
    pub signal: Option<u32>,
    /// Whether it outlived its timeout (and was killed for it).
    pub timed_out: bool,
}

impl Exit {
    /// Whether the check passed: exit status 0, neither killed nor timed out.
    pub fn passed(&self) -> bool {
        self.code == 0 && self.signal.is_none() && !self.timed_out
    }
}

/// One of a check's output streams, as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckOutput {
    /// The blob of its bytes (at most [`MAX_CHECK_OUTPUT`]).
    pub blob: BlobId,
    /// Whether more came than was kept.
    pub cut: bool,
}

/// The record of a check run against a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attestation {
    /// The tree checked (the root tree of the snapshot it was run against).
    pub tree: TreeId,
    /// The check's name.
    pub check: String,
    /// The command and its arguments.
    pub command: Vec<String>,
    /// The environment variables named for the check, with their values.
    pub env: BTreeMap<String, String>,
    /// How the command ended.
    pub exit: Exit,
    /// When it started.
    pub started: jiff::Timestamp,
    /// How long it ran, in milliseconds.
    pub duration_ms: u64,
    /// The host it ran on.
    pub host: String,
    /// The version of cairn that ran it.
    pub version: String,
    /// Its stdout.
    pub stdout: CheckOutput,
    /// Its stderr.
    pub stderr: CheckOutput,
}

/// Checks the name of an environment variable an attestation records: not empty, no `=`
/// and no NUL.
pub fn validate_env_name(name: &str) -> Result<(), ObjectError> {
    if name.is_empty() || name.contains(['=', '\0']) {
        return Err(ObjectError::InvalidField {
            field: "environment variable name (empty, or holding '=' or NUL)",
        });
    }
    Ok(())
}

fn flag(r: &mut Decoder<'_>, field: &'static str) -> Result<bool, ObjectError> {
    match r.u8()? {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(ObjectError::InvalidField { field }),
    }
}

impl Attestation {
    /// The canonical encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(self.tree.as_bytes());
        put_bytes(&mut out, self.check.as_bytes());
        put_u32(&mut out, len_u32(self.command.len()));
        for word in &self.command {
            put_bytes(&mut out, word.as_bytes());
        }
        put_u32(&mut out, len_u32(self.env.len()));
        for (name, value) in &self.env {
            put_bytes(&mut out, name.as_bytes());
            put_bytes(&mut out, value.as_bytes());
        }
        out.extend_from_slice(&self.exit.code.to_le_bytes());
        put_u32(&mut out, self.exit.signal.unwrap_or(0));
        out.push(u8::from(self.exit.timed_out));
        let ns = self.started.as_nanosecond();
        let secs = i64::try_from(ns.div_euclid(1_000_000_000)).unwrap_or(i64::MAX);
        let nanos = u32::try_from(ns.rem_euclid(1_000_000_000)).unwrap_or(0);
        out.extend_from_slice(&secs.to_le_bytes());
        out.extend_from_slice(&nanos.to_le_bytes());
        out.extend_from_slice(&self.duration_ms.to_le_bytes());
        put_bytes(&mut out, self.host.as_bytes());
        put_bytes(&mut out, self.version.as_bytes());
        for output in [&self.stdout, &self.stderr] {
            out.extend_from_slice(output.blob.as_bytes());
            out.push(u8::from(output.cut));
        }
        out
    }

    /// Decodes canonical bytes, checking every invariant.
    pub fn decode(bytes: &[u8]) -> Result<Attestation, ObjectError> {
        let mut r = Decoder(bytes);
        let tree = TreeId::from_bytes(r.id()?);
        let check = r.string("check name")?;
        let count = r.u32()? as usize;
        // Each word takes at least its 4-byte length.
        if count > bytes.len() / 4 {
            return Err(ObjectError::Truncated);
        }
        let mut command = Vec::with_capacity(count);
        for _ in 0..count {
            command.push(r.string("command word")?);
        }
        if command.is_empty() {
            return Err(ObjectError::InvalidField {
                field: "command (empty)",
            });
        }
        let count = r.u32()? as usize;
        let mut env = BTreeMap::new();
        let mut last: Option<String> = None;
        for _ in 0..count {
            let name = r.string("environment variable name")?;
            let value = r.string("environment variable value")?;
            validate_env_name(&name)?;
            if last.as_ref().is_some_and(|l| *l >= name) {
                return Err(ObjectError::InvalidField {
                    field: "environment variables (out of order or repeated)",
                });
            }
            last = Some(name.clone());
            env.insert(name, value);
        }
        let code = i32::from_le_bytes(r.array()?);
        let signal = match r.u32()? {
            0 => None,
            n => Some(n),
        };
        let timed_out = flag(&mut r, "timed-out flag")?;
        let secs = i64::from_le_bytes(r.array()?);
        let nanos = u32::from_le_bytes(r.array()?);
        if nanos >= 1_000_000_000 {
            return Err(ObjectError::InvalidField {
                field: "start time",
            });
        }
        let started =
            jiff::Timestamp::from_nanosecond(i128::from(secs) * 1_000_000_000 + i128::from(nanos))
                .map_err(|_| ObjectError::InvalidField {
                    field: "start time",
                })?;
        let duration_ms = r.u64()?;
        let host = r.string("host")?;
        let version = r.string("cairn version")?;
        let mut outputs = [None, None];
        for output in &mut outputs {
            let blob = BlobId::from_bytes(r.id()?);
            let cut = flag(&mut r, "output cut flag")?;
            *output = Some(CheckOutput { blob, cut });
        }
        r.finish()?;
        let [Some(stdout), Some(stderr)] = outputs else {
            return Err(ObjectError::Truncated);
        };
        Ok(Attestation {
            tree,
            check,
            command,
            env,
            exit: Exit {
                code,
                signal,
                timed_out,
            },
            started,
            duration_ms,
            host,
            version,
            stdout,
            stderr,
        })
    }

    /// The id of this attestation.
    pub fn id(&self) -> AttestationId {
        AttestationId::from_bytes(hash_with(ATTESTATION_CONTEXT, &self.encode()))
    }

    /// Whether it records the same check as `other` would: the same tree, name, command and
    /// environment values (what `verify` answers from the record instead of running again).
    pub fn same_check(
        &self,
        tree: TreeId,
        check: &str,
        command: &[String],
        env: &BTreeMap<String, String>,
    ) -> bool {
        self.tree == tree && self.check == check && self.command == command && self.env == *env
    }
}

/// Decodes stored bytes and checks them against `id`.
pub fn decode_attestation(id: AttestationId, bytes: &[u8]) -> Result<Attestation, ObjectError> {
    if hash_with(ATTESTATION_CONTEXT, bytes) != *id.as_bytes() {
        return Err(ObjectError::InvalidField {
            field: "encoding (it does not match its id)",
        });
    }
    Attestation::decode(bytes)
}

fn len_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
