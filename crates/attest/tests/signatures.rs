//! Signatures against the real `ssh-keygen`: what cairn signs, `ssh-keygen -Y verify`
//! accepts, and what `ssh-keygen -Y sign` signs, cairn accepts, for each key type; and what
//! must not count does not.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use attest::{AllowedSigners, KeyError, NAMESPACE, Signature, SignersError, SigningKey, Untrusted};
use camino::{Utf8Path, Utf8PathBuf};

const MESSAGE: &[u8] = b"attestation bytes\0with a NUL and \xff";

/// A key `ssh-keygen` makes, with its public line.
fn keygen(dir: &Utf8Path, name: &str, kind: &[&str], passphrase: &str) -> (Utf8PathBuf, String) {
    let path = dir.join(name);
    let ok = Command::new("ssh-keygen")
        .args([
            "-q",
            "-C",
            &format!("{name}@example.com"),
            "-N",
            passphrase,
            "-f",
        ])
        .arg(&path)
        .args(kind)
        .status()
        .expect("ssh-keygen runs")
        .success();
    assert!(ok, "ssh-keygen {kind:?}");
    let public = std::fs::read_to_string(format!("{path}.pub")).expect("public key");
    (path, public.trim().to_owned())
}

/// Whether `ssh-keygen -Y verify` accepts `signature` of `message` by `principal`.
fn ssh_keygen_verifies(
    dir: &Utf8Path,
    allowed: &str,
    principal: &str,
    message: &[u8],
    signature: &Signature,
) -> bool {
    let allowed_path = dir.join("allowed_for_ssh_keygen");
    std::fs::write(&allowed_path, allowed).expect("write allowed signers");
    let sig_path = dir.join("message.sig");
    std::fs::write(&sig_path, signature.to_pem()).expect("write signature");
    let mut child = Command::new("ssh-keygen")
        .args(["-Y", "verify", "-n", NAMESPACE, "-I", principal, "-f"])
        .arg(&allowed_path)
        .arg("-s")
        .arg(&sig_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("ssh-keygen runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(message)
        .expect("message written");
    child.wait().expect("ssh-keygen ends").success()
}

/// `ssh-keygen -Y sign` of `message` in `namespace` with the key at `key`.
fn ssh_keygen_signs(dir: &Utf8Path, key: &Utf8Path, namespace: &str, message: &[u8]) -> Signature {
    let message_path = dir.join("signed-by-ssh-keygen");
    std::fs::write(&message_path, message).expect("write message");
    let ok = Command::new("ssh-keygen")
        .args(["-q", "-Y", "sign", "-n", namespace, "-f"])
        .arg(key)
        .arg(&message_path)
        .stderr(Stdio::null())
        .status()
        .expect("ssh-keygen runs")
        .success();
    assert!(ok, "ssh-keygen -Y sign");
    let pem = std::fs::read_to_string(format!("{message_path}.sig")).expect("signature");
    std::fs::remove_file(format!("{message_path}.sig")).expect("remove signature");
    Signature::from_pem(&pem).expect("an SSH signature")
}

fn tempdir() -> (tempfile::TempDir, Utf8PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = Utf8Path::from_path(dir.path()).expect("UTF-8").to_owned();
    (dir, path)
}

#[test]
fn every_key_type_signs_what_ssh_keygen_verifies_and_verifies_what_it_signs() {
    let (_guard, dir) = tempdir();
    for (name, kind) in [
        ("ed25519", &["-t", "ed25519"][..]),
        ("ecdsa", &["-t", "ecdsa", "-b", "256"][..]),
        ("rsa", &["-t", "rsa", "-b", "3072"][..]),
    ] {
        let (key_path, public) = keygen(&dir, name, kind, "");
        let principal = format!("{name}@example.com");
        let allowed = format!("{principal} {public}\n");
        let signers = AllowedSigners::parse(&allowed).expect("allowed signers");

        // What ssh-keygen signs, cairn accepts; in another namespace, not.
        let theirs = ssh_keygen_signs(&dir, &key_path, NAMESPACE, MESSAGE);
        assert_eq!(
            signers.check(MESSAGE, &theirs).expect("trusted").principals,
            principal
        );
        let mut altered = MESSAGE.to_vec();
        altered[0] ^= 1;
        assert!(
            matches!(
                signers.check(&altered, &theirs),
                Err(Untrusted::Mismatch { .. })
            ),
            "{name}: altered bytes trusted"
        );
        let git = ssh_keygen_signs(&dir, &key_path, "git", MESSAGE);
        assert!(
            matches!(
                signers.check(MESSAGE, &git),
                Err(Untrusted::Namespace { found }) if found == "git"
            ),
            "{name}: a git signature counted"
        );

        if name == "rsa" {
            let e = SigningKey::read(&key_path)
                .err()
                .expect("RSA keys do not sign");
            assert!(
                matches!(e, KeyError::Rsa { .. }) && e.to_string().starts_with(key_path.as_str()),
                "{e}"
            );
            continue;
        }
        let key = SigningKey::read(&key_path).expect("a signing key");
        let signature = key.sign(MESSAGE).expect("signs");
        assert_eq!(signature.namespace(), NAMESPACE);
        assert_eq!(signature.fingerprint(), key.fingerprint());
        // Through its armored form, as it is stored and sent.
        let signature = Signature::from_pem(&signature.to_pem()).expect("reads back");
        assert!(
            ssh_keygen_verifies(&dir, &allowed, &principal, MESSAGE, &signature),
            "{name}: ssh-keygen -Y verify refused cairn's signature"
        );
        let trusted = signers.check(MESSAGE, &signature).expect("trusted");
        assert_eq!(trusted.principals, principal);
        assert_eq!(trusted.fingerprint, key.fingerprint());
        // Altered bytes count for neither.
        assert!(
            !ssh_keygen_verifies(&dir, &allowed, &principal, &altered, &signature),
            "{name}: ssh-keygen accepted altered bytes"
        );
        assert!(
            matches!(
                signers.check(&altered, &signature),
                Err(Untrusted::Mismatch { .. })
            ),
            "{name}: altered bytes trusted"
        );
    }
}

#[test]
fn a_key_the_file_does_not_list_for_the_namespace_does_not_count() {
    let (_guard, dir) = tempdir();
    let (listed_path, listed) = keygen(&dir, "listed", &["-t", "ed25519"], "");
    let (other_path, _) = keygen(&dir, "other", &["-t", "ed25519"], "");
    let other = SigningKey::read(&other_path).expect("a key");
    let signature = other.sign(MESSAGE).expect("signs");
    let signers =
        AllowedSigners::parse(&format!("# CI\n\nci@example.com {listed}\n")).expect("read");
    match signers.check(MESSAGE, &signature) {
        Err(Untrusted::UnknownKey { fingerprint }) => assert_eq!(fingerprint, other.fingerprint()),
        other => panic!("an unlisted key: {other:?}"),
    }

    let mine = SigningKey::read(&listed_path)
        .expect("a key")
        .sign(MESSAGE)
        .expect("signs");
    for (options, counts) in [
        (r#"namespaces="git""#, false),
        (r#"namespaces="git,cairn-attestation""#, true),
        (r#"namespaces="cairn-*""#, true),
        (r#"namespaces="*,!cairn-attestation""#, false),
        (r#"namespaces="""#, false),
    ] {
        let signers = AllowedSigners::parse(&format!("\"ci@example.com,bot\" {options} {listed}"))
            .expect("read");
        assert_eq!(
            signers.check(MESSAGE, &mine).is_ok(),
            counts,
            "{options}: {:?}",
            signers.check(MESSAGE, &mine)
        );
        if counts {
            assert_eq!(
                signers.check(MESSAGE, &mine).expect("trusted").principals,
                "ci@example.com,bot"
            );
        }
    }
}

/// An option that narrows trust in a way cairn does not apply refuses the file, naming the
/// line, rather than trusting the key wider than the line says.
#[test]
fn options_cairn_does_not_apply_and_bad_lines_are_refused_naming_the_line() {
    let (_guard, dir) = tempdir();
    let (_, public) = keygen(&dir, "k", &["-t", "ed25519"], "");
    let path = dir.join("allowed");
    for (text, said) in [
        (
            format!("a@b {public}\nx@y valid-before=20200101 {public}\n"),
            "line 2",
        ),
        (format!("x@y cert-authority {public}\n"), "cert-authority"),
        ("x@y\n".to_owned(), "no key"),
        (
            "x@y ssh-ed25519 AAAAnotbase64\n".to_owned(),
            "not a public key",
        ),
        (format!("\"x@y {public}\n"), "quote"),
    ] {
        std::fs::write(&path, &text).expect("write");
        match AllowedSigners::read(&path) {
            Err(e @ SignersError::Line { .. }) => {
                let message = e.to_string();
                assert!(message.starts_with(&format!("{path}: line ")), "{message}");
                assert!(message.contains(said), "{text}: {message}");
            }
            other => panic!("{text}: {other:?}"),
        }
    }
    let missing = dir.join("missing");
    let e = AllowedSigners::read(&missing).expect_err("no file");
    assert!(e.to_string().starts_with(missing.as_str()), "{e}");
}

#[test]
fn a_key_with_a_passphrase_or_no_key_at_all_is_refused_naming_the_file() {
    let (_guard, dir) = tempdir();
    let (locked, _) = keygen(&dir, "locked", &["-t", "ed25519"], "secret passphrase");
    match SigningKey::read(&locked) {
        Err(e @ KeyError::Encrypted { .. }) => {
            assert!(e.to_string().starts_with(locked.as_str()), "{e}")
        }
        other => panic!("an encrypted key: {:?}", other.err()),
    }
    let public = dir.join("locked.pub");
    let e = SigningKey::read(&public)
        .err()
        .expect("a public key cannot sign");
    assert!(
        matches!(e, KeyError::Parse { .. }) && e.to_string().starts_with(public.as_str()),
        "{e}"
    );
    let e = SigningKey::read(&dir.join("none")).err().expect("no file");
    assert!(matches!(e, KeyError::Read { .. }), "{e}");
    assert!(Path::new(dir.as_str()).exists());
}
