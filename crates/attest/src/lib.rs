//! `attest`: signatures of attestations, so that a merge on one machine can trust only the
//! checks a verifier it knows ran.
//!
//! A signature is OpenSSH's SSHSIG format in the namespace [`NAMESPACE`] over an
//! attestation's canonical bytes, made with an SSH private key ([`SigningKey`]), so
//! `ssh-keygen -Y verify -n cairn-attestation` accepts it. Whose signatures count is an
//! allowed-signers file as `ssh-keygen -Y verify` reads it ([`AllowedSigners`]); an option
//! there that would narrow trust in a way cairn does not apply (`cert-authority`,
//! `valid-after`, `valid-before`) is refused, never ignored.
//!
//! It owns the signature format and the reading of keys and allowed-signers files; the
//! cryptography is the `ssh-key` crate's. It knows nothing of stores, snapshots, checks or
//! the command line: the caller decides what bytes are signed and what a signature proves.
//!
//! ```no_run
//! use camino::Utf8Path;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // The verifier signs what it recorded...
//! let key = attest::SigningKey::read(Utf8Path::new("/etc/cairn/verifier_ed25519"))?;
//! let signature = key.sign(b"an attestation's canonical bytes")?;
//! let armored = signature.to_pem();
//! // ...and a merge elsewhere trusts only the keys its allowed-signers file lists.
//! let signers = attest::AllowedSigners::read(Utf8Path::new("allowed_signers"))?;
//! let signature = attest::Signature::from_pem(&armored)?;
//! let trusted = signers.check(b"an attestation's canonical bytes", &signature)?;
//! println!("signed by {} ({})", trusted.principals, trusted.fingerprint);
//! # Ok(())
//! # }
//! ```
#![deny(unsafe_code, clippy::unwrap_used)]

mod signers;

use camino::{Utf8Path, Utf8PathBuf};
use ssh_key::{HashAlg, LineEnding, PrivateKey, SshSig};

pub use signers::{AllowedSigners, LineProblem, SignersError, Trusted, Untrusted};

/// The SSHSIG namespace of cairn's attestation signatures (`ssh-keygen -Y verify -n`).
pub const NAMESPACE: &str = "cairn-attestation";

/// An SSH private key to sign with (Ed25519 or ECDSA, unencrypted).
pub struct SigningKey {
    key: PrivateKey,
    /// Where it was read from, for errors (none for a key given as text).
    path: Option<Utf8PathBuf>,
}

/// Why a key cannot sign.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The key file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The key file.
        path: Utf8PathBuf,
        /// What reading it said.
        source: std::io::Error,
    },
    /// The file is not an OpenSSH private key.
    #[error("{}: not an OpenSSH private key: {source}", shown(.path))]
    Parse {
        /// The key file.
        path: Option<Utf8PathBuf>,
        /// What parsing it said.
        source: ssh_key::Error,
    },
    /// The key is protected by a passphrase, which cairn does not ask for.
    #[error(
        "{}: the key is protected by a passphrase; sign with a key without one (kept where only the verifier can read it)",
        shown(.path)
    )]
    Encrypted {
        /// The key file.
        path: Option<Utf8PathBuf>,
    },
    /// An RSA key: signatures by RSA keys are checked, but `ssh-key` 0.6 cannot make them
    /// (it rebuilds the private key wrongly), so a verifier signs with an Ed25519 or ECDSA
    /// key.
    #[error(
        "{}: RSA keys cannot sign attestations; make an Ed25519 key (ssh-keygen -t ed25519) for the verifier",
        shown(.path)
    )]
    Rsa {
        /// The key file.
        path: Option<Utf8PathBuf>,
    },
    /// Signing failed.
    #[error("{}: cannot sign: {source}", shown(.path))]
    Sign {
        /// The key file.
        path: Option<Utf8PathBuf>,
        /// What signing said.
        source: ssh_key::Error,
    },
}

fn shown(path: &Option<Utf8PathBuf>) -> &str {
    path.as_deref().map_or("the key", Utf8Path::as_str)
}

impl SigningKey {
    /// The private key in the file `path` (OpenSSH format, as `ssh-keygen` writes it).
    pub fn read(path: &Utf8Path) -> Result<SigningKey, KeyError> {
        let text = std::fs::read(path).map_err(|source| KeyError::Read {
            path: path.to_owned(),
            source,
        })?;
        SigningKey::parse(&text, Some(path.to_owned()))
    }

    /// The private key `pem` (OpenSSH format).
    pub fn from_openssh(pem: &str) -> Result<SigningKey, KeyError> {
        SigningKey::parse(pem.as_bytes(), None)
    }

    fn parse(pem: &[u8], path: Option<Utf8PathBuf>) -> Result<SigningKey, KeyError> {
        let key = match PrivateKey::from_openssh(pem) {
            Ok(key) => key,
            Err(source) => return Err(KeyError::Parse { path, source }),
        };
        if key.is_encrypted() {
            return Err(KeyError::Encrypted { path });
        }
        if matches!(key.algorithm(), ssh_key::Algorithm::Rsa { .. }) {
            return Err(KeyError::Rsa { path });
        }
        Ok(SigningKey { key, path })
    }

    /// Signs `message` in [`NAMESPACE`] (SHA-512, as `ssh-keygen -Y sign` does).
    pub fn sign(&self, message: &[u8]) -> Result<Signature, KeyError> {
        match self.key.sign(NAMESPACE, HashAlg::Sha512, message) {
            Ok(sig) => Ok(Signature(sig)),
            Err(source) => Err(KeyError::Sign {
                path: self.path.clone(),
                source,
            }),
        }
    }

    /// The public key's fingerprint (`SHA256:...`, as `ssh-keygen -l` prints it).
    pub fn fingerprint(&self) -> String {
        self.key.fingerprint(HashAlg::Sha256).to_string()
    }
}

/// An SSHSIG signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature(SshSig);

/// A signature that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("not an SSH signature: {source}")]
pub struct SignatureError {
    source: ssh_key::Error,
}

impl Signature {
    /// The armored form (`-----BEGIN SSH SIGNATURE-----`, as `ssh-keygen -Y sign` writes
    /// it).
    pub fn to_pem(&self) -> String {
        self.0
            .to_pem(LineEnding::LF)
            .expect("an SSHSIG read or made here encodes (its fields were checked)")
    }

    /// A signature in its armored form.
    pub fn from_pem(pem: &str) -> Result<Signature, SignatureError> {
        SshSig::from_pem(pem)
            .map(Signature)
            .map_err(|source| SignatureError { source })
    }

    /// The signing key's fingerprint (`SHA256:...`).
    pub fn fingerprint(&self) -> String {
        self.0.public_key().fingerprint(HashAlg::Sha256).to_string()
    }

    /// Whether it is a signature of `message` in [`NAMESPACE`] by the key it carries: that
    /// the bytes are what was signed, not who signed them (an [`AllowedSigners`] file says
    /// whose signatures count).
    pub fn matches(&self, message: &[u8]) -> Result<(), Untrusted> {
        let fingerprint = self.fingerprint();
        if self.0.namespace() != NAMESPACE {
            return Err(Untrusted::Namespace {
                found: self.0.namespace().to_owned(),
            });
        }
        let key = ssh_key::PublicKey::from(self.0.public_key().clone());
        key.verify(NAMESPACE, message, &self.0)
            .map_err(|source| Untrusted::Mismatch {
                fingerprint,
                source,
            })
    }

    /// The namespace it was made in.
    pub fn namespace(&self) -> &str {
        self.0.namespace()
    }

    pub(crate) fn sshsig(&self) -> &SshSig {
        &self.0
    }
}
