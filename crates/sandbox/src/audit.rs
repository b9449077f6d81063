//! What Landlock denied a sandboxed command, read from the kernel's audit records.
//!
//! With the audit subsystem on (`audit_enabled` 1) and the sandbox restricted with
//! `LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON` (see [`crate::enforce`]), every denial of the
//! command and its children is an `AUDIT_LANDLOCK_ACCESS` record naming the domain, the
//! access (`blockers=fs.write_file`) and the object (`path="/etc/x"`; for a file the command
//! tried to create, its directory). The first denial of a domain also brings an
//! `AUDIT_LANDLOCK_DOMAIN` record with the pid that created the domain, which is the pid of
//! the sandbox helper `cairn run` spawned (it execs the command in place).
//!
//! [`DenialLog`] joins the audit netlink multicast group (`CAP_AUDIT_READ`) before the
//! command starts; afterwards it sends a user record of its own (`CAP_AUDIT_WRITE`) and
//! reads up to it, so every record the command caused, queued before, has been read.

use std::os::fd::OwnedFd;
use std::time::Duration;

use cairn_engine::Denial;
use rustix::net::netlink::{self, SocketAddrNetlink};
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketType};

const AUDIT_GET: u16 = 1000;
const AUDIT_SET: u16 = 1001;
const AUDIT_USER: u16 = 1005;
const AUDIT_LANDLOCK_ACCESS: u16 = 1423;
const AUDIT_LANDLOCK_DOMAIN: u16 = 1424;
const AUDIT_STATUS_ENABLED: u32 = 1;
const AUDIT_NLGRP_READLOG: u32 = 1;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const HEADER: usize = 16;
/// How long to wait for the kernel to pass on the records of a finished command.
const ARRIVAL: Duration = Duration::from_secs(10);

/// Why the denials of a run cannot be told.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuditUnavailable {
    /// The audit subsystem is off, so Landlock logs nothing.
    #[error(
        "the kernel's audit subsystem is off (audit_enabled=0), so Landlock logs no denial; `auditctl -e 1` turns it on"
    )]
    Off,
    /// A netlink call failed (no right to read or write audit records, or no audit).
    #[error("cannot read the kernel's audit records: {what}: {source}")]
    Netlink {
        /// What was tried.
        what: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// The kernel answered what cairn did not expect.
    #[error("cannot read the kernel's audit records: {0}")]
    Protocol(String),
    /// Landlock did not log the command's denials (a kernel before Landlock ABI 7).
    #[error(
        "this kernel's Landlock does not log the denials of an executed program (that needs Landlock ABI 7, Linux 6.15)"
    )]
    NotLogged,
    /// Records did not all reach cairn.
    #[error("some of the run's audit records were lost: {0}")]
    Lost(String),
}

fn netlink_error(what: &'static str) -> impl Fn(rustix::io::Errno) -> AuditUnavailable {
    move |e| AuditUnavailable::Netlink {
        what,
        source: e.into(),
    }
}

fn socket(groups: u32) -> Result<OwnedFd, AuditUnavailable> {
    let fd = rustix::net::socket(
        AddressFamily::NETLINK,
        SocketType::RAW,
        Some(netlink::AUDIT),
    )
    .map_err(netlink_error("audit netlink socket"))?;
    rustix::net::bind(&fd, &SocketAddrNetlink::new(0, groups)).map_err(netlink_error(
        if groups == 0 {
            "binding the audit socket"
        } else {
            "joining the audit log group (needs CAP_AUDIT_READ)"
        },
    ))?;
    rustix::net::sockopt::set_socket_timeout(
        &fd,
        rustix::net::sockopt::Timeout::Recv,
        Some(ARRIVAL),
    )
    .map_err(netlink_error("audit socket timeout"))?;
    Ok(fd)
}

fn message(kind: u16, flags: u16, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(HEADER + payload.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(&len.to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(&flags.to_ne_bytes());
    out.extend_from_slice(&1u32.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.extend_from_slice(payload);
    out
}

/// One netlink message received: its type and payload.
fn receive(fd: &OwnedFd, buf: &mut [u8]) -> Result<(u16, Vec<u8>), AuditUnavailable> {
    let (n, _) = rustix::net::recv(fd, &mut *buf, RecvFlags::empty()).map_err(|e| {
        if e == rustix::io::Errno::NOBUFS {
            AuditUnavailable::Lost("more records arrived than the socket could hold".into())
        } else if e == rustix::io::Errno::AGAIN {
            AuditUnavailable::Lost(format!("they did not arrive within {}s", ARRIVAL.as_secs()))
        } else {
            AuditUnavailable::Netlink {
                what: "receiving audit records",
                source: e.into(),
            }
        }
    })?;
    let data = buf.get(..n).unwrap_or_default();
    if data.len() < HEADER {
        return Err(AuditUnavailable::Protocol(format!(
            "a netlink message of {n} bytes"
        )));
    }
    let len = u32::from_ne_bytes([data[0], data[1], data[2], data[3]]) as usize;
    let kind = u16::from_ne_bytes([data[4], data[5]]);
    let payload = data
        .get(HEADER..len.clamp(HEADER, data.len()))
        .unwrap_or_default();
    Ok((kind, payload.to_vec()))
}

/// Sends a request and waits for the kernel's reply of type `reply`, or else for its
/// acknowledgement.
fn request(
    fd: &OwnedFd,
    kind: u16,
    payload: &[u8],
    reply: Option<u16>,
    what: &'static str,
) -> Result<Option<Vec<u8>>, AuditUnavailable> {
    let flags = if reply.is_some() {
        NLM_F_REQUEST
    } else {
        NLM_F_REQUEST | NLM_F_ACK
    };
    rustix::net::send(fd, &message(kind, flags, payload), SendFlags::empty())
        .map_err(netlink_error("sending an audit request"))?;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let (k, body) = receive(fd, &mut buf)?;
        if k == NLMSG_ERROR {
            let code = body
                .get(..4)
                .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                .unwrap_or(0);
            if code != 0 {
                return Err(AuditUnavailable::Netlink {
                    what,
                    source: std::io::Error::from_raw_os_error(-code),
                });
            }
            if reply.is_none() {
                return Ok(None);
            }
        } else if Some(k) == reply {
            return Ok(Some(body));
        }
    }
}

/// Whether the kernel's audit subsystem is on. (Its lost-record count is no measure of
/// what reached cairn: without auditd, a kernel booted with `audit=1` counts every record
/// its full hold queue drops, though each went out to the log group first.)
fn status(fd: &OwnedFd) -> Result<bool, AuditUnavailable> {
    let body = request(
        fd,
        AUDIT_GET,
        &[],
        Some(AUDIT_GET),
        "reading the audit status (needs CAP_AUDIT_CONTROL)",
    )?
    .unwrap_or_default();
    let word = |i: usize| {
        body.get(i * 4..i * 4 + 4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    };
    match word(1) {
        Some(enabled) => Ok(enabled != 0),
        None => Err(AuditUnavailable::Protocol(format!(
            "an audit status of {} bytes",
            body.len()
        ))),
    }
}

/// Whether the kernel's audit subsystem is on.
pub fn audit_enabled() -> Result<bool, AuditUnavailable> {
    status(&socket(0)?)
}

/// Turns the kernel's audit subsystem on or off (`auditctl -e`; needs CAP_AUDIT_CONTROL).
pub fn set_audit_enabled(on: bool) -> Result<(), AuditUnavailable> {
    // struct audit_status: mask, enabled, then fields this call leaves alone.
    let mut payload = [0u8; 4 * 11];
    payload[..4].copy_from_slice(&AUDIT_STATUS_ENABLED.to_ne_bytes());
    payload[4..8].copy_from_slice(&u32::from(on).to_ne_bytes());
    request(
        &socket(0)?,
        AUDIT_SET,
        &payload,
        None,
        "setting the audit status (needs CAP_AUDIT_CONTROL)",
    )
    .map(drop)
}

/// Listens to the kernel's audit records from before a sandboxed command starts.
pub struct DenialLog {
    listen: OwnedFd,
    control: OwnedFd,
}

impl DenialLog {
    /// Starts listening, or says why the denials cannot be read.
    pub fn open() -> Result<DenialLog, AuditUnavailable> {
        let control = socket(0)?;
        if !status(&control)? {
            return Err(AuditUnavailable::Off);
        }
        let listen = socket(AUDIT_NLGRP_READLOG)?;
        // Many denials at once must not overflow the socket (root may go past rmem_max).
        let _ = rustix::net::sockopt::set_socket_recv_buffer_size_force(&listen, 8 << 20);
        Ok(DenialLog { listen, control })
    }

    /// What Landlock denied the domain that process `pid` created, and its children,
    /// until now; `logged` is whether the sandbox asked Landlock to log them.
    pub fn denials(self, pid: u32, logged: bool) -> Result<Vec<Denial>, AuditUnavailable> {
        if !logged {
            return Err(AuditUnavailable::NotLogged);
        }
        let marker = format!("cairn run: end of pid {pid}, marker {}", std::process::id());
        let mut text = marker.clone().into_bytes();
        text.push(0);
        request(
            &self.control,
            AUDIT_USER,
            &text,
            None,
            "writing an audit record (needs CAP_AUDIT_WRITE)",
        )?;
        // Turned off during the run: the marker is dropped, so do not wait for it.
        if !status(&self.control)? {
            return Err(AuditUnavailable::Off);
        }
        let mut buf = vec![0u8; 16 * 1024];
        let mut domains = Vec::new();
        let mut accesses = Vec::new();
        // Other records keep coming on a busy system: the marker must come within ARRIVAL
        // in all, not between two records.
        let deadline = std::time::Instant::now() + ARRIVAL;
        loop {
            if std::time::Instant::now() > deadline {
                return Err(AuditUnavailable::Lost(format!(
                    "cairn's marker record did not arrive within {}s",
                    ARRIVAL.as_secs()
                )));
            }
            let (kind, body) = receive(&self.listen, &mut buf)?;
            let body = String::from_utf8_lossy(&body).into_owned();
            match kind {
                AUDIT_USER if body.contains(&marker) => break,
                AUDIT_LANDLOCK_DOMAIN => {
                    let fields = fields(&body);
                    if field(&fields, "pid") == Some(pid.to_string().as_str()) {
                        domains.extend(field(&fields, "domain").map(str::to_owned));
                    }
                }
                AUDIT_LANDLOCK_ACCESS => accesses.push(body),
                _ => {}
            }
        }
        let mut out: Vec<Denial> = accesses
            .iter()
            .filter_map(|body| {
                let fields = fields(body);
                let domain = field(&fields, "domain")?;
                if !domains.iter().any(|d| d == domain) {
                    return None;
                }
                let path = match (field(&fields, "path"), field(&fields, "daddr")) {
                    (Some(p), _) => p.to_owned(),
                    (None, Some(addr)) => {
                        let port = field(&fields, "dest").or(field(&fields, "src"));
                        format!("{addr}:{}", port.unwrap_or("?"))
                    }
                    (None, None) => field(&fields, "src")
                        .map(|p| format!("port {p}"))
                        .unwrap_or_default(),
                };
                let blockers = field(&fields, "blockers")?;
                Some(
                    blockers
                        .split(',')
                        .map(|access| Denial {
                            path: path.clone(),
                            access: access.to_owned(),
                        })
                        .collect::<Vec<_>>(),
                )
            })
            .flatten()
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }
}

fn field<'a>(fields: &'a [(String, String)], key: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// The `key=value` fields of an audit record's text: a value in quotes as it is, an
/// unquoted one hex-decoded where the kernel encoded it (it does for strings with spaces,
/// quotes or control characters).
fn fields(body: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = body;
    // Past the `audit(TIME:SERIAL): ` stamp.
    if let Some(i) = rest.find("): ") {
        rest = &rest[i + 3..];
    }
    while let Some(eq) = rest.find('=') {
        let key = rest[..eq].trim().to_owned();
        let after = &rest[eq + 1..];
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            match quoted.find('"') {
                Some(end) => (quoted[..end].to_owned(), &quoted[end + 1..]),
                None => (quoted.to_owned(), ""),
            }
        } else {
            let end = after.find(' ').unwrap_or(after.len());
            let raw = &after[..end];
            let decoded = ENCODED
                .contains(&key.as_str())
                .then(|| unhex(raw))
                .flatten();
            (decoded.unwrap_or_else(|| raw.to_owned()), &after[end..])
        };
        out.push((key, value));
        rest = next;
    }
    out
}

/// The keys whose values the kernel may hex-encode (`audit_log_untrustedstring`).
const ENCODED: &[&str] = &["path", "exe", "comm", "name"];

/// A value the kernel hex-encoded, if `raw` is one.
fn unhex(raw: &str) -> Option<String> {
    if raw.len() < 2 || !raw.len().is_multiple_of(2) || !raw.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..raw.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&raw[i..i + 2], 16).ok())
        .collect();
    let bytes = bytes?;
    // An encoded value always held a byte the kernel would not print as is.
    bytes
        .iter()
        .any(|b| *b <= b' ' || *b == b'"' || *b >= 0x7f)
        .then(|| String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_fields_are_read_quoted_plain_and_hex_encoded() {
        let f = fields(
            r#"audit(1729738800.268:30): domain=1a6fdc66f blockers=fs.make_reg path="/tmp/x" dev="vda" ino=9"#,
        );
        assert_eq!(field(&f, "domain"), Some("1a6fdc66f"));
        assert_eq!(field(&f, "blockers"), Some("fs.make_reg"));
        assert_eq!(field(&f, "path"), Some("/tmp/x"));
        assert_eq!(field(&f, "ino"), Some("9"));
        // "/tmp/a b" is hex-encoded by the kernel because of its space; ids never are.
        let f = fields(
            "audit(1.2:3): domain=1a6fdc66 blockers=fs.write_file path=2F746D702F612062 dev=\"vda\"",
        );
        assert_eq!(field(&f, "path"), Some("/tmp/a b"));
        assert_eq!(field(&f, "domain"), Some("1a6fdc66"));
    }
}
