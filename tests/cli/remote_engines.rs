//! The remote scenarios of `remote_commands.rs` on real S3 engines, machines in their own
//! network namespaces: a SeaweedFS cluster, and `rclone serve s3` (a second S3
//! implementation, which accepts conditional headers without enforcing them); then faults
//! on SeaweedFS: a gateway killed in a push, a volume server killed in a pull, a flipped
//! byte on the engine's disk, wrong credentials, an identity that may not write.

use std::time::Duration;

use crate::engines::{
    ACCESS_KEY, Hosts, READER_KEY, READER_SECRET, RcloneS3, SECRET_KEY, Seaweed, rclone,
};
use crate::remote_commands::{Machine, RemoteTarget, race, tree_of, two_machines};

fn s3_target(endpoint: &str, bucket: &str, conditional: bool) -> RemoteTarget {
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
