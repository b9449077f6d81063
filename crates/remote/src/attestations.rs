//! Attestations on a remote (`docs/format.md`, "Attestations on a remote"): the record of a
//! check run against a tree travels with the snapshots that have that tree, filed under the
//! tree so that a store lists only the trees it asks about.
//!
//! ```text
//! attestations/<tree id>/<attestation id>        `CAIRNAT1`, then one zstd frame of the
//!                                                attestation's encoding, its stdout and its
//!                                                stderr, each after its length (u32)
//! attestations/<tree id>/<attestation id>.<key>  a signature of it, armored SSHSIG; <key> is
//!                                                the BLAKE3 of the signing key's fingerprint
//! ```
//!
//! Nothing else on the remote names them, and no pack holds them: a cairn that does not
//! know them never lists `attestations/`, and its remote gc deletes nothing there.

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use object_store::PutMode;

use cas::{Attestation, AttestationId, BlobId, MAX_CHECK_OUTPUT, Reader, TreeId};

use crate::catalog::CONCURRENCY;
use crate::error::RemoteError;
use crate::transport::Remote;

/// Where they are, under the remote's prefix.
pub(crate) const DIR: &str = "attestations";
const MAGIC: &[u8; 8] = b"CAIRNAT1";
/// The most bytes a record decodes to: both outputs at their longest, and an encoding of
/// up to 1 MiB (a command and environment values longer than that are not sent).
const MAX_DECODED: usize = 2 * MAX_CHECK_OUTPUT + (1 << 20) + 12;
/// The most bytes of a record as stored.
const MAX_STORED: u64 = MAX_DECODED as u64 + (1 << 20);
/// The most bytes of a signature file.
const MAX_SIGNATURE: u64 = 64 << 10;
/// Up to this many trees, each tree's folder is listed; for more, `attestations/` once.
const LIST_EACH: usize = 16;
/// Records read at once: each may be [`MAX_STORED`] bytes, so this bounds what a fetch
/// holds of them (their outputs are stored as each group arrives).
const RECORDS_AT_ONCE: usize = 4;

/// A record's key.
fn record_key(tree: TreeId, id: AttestationId) -> String {
    format!("{DIR}/{tree}/{id}")
}

/// The name of a signature by the key of `fingerprint` (`SHA256:…`, whose base64 may hold a
/// `/`): the BLAKE3 of the fingerprint, hex.
fn key_name(fingerprint: &str) -> String {
    blake3::hash(fingerprint.as_bytes()).to_hex().to_string()
}

/// What a listing shows of one attestation: its record, and the names of its signatures.
#[derive(Debug, Default)]
struct Listed {
    record: bool,
    signatures: HashSet<String>,
}

type Listing = BTreeMap<(TreeId, AttestationId), Listed>;

/// Reads a name under a tree's folder: `<attestation id>` or `<attestation id>.<key>`.
fn parse_name(name: &str) -> Option<(AttestationId, Option<String>)> {
    let (id, key) = match name.split_once('.') {
        Some((id, key)) if crate::catalog::is_hex_id(key) => (id, Some(key.to_owned())),
        Some(_) => return None,
        None => (name, None),
    };
    if !crate::catalog::is_hex_id(id) {
        return None;
    }
    Some((id.parse().ok()?, key))
}

/// Reads a key under `attestations/`: `<tree id>/<name>`.
fn parse_key(key: &str) -> Option<(TreeId, AttestationId, Option<String>)> {
    let (tree, name) = key.split_once('/')?;
    if !crate::catalog::is_hex_id(tree) {
        return None;
    }
    let (id, signature) = parse_name(name)?;
    Some((tree.parse().ok()?, id, signature))
}

fn add(listing: &mut Listing, tree: TreeId, id: AttestationId, signature: Option<String>) {
    let entry = listing.entry((tree, id)).or_default();
    match signature {
        Some(key) => {
            entry.signatures.insert(key);
        }
        None => entry.record = true,
    }
}

/// What the remote holds of the attestations of `trees`. Keys another program put there
/// are not attestations, and are left out.
async fn list(remote: &Remote, trees: &HashSet<TreeId>) -> Result<Listing, RemoteError> {
    let mut listing = Listing::new();
    if trees.len() <= LIST_EACH {
        let listed: Vec<(TreeId, Vec<String>)> =
            futures_util::stream::iter(trees.iter().copied().collect::<Vec<TreeId>>())
                .map(|tree| list_tree(remote, tree))
                .buffer_unordered(CONCURRENCY)
                .try_collect()
                .await?;
        for (tree, names) in listed {
            for (id, signature) in names.iter().filter_map(|n| parse_name(n)) {
                add(&mut listing, tree, id, signature);
            }
        }
    } else {
        for (key, _) in remote.list(DIR).await? {
            if let Some((tree, id, signature)) = parse_key(&key)
                && trees.contains(&tree)
            {
                add(&mut listing, tree, id, signature);
            }
        }
    }
    Ok(listing)
}

/// The names under one tree's folder.
async fn list_tree(remote: &Remote, tree: TreeId) -> Result<(TreeId, Vec<String>), RemoteError> {
    let names = remote.list(&format!("{DIR}/{tree}")).await?;
    Ok((tree, names.into_iter().map(|(n, _)| n).collect()))
}

/// A record as stored: [`MAGIC`], then a zstd frame of the encoding, stdout and stderr.
fn encode_record(encoding: &[u8], stdout: &[u8], stderr: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(12 + encoding.len() + stdout.len() + stderr.len());
    for part in [encoding, stdout, stderr] {
        body.extend_from_slice(&(part.len() as u32).to_le_bytes());
        body.extend_from_slice(part);
    }
    let mut out = MAGIC.to_vec();
    // Level 3, as trees are sent; compressing a buffer in memory does not fail.
    out.extend(zstd::bulk::compress(&body, 3).unwrap_or_default());
    out
}

/// An attestation received from a remote, checked: its encoding hashes to its id and names
/// the tree it is filed under, its outputs are the blobs it names, and each signature is of
/// its encoding (by whichever key: who counts, an allowed-signers file says).
#[derive(Debug)]
pub struct ReceivedAttestation {
    /// Its id.
    pub id: AttestationId,
    /// It.
    pub attestation: Attestation,
    /// Whether the store lacked it (its output blobs are stored already); else only
    /// signatures of it are new.
    pub new: bool,
    /// Its signatures: (the signing key's fingerprint, the armored signature).
    pub signatures: Vec<(String, Vec<u8>)>,
}

/// Checks a record read from `key`, filed as attestation `id` of `tree`.
fn decode_record(
    remote: &str,
    tree: TreeId,
    id: AttestationId,
    bytes: &[u8],
) -> Result<(Attestation, Vec<u8>, Vec<u8>), RemoteError> {
    let bad = |reason: String| RemoteError::corrupt(remote, format!("attestation {id}"), reason);
    let frame = bytes
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("not a cairn attestation record".to_owned()))?;
    let body = zstd::bulk::decompress(frame, MAX_DECODED).map_err(|e| bad(format!("zstd: {e}")))?;
    let mut parts = Vec::with_capacity(3);
    let mut rest = body.as_slice();
    for _ in 0..3 {
        let (len, tail) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| bad("truncated".to_owned()))?;
        let len = u32::from_le_bytes(*len) as usize;
        if tail.len() < len {
            return Err(bad("truncated".to_owned()));
        }
        let (part, tail) = tail.split_at(len);
        parts.push(part.to_vec());
        rest = tail;
    }
    if !rest.is_empty() {
        return Err(bad("trailing bytes".to_owned()));
    }
    let stderr = parts.pop().unwrap_or_default();
    let stdout = parts.pop().unwrap_or_default();
    let encoding = parts.pop().unwrap_or_default();
    let attestation =
        cas::decode_attestation(id, &encoding).map_err(|e| bad(format!("its encoding: {e}")))?;
    if attestation.tree != tree {
        return Err(bad(format!(
            "it is of tree {}, yet filed under tree {tree}",
            attestation.tree
        )));
    }
    for (stream, output, bytes) in [
        ("stdout", attestation.stdout, &stdout),
        ("stderr", attestation.stderr, &stderr),
    ] {
        if bytes.len() > MAX_CHECK_OUTPUT || BlobId::of(bytes) != output.blob {
            return Err(bad(format!(
                "its {stream} is not the blob {} it names",
                output.blob
            )));
        }
    }
    Ok((attestation, stdout, stderr))
}

/// Checks a signature read as `name` of attestation `id` (`encoding`): the fingerprint it
/// is filed under is its key's.
fn decode_signature(
    remote: &str,
    id: AttestationId,
    name: &str,
    encoding: &[u8],
    bytes: &[u8],
) -> Result<(String, Vec<u8>), RemoteError> {
    let bad = |reason: String| {
        RemoteError::corrupt(
            remote,
            format!("signature {name} of attestation {id}"),
            reason,
        )
    };
    let text = std::str::from_utf8(bytes).map_err(|_| bad("not UTF-8".to_owned()))?;
    let signature = attest::Signature::from_pem(text).map_err(|e| bad(e.to_string()))?;
    signature
        .matches(encoding)
        .map_err(|e| bad(e.to_string()))?;
    let fingerprint = signature.fingerprint();
    if key_name(&fingerprint) != name {
        return Err(bad(format!(
            "made by key {fingerprint}, filed under another"
        )));
    }
    Ok((fingerprint, bytes.to_vec()))
}

/// Brings the attestations of `trees` the store lacks (and signatures of those it has that
/// it lacks), each checked. Only their output blobs are stored here (unreachable until the
/// caller records the attestations), a few records at a time, so a remote's records of any
/// size or number never all sit in memory.
pub(crate) fn fetch(
    remote: &Remote,
    store: &cas::Store,
    trees: &HashSet<TreeId>,
) -> Result<Vec<ReceivedAttestation>, RemoteError> {
    if trees.is_empty() {
        return Ok(Vec::new());
    }
    let reader = store.reader()?;
    let listing = remote.block_on(list(remote, trees))?;
    let mut wanted: Vec<Wanted> = Vec::new();
    for ((tree, id), listed) in listing {
        // A signature whose record is not there (yet) is not read.
        if !listed.record {
            continue;
        }
        let here: Option<Attestation> = reader
            .attestations(tree)?
            .into_iter()
            .find_map(|(i, a)| (i == id).then_some(a));
        let have: HashSet<String> = match here {
            Some(_) => reader
                .attestation_signatures(id)?
                .into_iter()
                .map(|(f, _)| key_name(&f))
                .collect(),
            None => HashSet::new(),
        };
        let signatures: Vec<String> = listed.signatures.difference(&have).cloned().collect();
        if here.is_some() && signatures.is_empty() {
            continue;
        }
        wanted.push(Wanted {
            tree,
            id,
            here,
            signatures,
        });
    }
    drop(reader);
    let mut out = Vec::new();
    let mut wanted = wanted.into_iter().peekable();
    while wanted.peek().is_some() {
        let group: Vec<_> = wanted.by_ref().take(RECORDS_AT_ONCE).collect();
        let got = fetch_group(remote, group)?;
        let reader = store.reader()?;
        let mut batch = cas::WriteBatch::new();
        for (received, outputs) in got {
            for bytes in outputs.iter().flat_map(|(o, e)| [o, e]) {
                let (_, blob) =
                    cas::PreparedBlob::new_unless(bytes, |id| reader.has_blob(id).unwrap_or(false));
                if let Some(blob) = blob {
                    batch.add_blob(blob);
                }
            }
            out.push(received);
        }
        drop(reader);
        if !batch.is_empty() {
            store.write(&batch)?;
        }
    }
    Ok(out)
}

/// An attestation a fetch wants of the remote: its record unless the store has it
/// (`here`), and the signatures of it the store lacks (their names).
struct Wanted {
    tree: TreeId,
    id: AttestationId,
    here: Option<Attestation>,
    signatures: Vec<String>,
}

/// A received record's stdout and stderr (`None`: the store had the record).
type Outputs = Option<(Vec<u8>, Vec<u8>)>;

/// One group of [`fetch`]: each record read and checked (with its outputs, if the store
/// lacked it), and its wanted signatures.
fn fetch_group(
    remote: &Remote,
    wanted: Vec<Wanted>,
) -> Result<Vec<(ReceivedAttestation, Outputs)>, RemoteError> {
    let name = remote.name();
    remote.block_on(async {
        futures_util::stream::iter(wanted.into_iter().map(
            |Wanted {
                 tree,
                 id,
                 here,
                 signatures,
             }| async move {
                let key = record_key(tree, id);
                let (attestation, outputs) = match here {
                    // Only its new signatures are wanted: they are checked against it.
                    Some(attestation) => (attestation, None),
                    None => {
                        let Some(bytes) = remote.get(&key, MAX_STORED).await? else {
                            // Removed by a remote gc since the listing.
                            return Ok(None);
                        };
                        let (attestation, stdout, stderr) = decode_record(name, tree, id, &bytes)?;
                        (attestation, Some((stdout, stderr)))
                    }
                };
                let encoding = attestation.encode();
                let mut received = Vec::with_capacity(signatures.len());
                for signature in signatures {
                    let Some(bytes) = remote
                        .get(&format!("{key}.{signature}"), MAX_SIGNATURE)
                        .await?
                    else {
                        continue;
                    };
                    received.push(decode_signature(name, id, &signature, &encoding, &bytes)?);
                }
                let received = ReceivedAttestation {
                    id,
                    attestation,
                    new: outputs.is_some(),
                    signatures: received,
                };
                Ok::<_, RemoteError>(Some((received, outputs)))
            },
        ))
        .buffer_unordered(CONCURRENCY)
        .try_filter_map(|found| async move { Ok(found) })
        .try_collect()
        .await
    })
}

/// Sends the attestations the store holds of `trees` (each record with its output, then
/// its signatures) that the remote lacks; returns how many records and signatures it sent.
pub(crate) fn push(
    remote: &Remote,
    reader: &Reader,
    trees: &HashSet<TreeId>,
) -> Result<u64, RemoteError> {
    // Only trees with attestations here are asked about.
    let mut local: Vec<(AttestationId, Attestation)> = Vec::new();
    let mut asked: HashSet<TreeId> = HashSet::new();
    for tree in trees {
        let found = reader.attestations(*tree)?;
        if !found.is_empty() {
            asked.insert(*tree);
            local.extend(found);
        }
    }
    if local.is_empty() {
        return Ok(0);
    }
    let listing = remote.block_on(list(remote, &asked))?;
    // (key, bytes), records before the signatures of them.
    let mut records: Vec<(String, Bytes)> = Vec::new();
    let mut signatures: Vec<(String, Bytes)> = Vec::new();
    for (id, attestation) in local {
        let key = record_key(attestation.tree, id);
        let listed = listing.get(&(attestation.tree, id));
        let encoding = attestation.encode();
        if !listed.is_some_and(|l| l.record) {
            if encoding.len() > 1 << 20 {
                return Err(RemoteError::Unpushable {
                    remote: remote.name().to_owned(),
                    reason: format!(
                        "attestation {id} is {} bytes encoded, more than the 1 MiB a remote record holds",
                        encoding.len()
                    ),
                    layout: None,
                });
            }
            let stdout = reader.blob(attestation.stdout.blob)?;
            let stderr = reader.blob(attestation.stderr.blob)?;
            records.push((
                key.clone(),
                Bytes::from(encode_record(&encoding, &stdout, &stderr)),
            ));
        }
        for (fingerprint, armored) in reader.attestation_signatures(id)? {
            let name = key_name(&fingerprint);
            if !listed.is_some_and(|l| l.signatures.contains(&name)) {
                signatures.push((format!("{key}.{name}"), Bytes::from(armored)));
            }
        }
    }
    let sent = (records.len() + signatures.len()) as u64;
    remote.block_on(async {
        for batch in [records, signatures] {
            futures_util::stream::iter(batch.into_iter().map(|(key, bytes)| async move {
                remote
                    .put(&key, bytes, PutMode::Overwrite)
                    .await
                    .map_err(|e| remote.fail(e))
            }))
            .buffer_unordered(CONCURRENCY)
            .try_collect::<Vec<_>>()
            .await?;
        }
        Ok::<_, RemoteError>(())
    })?;
    Ok(sent)
}

/// Remote gc's part: deletes the records (and signatures) whose tree no live snapshot has
/// as root and that are older than `grace_seconds`, so a push under way elsewhere keeps
/// what it sent. Returns the records (not signatures) deleted, or that would be.
pub(crate) async fn gc(
    remote: &Remote,
    live_trees: &HashSet<TreeId>,
    grace_seconds: u64,
    now: i64,
    dry_run: bool,
) -> Result<u64, RemoteError> {
    let mut removed = 0;
    for (key, meta) in remote.list(DIR).await? {
        // Keys another program put there are not cairn's to delete.
        let Some((tree, _, signature)) = parse_key(&key) else {
            continue;
        };
        if live_trees.contains(&tree)
            || now.saturating_sub(meta.last_modified.timestamp()) < grace_seconds as i64
        {
            continue;
        }
        if signature.is_none() {
            removed += 1;
        }
        if !dry_run {
            remote.delete(&format!("{DIR}/{key}")).await?;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_under_a_tree_are_an_attestation_or_one_of_its_signatures() {
        let id = "a".repeat(64);
        let key = "b".repeat(64);
        assert!(matches!(parse_name(&id), Some((_, None))));
        assert!(matches!(parse_name(&format!("{id}.{key}")), Some((_, Some(k))) if k == key));
        for junk in [
            "x",
            &format!("{id}.sig"),
            &format!("{id}x"),
            &"A".repeat(64),
        ] {
            assert!(parse_name(junk).is_none(), "{junk}");
        }
        assert!(parse_key(&format!("{key}/{id}")).is_some());
        assert!(parse_key(&format!("nottree/{id}")).is_none());
    }

    #[test]
    fn a_record_reads_back_and_any_change_to_it_is_refused() {
        let stdout = b"1 passed\n".to_vec();
        let attestation = Attestation {
            tree: TreeId::from_bytes([3; 32]),
            check: "tests".into(),
            command: vec!["pytest".into()],
            env: Default::default(),
            exit: cas::Exit {
                code: 0,
                signal: None,
                timed_out: false,
            },
            started: jiff::Timestamp::UNIX_EPOCH,
            duration_ms: 5,
            host: "h".into(),
            version: "0".into(),
            stdout: cas::CheckOutput {
                blob: BlobId::of(&stdout),
                cut: false,
            },
            stderr: cas::CheckOutput {
                blob: BlobId::of(b""),
                cut: false,
            },
        };
        let id = attestation.id();
        let record = encode_record(&attestation.encode(), &stdout, b"");
        let (back, out, err) = decode_record("o", attestation.tree, id, &record).unwrap();
        assert_eq!(
            (back, out, err),
            (attestation.clone(), stdout.clone(), Vec::new())
        );
        // Filed under another tree.
        let other = TreeId::from_bytes([4; 32]);
        assert!(decode_record("o", other, id, &record).is_err());
        // Another output than the one it names.
        let forged = encode_record(&attestation.encode(), b"all passed\n", b"");
        let e = decode_record("o", attestation.tree, id, &forged).unwrap_err();
        assert!(e.to_string().contains(&format!("attestation {id}")), "{e}");
        // A changed encoding no longer hashes to its id.
        let mut changed = attestation.clone();
        changed.exit.code = 1;
        let forged = encode_record(&changed.encode(), &stdout, b"");
        assert!(decode_record("o", attestation.tree, id, &forged).is_err());
    }
}
