//! Allowed-signers files, as `ssh-keygen -Y verify -f` reads them (ssh-keygen(1), "ALLOWED
//! SIGNERS"): a line per key, `PRINCIPALS [OPTIONS] KEYTYPE BASE64 [COMMENT]`; `#` starts
//! a comment line. Of the options, `namespaces=` is applied; the others narrow trust in
//! ways cairn does not apply, so a line with one is refused rather than trusted wider than
//! it says.

use camino::{Utf8Path, Utf8PathBuf};
use globset::GlobBuilder;
use ssh_key::{HashAlg, PublicKey};

use crate::{NAMESPACE, Signature};

/// The keys an allowed-signers file trusts.
#[derive(Debug, Clone)]
pub struct AllowedSigners {
    signers: Vec<Signer>,
}

#[derive(Debug, Clone)]
struct Signer {
    principals: String,
    /// The `namespaces=` patterns, if the line restricts them.
    namespaces: Option<Vec<String>>,
    key: PublicKey,
}

/// Why an allowed-signers file cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SignersError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: Utf8PathBuf,
        /// What reading it said.
        source: std::io::Error,
    },
    /// A line is not an allowed signer cairn can apply.
    #[error("{}line {line}: {problem}", .path.as_ref().map(|p| format!("{p}: ")).unwrap_or_default())]
    Line {
        /// The file (none for text given directly).
        path: Option<Utf8PathBuf>,
        /// The line number, from 1.
        line: usize,
        /// What is wrong with it.
        problem: LineProblem,
    },
}

/// What is wrong with a line of an allowed-signers file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LineProblem {
    /// It has principals but no key.
    #[error("no key after the principals")]
    NoKey,
    /// A quote is not closed.
    #[error("a quote is not closed")]
    UnclosedQuote,
    /// The key is not an OpenSSH public key.
    #[error("not a public key: {source}")]
    Key {
        /// What parsing it said.
        source: ssh_key::Error,
    },
    /// An option cairn does not apply (it would trust the key wider than the line says).
    #[error("option {0:?} is not supported by cairn (only namespaces= is)")]
    Unsupported(String),
    /// A `namespaces=` pattern that is not a pattern.
    #[error("namespaces pattern {pattern:?}: {source}")]
    Pattern {
        /// The pattern.
        pattern: String,
        /// What the pattern parser said.
        source: globset::Error,
    },
}

/// A signature the file trusts: who signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trusted {
    /// The principals of the line that lists the key (as written there).
    pub principals: String,
    /// The key's fingerprint (`SHA256:...`).
    pub fingerprint: String,
}

/// Why a signature does not count.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Untrusted {
    /// It was made for another purpose.
    #[error("signed in namespace {found:?}, not {NAMESPACE:?}")]
    Namespace {
        /// Its namespace.
        found: String,
    },
    /// No line lists its key (for this namespace).
    #[error("signed by {fingerprint}, which the allowed signers do not list")]
    UnknownKey {
        /// The key's fingerprint.
        fingerprint: String,
    },
    /// The key is listed, but the signature is not of these bytes (they were altered, or
    /// it signs something else).
    #[error("the signature by {fingerprint} does not match the signed bytes")]
    Mismatch {
        /// The key's fingerprint.
        fingerprint: String,
        /// What verifying said.
        source: ssh_key::Error,
    },
}

impl AllowedSigners {
    /// The allowed signers in the file `path`.
    pub fn read(path: &Utf8Path) -> Result<AllowedSigners, SignersError> {
        let text = std::fs::read_to_string(path).map_err(|source| SignersError::Read {
            path: path.to_owned(),
            source,
        })?;
        AllowedSigners::parse_from(&text, Some(path))
    }

    /// The allowed signers in `text` (a file's content).
    pub fn parse(text: &str) -> Result<AllowedSigners, SignersError> {
        AllowedSigners::parse_from(text, None)
    }

    fn parse_from(text: &str, path: Option<&Utf8Path>) -> Result<AllowedSigners, SignersError> {
        let mut signers = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let signer = parse_line(line).map_err(|problem| SignersError::Line {
                path: path.map(Utf8Path::to_owned),
                line: i + 1,
                problem,
            })?;
            signers.push(signer);
        }
        Ok(AllowedSigners { signers })
    }

    /// Whether `signature` is a signature of `message` in [`NAMESPACE`] by a key the file
    /// lists for that namespace, and whose.
    pub fn check(&self, message: &[u8], signature: &Signature) -> Result<Trusted, Untrusted> {
        let sig = signature.sshsig();
        if sig.namespace() != NAMESPACE {
            return Err(Untrusted::Namespace {
                found: sig.namespace().to_owned(),
            });
        }
        let fingerprint = sig.public_key().fingerprint(HashAlg::Sha256).to_string();
        let signer = self
            .signers
            .iter()
            .find(|s| s.key.key_data() == sig.public_key() && s.allows(NAMESPACE))
            .ok_or_else(|| Untrusted::UnknownKey {
                fingerprint: fingerprint.clone(),
            })?;
        match signer.key.verify(NAMESPACE, message, sig) {
            Ok(()) => Ok(Trusted {
                principals: signer.principals.clone(),
                fingerprint,
            }),
            Err(source) => Err(Untrusted::Mismatch {
                fingerprint,
                source,
            }),
        }
    }
}

impl Signer {
    /// Whether the line lets its key sign in `namespace`: with no `namespaces=` any;
    /// else as an ssh pattern list (a match of a `!` pattern forbids it).
    fn allows(&self, namespace: &str) -> bool {
        let Some(patterns) = &self.namespaces else {
            return true;
        };
        let mut allowed = false;
        for pattern in patterns {
            let (negated, pattern) = match pattern.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, pattern.as_str()),
            };
            // Checked when the line was read.
            let Ok(glob) = GlobBuilder::new(pattern).literal_separator(false).build() else {
                return false;
            };
            if glob.compile_matcher().is_match(namespace) {
                if negated {
                    return false;
                }
                allowed = true;
            }
        }
        allowed
    }
}

/// `text` split at `separator`s outside double quotes; quotes stay in the parts.
fn split_unquoted(text: &str, separator: impl Fn(char) -> bool) -> Result<Vec<&str>, LineProblem> {
    let mut out = Vec::new();
    let mut quoted = false;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if c == '"' {
            quoted = !quoted;
        } else if separator(c) && !quoted {
            out.push(&text[start..i]);
            start = i + c.len_utf8();
        }
    }
    if quoted {
        return Err(LineProblem::UnclosedQuote);
    }
    out.push(&text[start..]);
    out.retain(|part| !part.is_empty());
    Ok(out)
}

fn unquote(text: &str) -> &str {
    text.strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(text)
}

/// Whether `field` starts a key (its type) rather than being options.
fn is_key_type(field: &str) -> bool {
    ["ssh-", "ecdsa-", "sk-"]
        .iter()
        .any(|prefix| field.starts_with(prefix))
}

fn parse_line(line: &str) -> Result<Signer, LineProblem> {
    let fields = split_unquoted(line, char::is_whitespace)?;
    let (principals, rest) = fields.split_first().ok_or(LineProblem::NoKey)?;
    let (options, key) = match rest.first() {
        Some(first) if !is_key_type(first) => (Some(*first), &rest[1..]),
        _ => (None, rest),
    };
    if key.is_empty() {
        return Err(LineProblem::NoKey);
    }
    let mut namespaces: Option<Vec<String>> = None;
    for option in options.map_or(Ok(Vec::new()), |o| split_unquoted(o, |c| c == ','))? {
        match option.split_once('=') {
            Some((name, value)) if name.eq_ignore_ascii_case("namespaces") => {
                // An empty list allows no namespace.
                namespaces.get_or_insert_with(Vec::new);
                for pattern in unquote(value).split(',').filter(|p| !p.is_empty()) {
                    let bare = pattern.strip_prefix('!').unwrap_or(pattern);
                    if let Err(source) = GlobBuilder::new(bare).build() {
                        return Err(LineProblem::Pattern {
                            pattern: pattern.to_owned(),
                            source,
                        });
                    }
                    namespaces
                        .get_or_insert_with(Vec::new)
                        .push(pattern.to_owned());
                }
            }
            _ => return Err(LineProblem::Unsupported(option.to_owned())),
        }
    }
    let key =
        PublicKey::from_openssh(&key.join(" ")).map_err(|source| LineProblem::Key { source })?;
    Ok(Signer {
        principals: unquote(principals).to_owned(),
        namespaces,
        key,
    })
}
