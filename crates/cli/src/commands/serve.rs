//! `cairn serve`: one process owns the store and runs everyone's commands, so agents no
//! longer queue for the store's lock. HTTP/1.1 + JSON on a Unix socket in the store folder;
//! peers of another uid are refused (SO_PEERCRED). Requests run at once on a thread pool:
//! reads in parallel, operations on different worktrees in parallel, two on the same
//! worktree one after the other; `gc` waits for the store to itself. SIGTERM (or SIGINT)
//! stops accepting, lets running requests finish (what a request changes on disk is
//! journaled, see `cairn recover`), removes the socket and exits.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::Listener;
use axum::{Json, Router};
use cairn_client::{CommandRequest, Object, ObjectKind, ObjectRef, StreamLine};
use camino::{Utf8Path, Utf8PathBuf};
use cas::{OpenOptions, Store, WriteBatch};
use serde_json::{Value, json};
use tokio::net::{UnixListener, UnixStream};

use crate::commands::verbs::{TOOLS, argv};
use crate::context::{Ctx, SharedStore};
use crate::error::CliError;
use crate::output::Report;

/// Largest request body accepted (a `put_objects` batch).
pub const MAX_BODY: usize = 64 << 20;

/// Accepts only peers running as our own uid.
struct SameUid {
    inner: UnixListener,
    uid: u32,
}

impl Listener for SameUid {
    type Io = UnixStream;
    type Addr = u32;

    async fn accept(&mut self) -> (UnixStream, u32) {
        loop {
            match self.inner.accept().await {
                Ok((stream, _)) => match stream.peer_cred() {
                    Ok(c) if c.uid() == self.uid => return (stream, c.uid()),
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

    fn local_addr(&self) -> std::io::Result<u32> {
        Ok(self.uid)
    }
}

#[derive(Clone)]
struct Served {
    shared: SharedStore,
}

/// An error answer: status and `{"error": {"code", "message"}}`.
struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({ "error": { "code": self.code, "message": self.message } });
        (self.status, Json(body)).into_response()
    }
}

fn error(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError {
        status,
        code,
        message: message.into(),
    }
}

fn parse<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            "invalid_json",
            format!("request body: {e}"),
        )
    })
}

/// HTTP status for a command's exit status.
fn status_of(code: u8) -> StatusCode {
    match code {
        0 => StatusCode::OK,
        1 => StatusCode::CONFLICT,
        2 => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// Runs `f` on a blocking thread with a parallel pool of its own: requests must not queue
/// behind each other's parallel work (a checkout's hydration would otherwise hold up a
/// snapshot of another worktree on the shared global pool).
async fn run_blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(move || own_pool(f))
        .await
        .map_err(|e| {
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                format!("request failed: {e}"),
            )
        })
}

async fn health(State(s): State<Served>) -> Response {
    Json(json!({ "store": s.shared.path, "pid": std::process::id() })).into_response()
}

/// `POST /v1/command`: any command line, answered with exactly what it prints; with
/// `Accept: application/x-ndjson`, progress lines first.
async fn command(State(s): State<Served>, headers: HeaderMap, body: Bytes) -> Response {
    let request: CommandRequest = match parse(&body) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    if !request.cwd.is_absolute() {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_path",
            format!("cwd {} is not absolute", request.cwd),
        )
        .into_response();
    }
    let shared = s.shared.clone();
    let streaming = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/x-ndjson"));
    if streaming {
        return stream_command(request, shared);
    }
    match run_blocking(move || {
        crate::execute(&request.argv, request.cwd, request.color, Some(shared))
    })
    .await
    {
        Ok(out) => Json(out).into_response(),
        Err(e) => e.into_response(),
    }
}

/// Runs the command with its progress sent as NDJSON lines, then its output.
fn stream_command(request: CommandRequest, shared: SharedStore) -> Response {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<StreamLine>();
    let progress = tx.clone();
    let sink: crate::progress::Sink = Arc::new(move |e| {
        let _ = progress.send(StreamLine::Progress(e.clone()));
    });
    tokio::task::spawn_blocking(move || {
        let out = own_pool(|| {
            crate::progress::with_sink(sink, || {
                crate::execute(&request.argv, request.cwd, request.color, Some(shared))
            })
        });
        let _ = tx.send(StreamLine::Output(out));
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

fn own_pool<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    match rayon::ThreadPoolBuilder::new().build() {
        Ok(pool) => pool.install(f),
        // No threads to spare: share the global pool.
        Err(_) => f(),
    }
}

/// `POST /v1/{verb}`: a verb with JSON arguments, answered with its JSON object.
async fn verb(State(s): State<Served>, Path(name): Path<String>, body: Bytes) -> Response {
    let Some(spec) = TOOLS.iter().find(|t| t.name == name) else {
        return error(
            StatusCode::NOT_FOUND,
            "unknown_verb",
            format!("no verb {name:?}"),
        )
        .into_response();
    };
    let mut args: serde_json::Map<String, Value> = if body.is_empty() {
        serde_json::Map::new()
    } else {
        match parse(&body) {
            Ok(a) => a,
            Err(e) => return e.into_response(),
        }
    };
    let cwd = match args.remove("cwd") {
        // No caller's directory to default to: a directory left out would mean `/`.
        None => {
            if let Some(name) = missing_directory(spec, &args) {
                return error(
                    StatusCode::BAD_REQUEST,
                    "missing_argument",
                    format!(
                        "{verb}: give {name:?} (or a \"cwd\" to take it from)",
                        verb = spec.name
                    ),
                )
                .into_response();
            }
            Utf8PathBuf::from("/")
        }
        Some(Value::String(c)) if Utf8Path::new(&c).is_absolute() => Utf8PathBuf::from(c),
        Some(other) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_path",
                format!("cwd must be an absolute path, not {other}"),
            )
            .into_response();
        }
    };
    let mut line = match argv(spec, &args) {
        Ok(l) => l,
        Err(e) => return error(StatusCode::BAD_REQUEST, "invalid_arguments", e).into_response(),
    };
    line.splice(0..0, ["--store".to_owned(), s.shared.path.to_string()]);
    let shared = s.shared.clone();
    let out = match run_blocking(move || crate::execute(&line, cwd, false, Some(shared))).await {
        Ok(out) => out,
        Err(e) => return e.into_response(),
    };
    match serde_json::from_slice::<Value>(&out.stdout) {
        Ok(value) => (status_of(out.code), Json(value)).into_response(),
        // Every verb prints one JSON object: anything else is the server's fault, whatever
        // the exit code says.
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!(
                "{verb} printed no JSON object ({e}): {}",
                String::from_utf8_lossy(&out.stdout),
                verb = spec.name
            ),
        )
        .into_response(),
    }
}

/// The first optional positional argument (a directory that defaults to the caller's) that
/// `args` leaves out.
fn missing_directory(
    spec: &crate::commands::verbs::ToolSpec,
    args: &serde_json::Map<String, Value>,
) -> Option<&'static str> {
    spec.args.iter().find_map(|(arg, _)| match arg {
        crate::commands::verbs::Arg::Positional(name, true)
            if args.get(*name).is_none_or(Value::is_null) =>
        {
            Some(*name)
        }
        _ => None,
    })
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

/// The shared store for reading. A request that panicked holding it changed nothing half
/// way (every write is a transaction), so a poisoned lock is still good.
fn read_store(store: &RwLock<Store>) -> std::sync::RwLockReadGuard<'_, Store> {
    store
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn present(reader: &cas::Reader, kind: ObjectKind, id: cas::ObjectId) -> Result<bool, String> {
    let r = match kind {
        ObjectKind::Blob => reader.has_blob(id.as_blob()),
        ObjectKind::Tree => reader.has_tree(id.as_tree()),
        ObjectKind::Snapshot => reader.has_snapshot(id.as_snapshot()),
    };
    r.map_err(|e| e.to_string())
}

/// `POST /v1/objects/find_missing`: which of these objects the store lacks.
async fn find_missing(State(s): State<Served>, body: Bytes) -> Response {
    let ids = match refs_with_ids(&body) {
        Ok(ids) => ids,
        Err(e) => return e.into_response(),
    };
    let store = s.shared.store.clone();
    let found = run_blocking(move || -> Result<Vec<ObjectRef>, String> {
        let store = read_store(&store);
        let reader = store.reader().map_err(|e| e.to_string())?;
        let mut missing = Vec::new();
        for (r, id) in ids {
            if !present(&reader, r.kind, id)? {
                missing.push(r);
            }
        }
        Ok(missing)
    })
    .await;
    match found {
        Ok(Ok(missing)) => Json(json!({ "missing": missing })).into_response(),
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, "store", e).into_response(),
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
    let mut batch = WriteBatch::new();
    for o in objects.objects {
        let claimed = match object_id(&ObjectRef {
            kind: o.kind,
            id: o.id.clone(),
        }) {
            Ok(id) => id,
            Err(e) => return e.into_response(),
        };
        let kind = match o.kind {
            ObjectKind::Blob => cas::ObjectKind::Blob,
            ObjectKind::Tree => cas::ObjectKind::Tree,
            ObjectKind::Snapshot => cas::ObjectKind::Snapshot,
        };
        match cas::verify_object(kind, claimed, &o.data) {
            Ok(verified) => {
                batch.add_verified(verified);
            }
            Err(e) => {
                let code = match e {
                    cas::VerifyError::HashMismatch { .. } => "hash_mismatch",
                    _ => "invalid_object",
                };
                return error(StatusCode::UNPROCESSABLE_ENTITY, code, e.to_string())
                    .into_response();
            }
        }
    }
    let store = s.shared.store.clone();
    let written = run_blocking(move || -> Result<u64, cas::WriteError> {
        let out = read_store(&store).write(&batch)?;
        Ok(out.blobs_written + out.trees_written + out.snapshots_written)
    })
    .await;
    match written {
        Ok(Ok(n)) => Json(json!({ "stored": n })).into_response(),
        Ok(Err(e @ cas::WriteError::Dangling { .. })) => {
            error(StatusCode::UNPROCESSABLE_ENTITY, "dangling", e.to_string()).into_response()
        }
        Ok(Err(e)) => {
            error(StatusCode::INTERNAL_SERVER_ERROR, "store", e.to_string()).into_response()
        }
        Err(e) => e.into_response(),
    }
}

/// `POST /v1/objects/get`: the stored objects among these, and which are missing.
async fn get_objects(State(s): State<Served>, body: Bytes) -> Response {
    let ids = match refs_with_ids(&body) {
        Ok(ids) => ids,
        Err(e) => return e.into_response(),
    };
    let store = s.shared.store.clone();
    let got = run_blocking(move || -> Result<(Vec<Object>, Vec<ObjectRef>), String> {
        let store = read_store(&store);
        let reader = store.reader().map_err(|e| e.to_string())?;
        let (mut found, mut missing) = (Vec::new(), Vec::new());
        for (r, id) in ids {
            if !present(&reader, r.kind, id)? {
                missing.push(r);
                continue;
            }
            let data = match r.kind {
                ObjectKind::Blob => reader.blob(id.as_blob()).map_err(|e| e.to_string())?,
                ObjectKind::Tree => reader
                    .tree(id.as_tree())
                    .map_err(|e| e.to_string())?
                    .encode(),
                ObjectKind::Snapshot => reader
                    .snapshot(id.as_snapshot())
                    .map_err(|e| e.to_string())?
                    .encode(),
            };
            found.push(Object {
                kind: r.kind,
                id: r.id,
                data,
            });
        }
        Ok((found, missing))
    })
    .await;
    match got {
        Ok(Ok((found, missing))) => {
            Json(json!({ "objects": found, "missing": missing })).into_response()
        }
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, "store", e).into_response(),
        Err(e) => e.into_response(),
    }
}

fn router(served: Served) -> Router {
    Router::new()
        .route("/v1/health", get(health))
        .route("/v1/command", post(command))
        .route("/v1/objects/find_missing", post(find_missing))
        .route("/v1/objects/put", post(put_objects))
        .route("/v1/objects/get", post(get_objects))
        .route("/v1/{verb}", post(verb))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(served)
}

/// Binds `socket` for our uid only: a stale socket file is replaced, anything else there is
/// refused; the socket is made 0700 (owner only).
fn bind(socket: &Utf8Path) -> Result<UnixListener, CliError> {
    match std::fs::symlink_metadata(socket) {
        Ok(m) if m.file_type().is_socket() => {
            std::fs::remove_file(socket).map_err(|e| {
                CliError::store("io", format!("{socket}: removing a stale socket: {e}"))
            })?;
        }
        Ok(_) => {
            return Err(CliError::usage(
                "invalid_path",
                format!("{socket}: exists and is not a socket"),
            ));
        }
        Err(_) => {}
    }
    let listener = UnixListener::bind(socket)
        .map_err(|e| CliError::store("io", format!("{socket}: cannot listen: {e}")))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| CliError::store("io", format!("{socket}: {e}")))?;
    Ok(listener)
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    eprintln!("cairn serve: stopping; finishing running requests");
}

/// `cairn serve [--socket PATH]`: runs in the foreground until SIGTERM.
pub fn run(ctx: &Ctx, socket: Option<&Utf8Path>) -> Result<Report, CliError> {
    let path = ctx.store_path()?;
    // Another process holding the store (a server, or a long command) is an error now,
    // not a wait.
    let options = OpenOptions {
        create: false,
        lock_timeout: Duration::ZERO,
        ..OpenOptions::from_env()
    };
    let store = Store::open(&path, &options).map_err(|e| match e {
        cas::OpenError::LockTimeout { .. } => CliError::usage(
            "store_busy",
            format!(
                "store {path} is held by another process (a running `cairn serve`, or a command); stop it first"
            ),
        ),
        other => other.into(),
    })?;
    let socket = socket
        .map(|s| crate::context::absolute(&crate::context::current_dir().unwrap_or_default(), s))
        .unwrap_or_else(|| cairn_client::Client::socket_of(&path));
    let served = Served {
        shared: SharedStore {
            path: path.clone(),
            store: Arc::new(RwLock::new(store)),
            // Captures made here watch their worktrees and skip what did not change.
            worktrees: Arc::new(fs_manager::Worktrees::watching()),
        },
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::store("io", format!("starting the server: {e}")))?;
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
            std::os::unix::fs::symlink(&socket, pointer).map_err(|e| {
                CliError::store("io", format!("{pointer}: linking to {socket}: {e}"))
            })?;
        }
        eprintln!("cairn serve: store {path} on {socket}");
        let app = router(served);
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown_signal())
            .await
            .map_err(|e| CliError::store("io", format!("{socket}: {e}")))?;
        Ok::<(), CliError>(())
    })?;
    let _ = std::fs::remove_file(&socket);
    if let Some(pointer) = &pointer {
        let _ = std::fs::remove_file(pointer);
    }
    Ok(Report::new(
        json!({ "store": path, "socket": socket }),
        format!("cairn serve: stopped; store {path} closed\n"),
    ))
}
