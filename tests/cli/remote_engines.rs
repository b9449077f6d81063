//! The remote scenarios of `remote_commands.rs` on real S3 engines, machines in their own
//! network namespaces: a SeaweedFS cluster, and `rclone serve s3` (a second S3
//! implementation, which accepts conditional headers without enforcing them); then faults
//! on SeaweedFS: a gateway killed in a push, a volume server killed in a pull, a flipped
//! byte on the engine's disk, wrong credentials, an identity that may not write.

use std::time::Duration;

use crate::engines::{
    ACCESS_KEY, Hosts, READER_KEY, READER_SECRET, RcloneS3, SECRET_KEY, Seaweed, rclone, read_key,
    write_key,
};
use crate::remote_commands::{Machine, RemoteTarget, race, tree_of, two_machines};

pub(crate) fn s3_target(endpoint: &str, bucket: &str, conditional: bool) -> RemoteTarget {
    RemoteTarget {
        url: format!("s3://{bucket}/team"),
        endpoint: Some(endpoint.to_owned()),
        env: vec![
            ("AWS_ACCESS_KEY_ID".into(), ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY".into(), SECRET_KEY.into()),
        ],
        conditional,
    }
}

#[test]
fn seaweedfs_machines_in_their_own_namespaces_share_snapshots_and_race_on_a_ref() {
    let hosts = Hosts::new(2);
    let cluster = Seaweed::start(hosts.server_ip());
    cluster.create_bucket("cairn-share");
    let target = s3_target(&cluster.endpoint(), "cairn-share", true);
    let tmp = tempfile::tempdir().unwrap();
    let root = camino::Utf8Path::from_path(tmp.path()).unwrap();
    let a = Machine::new(root, "a", hosts.prefix(0), &target);
    let b = Machine::new(root, "b", hosts.prefix(1), &target);
    if hosts.separate() {
        // Machine A cannot see B's loopback: they are other hosts.
        let probe = std::process::Command::new("ip")
            .args(["netns", "identify"])
            .output();
        assert!(probe.is_ok());
    }
    two_machines(&target, &a, &b);
    race(&target, &a, &b);
}

#[test]
fn rclone_serve_s3_shares_snapshots_and_refuses_ref_updates_it_cannot_make_safe() {
    let hosts = Hosts::new(2);
    let engine = RcloneS3::start(hosts.server_ip());
    engine.create_bucket("cairn-share");
    let target = s3_target(&engine.endpoint(), "cairn-share", false);
    let tmp = tempfile::tempdir().unwrap();
    let root = camino::Utf8Path::from_path(tmp.path()).unwrap();
    let a = Machine::new(root, "a", hosts.prefix(0), &target);
    let b = Machine::new(root, "b", hosts.prefix(1), &target);
    two_machines(&target, &a, &b);
    race(&target, &a, &b);
}

/// A project of `mb` MB of incompressible files (so packs fill), and its snapshot id.
fn big_project(m: &Machine, name: &str, mb: usize) -> String {
    let p = m.dir.join(name);
    std::fs::create_dir_all(&p).unwrap();
    for i in 0..mb {
        let mut bytes = vec![0u8; 1 << 20];
        blake3::Hasher::new()
            .update(format!("{name}-{i}").as_bytes())
            .finalize_xof()
            .fill(&mut bytes);
        std::fs::write(p.join(format!("f{i:03}.bin")), bytes).unwrap();
    }
    m.ok(&["onboard", p.as_str()])["snapshot"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn listing(endpoint: &str, path: &str) -> Vec<String> {
    let out = rclone(endpoint, ACCESS_KEY, SECRET_KEY)
        .args(["lsf", path])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn seaweedfs_faults_leave_nothing_half_visible_and_nothing_wrong_stored() {
    let mut cluster = Seaweed::start("127.0.0.1");
    cluster.create_bucket("cairn-faults");
    let endpoint = cluster.endpoint();
    let target = s3_target(&endpoint, "cairn-faults", true);
    let tmp = tempfile::tempdir().unwrap();
    let root = camino::Utf8Path::from_path(tmp.path()).unwrap();
    let a = Machine::new(root, "a", Vec::new(), &target);
    let b = Machine::new(root, "b", Vec::new(), &target);

    // Wrong credentials: a clear error naming the remote, nothing recorded.
    let mut wrong = Machine::new(root, "wrong", Vec::new(), &target);
    wrong.env = vec![
        ("AWS_ACCESS_KEY_ID".into(), ACCESS_KEY.into()),
        ("AWS_SECRET_ACCESS_KEY".into(), "not-the-secret".into()),
    ];
    let (code, v) = wrong.json(&[
        "remote",
        "add",
        "origin",
        &target.url,
        "--endpoint",
        &endpoint,
    ]);
    assert_eq!(code, 3, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("origin"),
        "{v}"
    );

    // Keys from the shared credentials file when the environment has none; and none of
    // them end up in the store.
    let mut from_file = Machine::new(root, "from-file", Vec::new(), &target);
    from_file.env = Vec::new();
    std::fs::create_dir_all(from_file.dir.join("home/.aws")).unwrap();
    std::fs::write(
        from_file.dir.join("home/.aws/credentials"),
        format!(
            "[default]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n"
        ),
    )
    .unwrap();
    from_file.add_remote(&target);
    let db = std::fs::read(from_file.dir.join("store").join(cas::DATABASE_FILE)).unwrap();
    assert!(
        !db.windows(SECRET_KEY.len())
            .any(|w| w == SECRET_KEY.as_bytes()),
        "no credentials in the store"
    );

    a.add_remote(&target);
    b.add_remote(&target);
    // An identity that may read but not write: the push fails naming the remote, and
    // nothing of it is visible.
    let small = big_project(&a, "small", 2);
    let mut reader = Machine::new(root, "a", Vec::new(), &target);
    reader.env = vec![
        ("AWS_ACCESS_KEY_ID".into(), READER_KEY.into()),
        ("AWS_SECRET_ACCESS_KEY".into(), READER_SECRET.into()),
    ];
    let (code, v) = reader.json(&["push", &small]);
    assert_eq!(code, 3, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("origin"),
        "{v}"
    );
    let (code, v) = b.json(&["checkout", &small, "small"]);
    assert_eq!(code, 2, "not on the remote: {v}");

    // The gateway dies after the first pack's index landed: the push fails, the snapshot is
    // not visible; pushed again, only the rest moves.
    // Big enough (about ten packs) that the push is far from done when the first index is
    // seen; the push is stopped the moment it is seen, so the gateway dies under it.
    let files = 300;
    let big = big_project(&a, "big", files);
    let mut push = a.command(&["--json", "push", &big]);
    push.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = push.spawn().unwrap();
    let pid = child.id().to_string();
    let started = std::time::Instant::now();
    while listing(&endpoint, "eng:cairn-faults/team/index").is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no pack arrived"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let signal = |sig: &str| {
        assert!(
            std::process::Command::new("kill")
                .args([sig, &pid])
                .status()
                .unwrap()
                .success()
        );
    };
    signal("-STOP");
    cluster.kill_s3();
    signal("-CONT");
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "the push failed: {text}");
    assert!(text.contains("origin"), "{text}");
    cluster.restart_s3();
    let (code, v) = b.json(&["checkout", &big, "big"]);
    assert_eq!(code, 2, "half a push is not visible: {v}");
    let again = a.ok(&["push", &big]);
    let total = files as u64 * 2 + 1 + 1; // blobs and their chunks are one object each here, a tree, a snapshot
    let sent = again["objects_sent"].as_u64().unwrap();
    assert!(sent > 0 && sent < total, "resumed, not restarted: {again}");
    assert!(again["objects_present"].as_u64() > Some(0), "{again}");

    // A volume server dies during a pull: it succeeds through the replica, or fails
    // naming the remote with nothing of the snapshot stored.
    let mut pull = b.command(&["--json", "pull", &big]);
    pull.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = pull.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    cluster.kill_volume(0);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    match out.status.code() {
        Some(0) => {
            b.ok(&["fsck"]);
            b.ok(&["--offline", "checkout", &big, "big"]);
            assert_eq!(tree_of(&b.dir.join("big")), tree_of(&a.dir.join("big")));
            eprintln!("pull went on through the replica");
        }
        Some(3) => {
            assert!(text.contains("origin"), "{text}");
            let (code, _) = b.json(&["--offline", "log", &big]);
            assert_eq!(code, 2, "nothing of the snapshot was kept");
        }
        other => panic!("pull: {other:?}: {text}"),
    }

    // A flipped byte in the engine's own files (both replicas): refused naming the object
    // and the remote, nothing of it stored. (A flipped byte the engine does not notice is
    // cairn's own check: `remote_commands.rs` flips one in a folder remote's pack.)
    let c = a.dir.join("flip");
    std::fs::create_dir_all(&c).unwrap();
    let mut noise = vec![0u8; 300_000];
    blake3::Hasher::new()
        .update(b"flip me")
        .finalize_xof()
        .fill(&mut noise);
    std::fs::write(c.join("noise.bin"), &noise).unwrap();
    let flip = a.ok(&["onboard", c.as_str()])["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    cluster.restart_volume(0);
    a.ok(&["push", &flip]);
    let needle = &noise[5000..5064];
    let mut flipped = 0;
    for dir in cluster.volume_dirs() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "dat") {
                continue;
            }
            let mut bytes = std::fs::read(&path).unwrap();
            let mut at = 0;
            while let Some(found) = bytes[at..].windows(needle.len()).position(|w| w == needle) {
                bytes[at + found + 7] ^= 0x20;
                at += found + needle.len();
                flipped += 1;
            }
            std::fs::write(&path, bytes).unwrap();
        }
    }
    assert!(
        flipped >= 1,
        "the file's bytes are on the volume servers' disks"
    );
    let c_out = b.dir.join("flip-out");
    let (code, v) = b.json(&["checkout", &flip, c_out.as_str()]);
    assert_eq!(code, 3, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    let blob = blake3::hash(&noise).to_hex().to_string();
    let tree = a.ok(&["log", &flip, "-n", "1"])["snapshots"][0]["tree"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("origin"), "{message}");
    // SeaweedFS finds the damage itself (its checksums) and refuses the whole pack, so
    // the error names the first object read from it, the tree or the file.
    assert!(
        message.contains(&format!("object {blob}")) || message.contains(&format!("object {tree}")),
        "names the object: {message}"
    );
    let (code, _) = b.json(&["--offline", "log", &flip]);
    assert_eq!(code, 2, "nothing of it was kept");
}

#[test]
fn a_full_seaweedfs_fails_the_push_naming_the_remote_and_shows_nothing() {
    // One volume of 32 MB on each server, replicated: 32 MB in all.
    let cluster = Seaweed::with_volumes("127.0.0.1", 1);
    cluster.create_bucket("cairn-full");
    let target = s3_target(&cluster.endpoint(), "cairn-full", true);
    let tmp = tempfile::tempdir().unwrap();
    let root = camino::Utf8Path::from_path(tmp.path()).unwrap();
    let a = Machine::new(root, "a", Vec::new(), &target);
    let b = Machine::new(root, "b", Vec::new(), &target);
    a.add_remote(&target);
    b.add_remote(&target);
    let big = big_project(&a, "big", 80);
    let (code, v) = a.json(&["push", &big]);
    assert_eq!(code, 3, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("origin"),
        "{v}"
    );
    let (code, v) = b.json(&["checkout", &big, "big"]);
    assert_eq!(code, 2, "nothing of it is visible: {v}");
}

#[test]
fn attestations_travel_through_seaweedfs_so_another_store_merges_without_running_the_check() {
    let cluster = Seaweed::start("127.0.0.1");
    cluster.create_bucket("cairn-proofs");
    let endpoint = cluster.endpoint();
    let target = s3_target(&endpoint, "cairn-proofs", true);
    let tmp = tempfile::tempdir().unwrap();
    let root = camino::Utf8Path::from_path(tmp.path()).unwrap();
    let a = Machine::new(root, "a", Vec::new(), &target);
    let b = Machine::new(root, "b", Vec::new(), &target);
    for m in [&a, &b] {
        m.ok(&["init"]);
        m.add_remote(&target);
    }

    // Machine A: a repository, an agent's change to it, and CI's key.
    let repo = a.dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    crate::support::git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "a\n").unwrap();
    crate::support::git(&repo, &["add", "-A"]);
    crate::support::git(&repo, &["commit", "-qm", "first"]);
    let base = a.ok(&["onboard", repo.as_str()])["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    let agent = a.dir.join("agent");
    a.ok(&["checkout", &base, agent.as_str()]);
    std::fs::write(agent.join("new.txt"), "new\n").unwrap();
    let snap = a.ok(&["snapshot", agent.as_str(), "-m", "agent"])["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    let keys = a.dir.join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let (key, public) = crate::verify_commands::ssh_key(&keys);
    let signers = b.dir.join("allowed_signers");
    std::fs::write(&signers, format!("ci@example {public}\n")).unwrap();

    // The check passes only while A's witness file exists: once it is gone, running the
    // check anywhere records a failure.
    let witness = a.dir.join("witness");
    std::fs::write(&witness, "").unwrap();
    let (code, tests) = a.json(&[
        "verify",
        &snap,
        "--check",
        "tests",
        "--sign",
        key.as_str(),
        "--",
        "test",
        "-f",
        witness.as_str(),
    ]);
    assert_eq!(code, 0, "{tests}");
    let attestation = tests["attestation"].as_str().unwrap().to_owned();
    let tree = tests["tree"].as_str().unwrap().to_owned();
    std::fs::remove_file(&witness).unwrap();

    // A pushes the snapshot by ref: its attestation and signature go with it.
    a.ok(&["ref", "set", "work", &snap]);
    let pushed = a.ok(&["push", "work"]);
    assert_eq!(pushed["attestations_sent"], 2, "{pushed}");
    let on_remote = listing(
        &endpoint,
        &format!("eng:cairn-proofs/team/attestations/{tree}"),
    );
    assert_eq!(
        on_remote.len(),
        2,
        "the record and its signature: {on_remote:?}"
    );
    // Pushed again: nothing more to send.
    assert_eq!(a.ok(&["push", "work"])["attestations_sent"], 0);

    // B pulls: the attestation comes, verified, with who signed it.
    let pulled = b.ok(&["pull", "work"]);
    assert_eq!(pulled["attestations_received"], 2, "{pulled}");
    let listed = b.ok(&["checks", &snap]);
    assert_eq!(listed["checks"].as_array().unwrap().len(), 1, "{listed}");
    let check = &listed["checks"][0];
    assert_eq!(check["attestation"], attestation.as_str());
    assert_eq!(check["passed"], true);
    assert!(check["signed_by"].as_str().unwrap().starts_with("SHA256:"));
    // B's log marks the snapshot with it.
    let log = b.ok(&["log", &snap, "-n", "1"]);
    assert_eq!(
        log["snapshots"][0]["checks"],
        serde_json::json!([{"check": "tests", "passed": true, "attestation": attestation}])
    );

    // B merges into its clone of the repository, requiring the signed check: A's record
    // proves it; nothing ran the check again (it would fail now, and be recorded).
    let clone = b.dir.join("repo");
    let out = std::process::Command::new("git")
        .args(["clone", "-q", repo.as_str(), clone.as_str()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let (code, merged) = b.json(&[
        "merge",
        &snap,
        "--into",
        clone.as_str(),
        "--base",
        &base,
        "--require",
        "tests",
        "--signed-by",
        signers.as_str(),
    ]);
    assert_eq!(code, 0, "{merged}");
    assert_eq!(merged["merged"], true, "{merged}");
    assert_eq!(merged["verified"][0]["attestation"], attestation.as_str());
    let trailers = crate::support::git(
        &clone,
        &[
            "log",
            "-1",
            "--format=%(trailers:key=Cairn-Verified)",
            merged["branch"].as_str().unwrap(),
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&trailers).trim(),
        format!("Cairn-Verified: tests {attestation}")
    );
    let after = b.ok(&["checks", &snap]);
    assert_eq!(after["checks"].as_array().unwrap().len(), 1, "{after}");
    assert_eq!(after["checks"][0]["host"], check["host"]);
    assert_eq!(after["checks"][0]["started"], check["started"]);

    // `verify --push` on A after the push: another store sees it once it pulls.
    let (code, lint) = a.json(&["verify", &snap, "--check", "lint", "--push", "--", "true"]);
    assert_eq!(code, 0, "{lint}");
    assert_eq!(lint["pushed"]["remote"], "origin", "{lint}");
    assert_eq!(lint["pushed"]["attestations_sent"], 1, "{lint}");
    // A retried step answers from the record and pushes again (nothing left to send).
    let (code, again) = a.json(&["verify", &snap, "--check", "lint", "--push", "--", "true"]);
    assert_eq!(code, 0, "{again}");
    assert_eq!(again["cached"], true);
    assert_eq!(again["pushed"]["attestations_sent"], 0, "{again}");
    let names = |v: &serde_json::Value| -> Vec<String> {
        let mut names: Vec<String> = v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["check"].as_str().unwrap().to_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(names(&b.ok(&["checks", &snap])), ["tests"]);
    assert_eq!(b.ok(&["pull", "work"])["attestations_received"], 1);
    assert_eq!(names(&b.ok(&["checks", &snap])), ["lint", "tests"]);

    // A third store fetches the snapshot on demand, and its checks come with it.
    let c = Machine::new(root, "c", Vec::new(), &target);
    c.ok(&["init"]);
    c.add_remote(&target);
    assert_eq!(names(&c.ok(&["checks", &snap])), ["lint", "tests"]);
    let shown = c.ok(&["show", &snap]);
    assert_eq!(shown["checks"].as_array().unwrap().len(), 2, "{shown}");

    // Remote gc keeps them while a snapshot with their tree is kept there.
    let gc = a.ok(&["gc", "--remote", "origin", "--grace", "0"]);
    assert_eq!(gc["remote"]["attestations_removed"], 0, "{gc}");
    let kept = listing(
        &endpoint,
        &format!("eng:cairn-proofs/team/attestations/{tree}"),
    );
    assert_eq!(kept.len(), 3, "{kept:?}");

    // A record altered on the remote is refused naming it and the remote; nothing of the
    // pull is kept.
    let record = format!("eng:cairn-proofs/team/attestations/{tree}/{attestation}");
    let mut bytes = read_key(&endpoint, &record);
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    write_key(&endpoint, &record, &bytes);
    let d = Machine::new(root, "d", Vec::new(), &target);
    d.ok(&["init"]);
    d.add_remote(&target);
    let (code, v) = d.json(&["pull", "work"]);
    assert_eq!(code, 3, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("attestation {attestation}")),
        "{v}"
    );
    assert!(message.contains("origin"), "{v}");
    let (code, v) = d.json(&["--offline", "log", &snap]);
    assert_ne!(code, 0, "the snapshot was not stored: {v}");

    // A signature replaced by one of another attestation is refused naming it.
    let signature_key = on_remote
        .iter()
        .find(|k| k.contains('.'))
        .unwrap()
        .to_owned();
    let lint_id = lint["attestation"].as_str().unwrap();
    let other_sig = {
        let (code, v) = a.json(&[
            "verify",
            &snap,
            "--check",
            "lint",
            "--sign",
            key.as_str(),
            "--",
            "true",
        ]);
        assert_eq!(code, 0, "{v}");
        a.ok(&["push", "work"]);
        let listed = listing(
            &endpoint,
            &format!("eng:cairn-proofs/team/attestations/{tree}"),
        );
        let name = listed
            .iter()
            .find(|k| k.starts_with(&format!("{lint_id}.")))
            .unwrap()
            .to_owned();
        read_key(
            &endpoint,
            &format!("eng:cairn-proofs/team/attestations/{tree}/{name}"),
        )
    };
    write_key(&endpoint, &record, &read_key_fixed(&bytes, last));
    write_key(
        &endpoint,
        &format!("eng:cairn-proofs/team/attestations/{tree}/{signature_key}"),
        &other_sig,
    );
    let e = Machine::new(root, "e", Vec::new(), &target);
    e.ok(&["init"]);
    e.add_remote(&target);
    let (code, v) = e.json(&["pull", "work"]);
    assert_eq!(code, 3, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("signature") && message.contains(&attestation),
        "{v}"
    );

    // Once no ref or pin keeps the snapshot, remote gc removes its attestations.
    a.ok(&["ref", "rm", "work@origin"]);
    a.ok(&["ref", "rm", &format!("{snap}@origin")]);
    let gc = a.ok(&["gc", "--remote", "origin", "--grace", "0"]);
    assert_eq!(gc["remote"]["attestations_removed"], 2, "{gc}");
    let left = listing(
        &endpoint,
        &format!("eng:cairn-proofs/team/attestations/{tree}"),
    );
    assert!(left.is_empty(), "{left:?}");
}

/// `bytes` with the bit flipped at `at` flipped back.
fn read_key_fixed(bytes: &[u8], at: usize) -> Vec<u8> {
    let mut fixed = bytes.to_vec();
    fixed[at] ^= 0x01;
    fixed
}

/// On SeaweedFS, as on a folder: a listing starts after the store's mark (S3 `StartAfter`),
/// and a pack named by a lagging clock is still found by one full listing.
#[test]
fn seaweedfs_listings_start_at_the_mark_and_a_lagging_clock_costs_one_full_listing() {
    let hosts = Hosts::new(2);
    let cluster = Seaweed::start(hosts.server_ip());
    cluster.create_bucket("cairn-index");
    let target = s3_target(&cluster.endpoint(), "cairn-index", true);
    let tmp = tempfile::tempdir().unwrap();
    let root = camino::Utf8Path::from_path(tmp.path()).unwrap();
    let a = Machine::new(root, "a", hosts.prefix(0), &target);
    let b = Machine::new(root, "b", hosts.prefix(1), &target);
    a.add_remote(&target);
    b.add_remote(&target);
    let endpoint = cluster.endpoint();
    let dir = "eng:cairn-index/team/index";
    // Index names sit in folders of their time (layout 5).
    let names = || {
        let out = rclone(&endpoint, ACCESS_KEY, SECRET_KEY)
            .args(["lsf", "-R", "--files-only", dir])
            .output()
            .unwrap();
        let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect();
        names.sort();
        names
    };
    // Renames the indexes not in `before` as if written `minutes` minutes ago.
    let age = |before: &[String], minutes: u64| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        for (i, name) in names().iter().filter(|n| !before.contains(n)).enumerate() {
            let (pack, _) = remote::layout::parse_index_name(name).unwrap();
            let old = remote::layout::index_name(now - (minutes + i as u64) * 60_000, pack);
            let bytes = read_key(&endpoint, &format!("{dir}/{name}"));
            write_key(&endpoint, &format!("{dir}/{old}"), &bytes);
            let out = rclone(&endpoint, ACCESS_KEY, SECRET_KEY)
                .args(["deletefile", &format!("{dir}/{name}")])
                .output()
                .unwrap();
            assert!(out.status.success(), "rclone deletefile {name}");
        }
    };
    let snap = |m: &Machine, name: &str| {
        let p = m.dir.join(name);
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("f"), name).unwrap();
        m.ok(&["onboard", p.as_str()])["snapshot"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let keys = |m: &Machine, args: &[&str]| -> Vec<u64> {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = m
            .command(&all)
            .env("RUST_LOG", "cairn::remote::request=debug")
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{args:?}: {log}");
        log.lines()
            .filter(|l| l.contains("cairn::remote::request") && l.contains("LIST index/"))
            .map(|l| {
                let (_, tail) = l.rsplit_once("keys=").unwrap();
                let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
                digits.parse().unwrap()
            })
            .collect()
    };
    for i in 0..3 {
        let s = snap(&a, &format!("old{i}"));
        a.ok(&["push", &s]);
    }
    age(&[], 60);
    let first = snap(&a, "first");
    a.ok(&["push", &first]);
    assert_eq!(
        keys(&b, &["pull", &first]),
        vec![8],
        "a first listing is whole"
    );
    let second = snap(&a, "second");
    assert_eq!(
        keys(&a, &["push", &second]),
        vec![2],
        "only first's indexes"
    );
    assert_eq!(keys(&b, &["pull", &second]), vec![4]);

    // A push from a machine whose clock lags by two hours.
    let before = names();
    let late = snap(&a, "late");
    a.ok(&["push", &late]);
    age(&before, 120);
    assert_eq!(
        keys(&b, &["pull", &late]),
        vec![4, 12],
        "an incremental listing misses them; one full listing finds them"
    );
    b.ok(&["checkout", &late, "late"]);
    assert_eq!(tree_of(&b.dir.join("late")), tree_of(&a.dir.join("late")));
}
