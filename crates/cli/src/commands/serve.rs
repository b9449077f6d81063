//! `cairn serve`: one process owns the store and runs everyone's commands, so agents no
//! longer queue for the store's lock. HTTP/1.1 + JSON on a Unix socket in the store folder;
//! peers of another uid are refused (SO_PEERCRED). Requests run at once on a thread pool:
//! reads in parallel, operations on different worktrees in parallel, two on the same
//! worktree one after the other; `gc` waits for the store to itself. SIGTERM (or SIGINT)
//! stops accepting, lets running requests finish (what a request changes on disk is
//! journaled, see `cairn recover`), removes the socket and exits. A request whose client
//! closes its connection is cancelled ([`Call::cancel`]): a check it runs is stopped.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::error::{CliError, io_error, opened_as};
use crate::http::{
    ApiError, error, error_status, outcome_status, parse, run_blocking, shutdown_signal,
    verb_answer, verb_request,
};
use axum::body::Bytes;
use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::{IncomingStream, Listener};
use axum::{Json, Router};
use cairn_client::{Object, ObjectRef, ProgressEvent, StreamLine, WireObjectKind};
use cairn_engine::{Call, Engine, Error, Outcome, Request, TransferError};
use camino::{Utf8Path, Utf8PathBuf};
use cas::OpenOptions;
use serde_json::{Value, json};
use tokio::net::{UnixListener, UnixStream};

use crate::commands::OwnCommand;
use crate::context::Ctx;
use crate::output::Report;
use cairn_engine::wire::{CallReply, CallRequest};

/// Largest request body accepted (a `put_objects` batch).
pub const MAX_BODY: usize = 64 << 20;

/// Accepts only peers running as our own uid, in our own mount namespace: a command
/// `cairn run` confined lives in a private one, and must not reach past its sandbox through
/// the server (it could grant itself more, or check out anywhere).
struct SameUid {
    inner: UnixListener,
    uid: u32,
}

/// Who is on the other end of a connection: its uid and process (SO_PEERCRED), and the
/// connection, to tell when it closes (a copy of its descriptor).
#[derive(Debug, Clone)]
struct Peer {
    uid: u32,
    pid: Option<i32>,
    conn: Option<Arc<OwnedFd>>,
}

impl Connected<IncomingStream<'_, SameUid>> for Peer {
    fn connect_info(stream: IncomingStream<'_, SameUid>) -> Peer {
        stream.remote_addr().clone()
    }
}

impl Peer {
    /// Who asks, for a grant request it makes: `HTTP client pid N (NAME)`.
    fn describe(&self) -> String {
        match self.pid {
            Some(pid) => {
                let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .map(|c| format!(" ({})", c.trim()))
                    .unwrap_or_default();
                format!("HTTP client pid {pid}{name}")
            }
            None => format!("HTTP client of uid {}", self.uid),
        }
    }

    /// Whether the peer runs this very executable (the `cairn` command line, or `cairn
    /// mcp`): those ask their person before they send a grant; any other program's
    /// `policy_allow` is an agent's request.
    fn is_cairn(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        let identity = |path: &str| std::fs::metadata(path).map(|m| (m.dev(), m.ino())).ok();
        let Some(pid) = self.pid else { return false };
        let theirs = identity(&format!("/proc/{pid}/exe"));
        theirs.is_some() && theirs == identity("/proc/self/exe")
    }

    /// `request` as this peer may make it: an agent's `policy_allow` becomes a request
    /// for a person (asked by the peer), and a request says truly who asked.
    fn may(&self, request: Request) -> Result<Request, Error> {
        match request {
            Request::PolicyAllow(options) if !self.is_cairn() => Ok(Request::PolicyRequest(
                options.into_request(self.describe())?,
            )),
            Request::PolicyRequest(mut options) if !self.is_cairn() => {
                options.by = self.describe();
                Ok(Request::PolicyRequest(options))
            }
            other => Ok(other),
        }
    }
}

impl Listener for SameUid {
    type Io = UnixStream;
    type Addr = Peer;

    async fn accept(&mut self) -> (UnixStream, Peer) {
        loop {
            match self.inner.accept().await {
                Ok((stream, _)) => match stream.peer_cred() {
                    Ok(c) if c.uid() == self.uid && same_mounts(c.pid()) => {
                        let peer = Peer {
                            uid: c.uid(),
                            pid: c.pid(),
                            conn: stream.as_fd().try_clone_to_owned().ok().map(Arc::new),
                        };
                        return (stream, peer);
                    }
                    Ok(c) if c.uid() == self.uid => {
                        tracing::warn!(pid = ?c.pid(), "refused a peer in another mount namespace (a sandboxed command, or one whose namespace cannot be read)");
                    }
                    Ok(c) => {
                        tracing::warn!(uid = c.uid(), pid = ?c.pid(), "refused a peer of another uid");
                    }
                    Err(e) => tracing::warn!("peer credentials: {e}"),
                },
                Err(e) => {
                    tracing::warn!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Peer> {
        Ok(Peer {
            uid: self.uid,
            pid: i32::try_from(std::process::id()).ok(),
            conn: None,
        })
    }
}

/// Whether process `pid` shares this process's mount namespace; unknown counts as no (a
/// process can make itself unreadable).
fn same_mounts(pid: Option<i32>) -> bool {
    let ours = std::fs::read_link("/proc/self/ns/mnt");
    let theirs = pid.map(|p| std::fs::read_link(format!("/proc/{p}/ns/mnt")));
    matches!((ours, theirs), (Ok(a), Some(Ok(b))) if a == b)
}

#[derive(Clone)]
struct Served {
    engine: Arc<Engine>,
    requests: Arc<Requests>,
}

/// The requests ([`perform`]) this server has begun and is running: one started for a
/// mount or a check stops once none runs (and no mount is left).
#[derive(Default)]
struct Requests(Mutex<Counts>);

#[derive(Default)]
struct Counts {
    running: usize,
    begun: bool,
    /// Decided to stop ([`nothing_left`]): a `mount` is refused from then on, as this
    /// server would no longer be reached to unmount it (its socket is gone).
    stopping: bool,
}

impl Requests {
    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn running(&self) -> usize {
        self.counts().running
    }
}

/// One running request, counted while it lives.
struct Running(Arc<Requests>);

impl Running {
    /// Counts `request` as running; refuses a `mount` once the server is stopping.
    fn begin(requests: &Arc<Requests>, request: &Request) -> Result<Running, Error> {
        let mut counts = requests.counts();
        if counts.stopping && matches!(request, Request::Mount(_)) {
            return Err(cairn_engine::MountsError::Stopping.into());
        }
        counts.begun = true;
        counts.running += 1;
        Ok(Running(requests.clone()))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.counts().running -= 1;
    }
}

async fn health(State(s): State<Served>) -> Response {
    Json(json!({ "store": s.engine.store_path(), "pid": std::process::id() })).into_response()
}

fn wants_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/x-ndjson"))
}

/// An answer's status and JSON body, from a call's result.
type Answer = fn(Result<Outcome, Error>) -> (StatusCode, Value);

/// How often a running request's connection is looked at for its client's going.
const WATCH_EVERY: Duration = Duration::from_millis(100);

/// Whether the client of `conn` closed it (or it broke): what it sends while its request
/// runs does not count.
fn caller_gone(conn: &OwnedFd) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec};
    let mut fds = [PollFd::new(conn, PollFlags::RDHUP)];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    match rustix::event::poll(&mut fds, Some(&now)) {
        Ok(_) => fds[0]
            .revents()
            .intersects(PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR),
        Err(_) => false,
    }
}

/// Sets a request's cancel flag once its client closes the connection `conn`; stops
/// watching when dropped (the request ended).
struct Watch(Option<tokio::task::JoinHandle<()>>);

impl Watch {
    fn start(conn: Option<Arc<OwnedFd>>, cancel: Arc<AtomicBool>) -> Watch {
        Watch(conn.map(|conn| {
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(WATCH_EVERY).await;
                    if caller_gone(&conn) {
                        cancel.store(true, Ordering::Relaxed);
                        return;
                    }
                }
            })
        }))
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

/// Runs `request` from `cwd` on a pool no other request uses (a checkout's hydration must
/// not hold up a snapshot of another worktree), answered by `answer`; with `stream`, as
/// NDJSON: progress lines, then the answer. Cancelled once the client closes `conn`.
#[allow(clippy::too_many_arguments)]
async fn perform(
    served: Served,
    cwd: Utf8PathBuf,
    request: Request,
    offline: bool,
    person: bool,
    stream: bool,
    conn: Option<Arc<OwnedFd>>,
    answer: Answer,
) -> Response {
    let engine = served.engine;
    let running = match Running::begin(&served.requests, &request) {
        Ok(running) => running,
        Err(e) => {
            let (status, body) = answer(Err(e));
            return (status, Json(body)).into_response();
        }
    };
    let cancel = Arc::new(AtomicBool::new(false));
    // Moved into the request's thread: watched and counted for as long as the request
    // runs, even once the client's going dropped this future.
    let watch = (Watch::start(conn, cancel.clone()), running);
    if !stream {
        let result = run_blocking(move || {
            let _watch = watch;
            let call = Call::new(cwd)
                .offline(offline)
                .by_person(person)
                .cancelled_by(&cancel);
            engine.isolated(|| engine.handle(&call, request))
        })
        .await;
        return match result {
            Ok(result) => {
                let (status, body) = answer(result);
                (status, Json(body)).into_response()
            }
            Err(e) => e.into_response(),
        };
    }
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<StreamLine>();
    let progress = Streamed {
        tx: tx.clone(),
        state: Mutex::default(),
    };
    tokio::task::spawn_blocking(move || {
        let _watch = watch;
        let call = Call::new(cwd)
            .with_progress(&progress)
            .offline(offline)
            .by_person(person)
            .cancelled_by(&cancel);
        let result = engine.isolated(|| engine.handle(&call, request));
        let (status, body) = answer(result);
        let _ = tx.send(StreamLine::Reply {
            status: status.as_u16(),
            body,
        });
    });
    let lines = futures_util::stream::unfold(rx, |mut rx| async move {
        let line = rx.recv().await?;
        let mut text = serde_json::to_vec(&line).unwrap_or_default();
        text.push(b'\n');
        Some((Ok::<_, std::convert::Infallible>(text), rx))
    });
    (
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        axum::body::Body::from_stream(lines),
    )
        .into_response()
}

/// A request's progress, sent as NDJSON lines.
struct Streamed {
    tx: tokio::sync::mpsc::UnboundedSender<StreamLine>,
    state: Mutex<StreamState>,
}

#[derive(Default)]
struct StreamState {
    event: ProgressEvent,
    last: Option<Instant>,
}

/// Events this far apart at most (and at the start and end of each phase).
const STREAM_EVERY: Duration = Duration::from_millis(100);

impl Streamed {
    fn emit(&self, update: impl FnOnce(&mut ProgressEvent), force: bool) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        update(&mut state.event);
        let due = force || state.last.is_none_or(|t| t.elapsed() >= STREAM_EVERY);
        if due {
            state.last = Some(Instant::now());
            let _ = self.tx.send(StreamLine::Progress(state.event.clone()));
        }
    }
}

impl cairn_engine::Progress for Streamed {
    fn start(&self, what: &str, files: u64, bytes: u64) {
        self.emit(
            |e| {
                *e = ProgressEvent {
                    what: what.to_owned(),
                    total_files: files,
                    total_bytes: bytes,
                    ..ProgressEvent::default()
                }
            },
            true,
        );
    }

    fn advance(&self, files: u64, bytes: u64) {
        self.emit(
            |e| {
                e.files += files;
                e.bytes += bytes;
            },
            false,
        );
    }

    fn finish(&self) {
        self.emit(|e| e.done = true, true);
    }
}

/// `POST /v1/call`: any verb's typed request, as the `cairn` CLI sends it; answered with
/// the typed outcome and exit status, or the error. A `policy_allow` from another program
/// than cairn is recorded as a request.
async fn call(
    State(s): State<Served>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: CallRequest = match parse(&body) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    if !body.cwd.is_absolute() {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_path",
            format!("cwd {} is not absolute", body.cwd),
        )
        .into_response();
    }
    let answer: Answer = |result| {
        let reply = CallReply::of(result);
        let status = match &reply {
            CallReply::Done { exit, .. } => outcome_status(*exit),
            CallReply::Failed { error } => error_status(&error.code, error.exit),
        };
        (status, serde_json::to_value(reply).unwrap_or_default())
    };
    let request = match peer.may(body.request) {
        Ok(r) => r,
        Err(e) => {
            let (status, body) = answer(Err(e));
            return (status, Json(body)).into_response();
        }
    };
    // The command line (this executable) is a person's terminal, as for `policy_allow`;
    // any other program is not, whatever it sends.
    let person = peer.is_cairn();
    perform(
        s.clone(),
        body.cwd,
        request,
        body.offline,
        person,
        wants_stream(&headers),
        peer.conn,
        answer,
    )
    .await
}

/// `POST /v1/{verb}`: a verb with JSON arguments, answered with its JSON object.
/// `policy_allow` records a request for a person to decide on: it grants nothing.
async fn verb(
    State(s): State<Served>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (cwd, request) = match verb_request(&name, &body) {
        Ok(asked) => asked,
        Err(e) => return e.into_response(),
    };
    let answer: Answer = verb_answer;
    // Whoever calls this route, cairn itself included, is an agent asking.
    let request = match request {
        Request::PolicyAllow(options) => match options.into_request(peer.describe()) {
            Ok(asked) => Request::PolicyRequest(asked),
            Err(e) => {
                let (status, body) = answer(Err(e));
                return (status, Json(body)).into_response();
            }
        },
        other => other,
    };
    perform(
        s.clone(),
        cwd,
        request,
        false,
        false,
        wants_stream(&headers),
        peer.conn,
        answer,
    )
    .await
}

#[derive(serde::Deserialize)]
struct Refs {
    objects: Vec<ObjectRef>,
}

#[derive(serde::Deserialize)]
struct Objects {
    objects: Vec<Object>,
}

fn object_id(r: &ObjectRef) -> Result<cas::ObjectId, ApiError> {
    r.id.parse::<cas::ObjectId>().map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            "invalid_id",
            format!("{}: {e}", r.id),
        )
    })
}

/// The objects a request names, with their parsed ids.
fn refs_with_ids(body: &Bytes) -> Result<Vec<(ObjectRef, cas::ObjectId)>, ApiError> {
    let refs: Refs = parse(body)?;
    refs.objects
        .into_iter()
        .map(|r| object_id(&r).map(|id| (r, id)))
        .collect()
}

fn store_kind(kind: WireObjectKind) -> cas::ObjectKind {
    match kind {
        WireObjectKind::Blob => cas::ObjectKind::Blob,
        WireObjectKind::Tree => cas::ObjectKind::Tree,
        WireObjectKind::Snapshot => cas::ObjectKind::Snapshot,
    }
}

fn keys(ids: &[(ObjectRef, cas::ObjectId)]) -> Vec<(cas::ObjectKind, cas::ObjectId)> {
    ids.iter()
        .map(|(r, id)| (store_kind(r.kind), *id))
        .collect()
}

/// The answer to a failed transfer: received bytes that are not their object, or that
/// reference one neither stored nor sent, are the client's (422); the rest the store's.
fn transfer_error(e: &TransferError) -> ApiError {
    let (status, code) = match e {
        TransferError::Verify(cas::VerifyError::HashMismatch { .. }) => {
            (StatusCode::UNPROCESSABLE_ENTITY, "hash_mismatch")
        }
        TransferError::Verify(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_object"),
        TransferError::Write(cas::WriteError::Dangling { .. }) => {
            (StatusCode::UNPROCESSABLE_ENTITY, "dangling")
        }
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "store"),
    };
    error(status, code, e.to_string())
}

/// `POST /v1/objects/find_missing`: which of these objects the store lacks.
async fn find_missing(State(s): State<Served>, body: Bytes) -> Response {
    let ids = match refs_with_ids(&body) {
        Ok(ids) => ids,
        Err(e) => return e.into_response(),
    };
    let engine = s.engine.clone();
    let lacking = run_blocking(move || {
        let lacking = engine.lacking_objects(&keys(&ids))?;
        let mut ids: Vec<Option<ObjectRef>> = ids.into_iter().map(|(r, _)| Some(r)).collect();
        Ok::<Vec<ObjectRef>, TransferError>(
            lacking
                .into_iter()
                .filter_map(|at| ids[at].take())
                .collect(),
        )
    })
    .await;
    match lacking {
        Ok(Ok(missing)) => Json(json!({ "missing": missing })).into_response(),
        Ok(Err(e)) => transfer_error(&e).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `POST /v1/objects/put`: verify every object (id from its bytes; trees and snapshots
/// decoded under the tree rules; everything they reference present or in the batch), then
/// store them in one transaction. Any failure stores nothing.
async fn put_objects(State(s): State<Served>, body: Bytes) -> Response {
    let objects: Objects = match parse(&body) {
        Ok(o) => o,
        Err(e) => return e.into_response(),
    };
    let mut received = Vec::with_capacity(objects.objects.len());
    for o in objects.objects {
        let claimed = match object_id(&ObjectRef {
            kind: o.kind,
            id: o.id,
        }) {
            Ok(id) => id,
            Err(e) => return e.into_response(),
        };
        received.push((store_kind(o.kind), claimed, o.data));
    }
    let engine = s.engine.clone();
    match run_blocking(move || engine.store_objects(received)).await {
        Ok(Ok(n)) => Json(json!({ "stored": n })).into_response(),
        Ok(Err(e)) => transfer_error(&e).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `POST /v1/objects/get`: the stored objects among these, and which are missing.
async fn get_objects(State(s): State<Served>, body: Bytes) -> Response {
    let ids = match refs_with_ids(&body) {
        Ok(ids) => ids,
        Err(e) => return e.into_response(),
    };
    let engine = s.engine.clone();
    let got = run_blocking(move || {
        let read = engine.read_objects(&keys(&ids))?;
        let (mut found, mut missing) = (Vec::new(), Vec::new());
        for ((r, _), data) in ids.into_iter().zip(read) {
            match data {
                Some(data) => found.push(Object {
                    kind: r.kind,
                    id: r.id,
                    data,
                }),
                None => missing.push(r),
            }
        }
        Ok::<_, TransferError>((found, missing))
    })
    .await;
    match got {
        Ok(Ok((found, missing))) => {
            Json(json!({ "objects": found, "missing": missing })).into_response()
        }
        Ok(Err(e)) => transfer_error(&e).into_response(),
        Err(e) => e.into_response(),
    }
}

fn router(served: Served) -> Router {
    Router::new()
        .route("/v1/health", get(health))
        .route("/v1/call", post(call))
        .route("/v1/objects/find_missing", post(find_missing))
        .route("/v1/objects/put", post(put_objects))
        .route("/v1/objects/get", post(get_objects))
        .route("/v1/{verb}", post(verb))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(served)
}

/// Binds `socket` for our uid only: a stale socket file is replaced, anything else there is
/// refused; the socket is made 0700 (owner only).
fn bind(socket: &Utf8Path) -> Result<UnixListener, Error> {
    match std::fs::symlink_metadata(socket) {
        Ok(m) if m.file_type().is_socket() => {
            std::fs::remove_file(socket)
                .map_err(|e| io_error(format!("{socket}: removing a stale socket"), e))?;
        }
        Ok(_) => {
            return Err(CliError::NotASocket {
                socket: socket.to_owned(),
            }
            .into());
        }
        Err(_) => {}
    }
    let listener =
        UnixListener::bind(socket).map_err(|e| io_error(format!("{socket}: cannot listen"), e))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| io_error(socket, e))?;
    Ok(listener)
}

/// Resolves once a server started for a mount or a check has nothing left to serve: no
/// mount and no running request, once a request came (or the one that started it had 10
/// seconds to arrive). Its `socket` is removed first, so that a command started meanwhile
/// opens the store itself (waiting for this process to let it go) rather than reach a
/// server that stops; a request that came just before is still served, but a `mount`
/// is refused (its client starts another server): decided under the requests' lock, so
/// no mount begins between the look at what is left and the decision.
async fn nothing_left(served: Served, socket: Utf8PathBuf) {
    let started = Instant::now();
    // Tests widen the moment between the decision and the socket's going.
    let pause = std::env::var(STOP_PAUSE_MS)
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map(Duration::from_millis);
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        {
            let mut counts = served.requests.counts();
            let waited = counts.begun || started.elapsed() >= Duration::from_secs(10);
            if !(waited && counts.running == 0 && served.engine.live_mounts() == 0) {
                continue;
            }
            counts.stopping = true;
        }
        if let Some(pause) = pause {
            tokio::time::sleep(pause).await;
        }
        let _ = std::fs::remove_file(&socket);
        // A client that connected just before sends its request at once.
        tokio::time::sleep(LAST_REQUESTS).await;
        while served.requests.running() > 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        eprintln!("cairn serve: no mount or request left; stopping");
        return;
    }
}

/// For tests: milliseconds a server started for mounts waits between deciding to stop
/// and removing its socket, to send a request at that moment.
const STOP_PAUSE_MS: &str = "CAIRN_TEST_SERVE_STOP_PAUSE_MS";

/// Every so often, lets go of the mounts unmounted from outside (`umount -l`), whose
/// sessions ended on their own: a server started for mounts then has none left, and any
/// server closes their `/dev/fuse` and layer files.
async fn forget_ended_mounts(engine: Arc<Engine>) {
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let engine = engine.clone();
        let _ = tokio::task::spawn_blocking(move || engine.forget_ended_mounts()).await;
    }
}

/// How long a server that has nothing left waits, its socket removed, for the requests of
/// clients that connected just before.
const LAST_REQUESTS: Duration = Duration::from_millis(500);

/// A foreground daemon that owns the store so many processes can use it at once; every
/// other command uses it while it runs. Stops on SIGTERM.
#[derive(clap::Args, Debug)]
#[command(display_order = 36)]
pub struct Args {
    /// The socket (default: `serve.sock` in the store folder).
    #[arg(long, value_name = "PATH")]
    socket: Option<Utf8PathBuf>,
    /// Started by `mount` or `verify`: stop once no mount and no request is left.
    #[arg(long, hide = true)]
    for_mounts: bool,
}

impl OwnCommand for Args {}

/// `cairn serve [--socket PATH]`: runs in the foreground until SIGTERM (with
/// `--for-mounts`, also once no mount is left).
pub fn run(ctx: &Ctx, args: Args) -> Result<Report, Error> {
    let Args { socket, for_mounts } = args;
    let socket = socket.as_deref();
    let cwd = crate::context::current_dir()?;
    let path = ctx.store_path(&cwd)?;
    // Another process holding the store (a server, or a long command) is an error soon,
    // not a long wait: a server started for a mount or a check that has nothing left lets
    // it go within a second or so. One started so waits longer: the server it follows may
    // be stopping (its socket gone already).
    let options = crate::target::with_format_1_tables(OpenOptions {
        create: false,
        lock_timeout: if for_mounts {
            Duration::from_secs(10)
        } else {
            Duration::from_secs(2)
        },
        ..OpenOptions::from_env()
    });
    let engine = Engine::open(&path, &options).map_err(|e| match opened_as(&e) {
        Some(cas::OpenError::LockTimeout { .. }) => {
            CliError::StoreHeld { path: path.clone() }.into()
        }
        _ => e,
    })?;
    let socket = socket
        .map(|s| crate::context::absolute(&cwd, s))
        .unwrap_or_else(|| cairn_client::Client::socket_of(&path));
    // Captures made here watch their worktrees and skip what did not change.
    let engine = crate::target::with_backends(engine.watching());
    let engine = Arc::new(engine);
    let served = Served {
        engine: engine.clone(),
        requests: Arc::default(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| io_error("starting the server", e))?;
    // Clients look for `serve.sock` in the store folder: point it at a socket elsewhere.
    let default = cairn_client::Client::socket_of(&path);
    let pointer = (socket != default).then_some(default);
    runtime.block_on(async {
        let listener = SameUid {
            inner: bind(&socket)?,
            uid: rustix::process::geteuid().as_raw(),
        };
        if let Some(pointer) = &pointer {
            if std::fs::symlink_metadata(pointer)
                .is_ok_and(|m| m.file_type().is_symlink() || m.file_type().is_socket())
            {
                let _ = std::fs::remove_file(pointer);
            }
            std::os::unix::fs::symlink(&socket, pointer)
                .map_err(|e| io_error(format!("{pointer}: linking to {socket}"), e))?;
        }
        eprintln!("cairn serve: store {path} on {socket}");
        let reaper = tokio::spawn(forget_ended_mounts(engine.clone()));
        let watched = (served.clone(), socket.clone());
        let app = router(served);
        let stop = async move {
            if for_mounts {
                tokio::select! {
                    _ = shutdown_signal("cairn serve") => {}
                    _ = nothing_left(watched.0, watched.1) => {}
                }
            } else {
                shutdown_signal("cairn serve").await;
            }
        };
        axum::serve(listener, app.into_make_service_with_connect_info::<Peer>())
            .with_graceful_shutdown(stop)
            .await
            .map_err(|e| io_error(&socket, e))?;
        reaper.abort();
        Ok::<(), Error>(())
    })?;
    // The mounts go with the server; their layers stay for the next `mount`.
    engine.unmount_all();
    let _ = std::fs::remove_file(&socket);
    if let Some(pointer) = &pointer {
        let _ = std::fs::remove_file(pointer);
    }
    #[derive(serde::Serialize)]
    struct Stopped<'a> {
        store: &'a Utf8Path,
        socket: &'a Utf8Path,
    }
    Ok(Report::new(
        Stopped {
            store: &path,
            socket: &socket,
        },
        format!("cairn serve: stopped; store {path} closed\n"),
    ))
}
