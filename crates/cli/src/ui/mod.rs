//! `cairn ui`: a local web page over the store, for the people who supervise agents.
//!
//! The page is hand-written ES modules and CSS, embedded ([`assets`]); its data are the
//! engine's verbs, `POST /v1/{verb}` with the very body `cairn serve` takes, read by the
//! same code ([`crate::http::verb_request`]) and run where a command of the
//! command line runs ([`Target`]): by the `cairn serve` of the store when one runs, else
//! here, opening the store for the call only (read-only for a read), so agents' commands go
//! on beside it and reads change nothing. The page acts as a person, as the command line
//! does: only the holder of the printed URL's token gets in ([`guard`]).
//! `GET /v1/events` tells the page when the store changed ([`events`]).

pub mod assets;
pub mod events;
pub mod guard;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRef, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use camino::{Utf8Path, Utf8PathBuf};
use tokio_util::sync::CancellationToken;

use crate::error::{Error, io_error};
use crate::http::{self, run_blocking, verb_answer, verb_request};
use crate::progress::Bar;
use crate::target::Target;
use events::StoreChanges;
use guard::Guard;

/// Largest request body accepted: a verb's arguments.
pub const MAX_BODY: usize = 1 << 20;

/// What the handlers share.
#[derive(Clone)]
struct Ui {
    store: Utf8PathBuf,
    /// Never fetch from a remote (`--offline`).
    offline: bool,
    changes: StoreChanges,
}

impl FromRef<Ui> for StoreChanges {
    fn from_ref(ui: &Ui) -> StoreChanges {
        ui.changes.clone()
    }
}

/// An error answer, `{"error": {"code", "message"}}`, as every route of cairn gives one.
pub fn refusal(status: StatusCode, code: &'static str, message: impl Into<String>) -> Response {
    http::error(status, code, message).into_response()
}

/// `POST /v1/{verb}`: the verb run as a person asks it, answered as `cairn serve` answers.
async fn verb(State(ui): State<Ui>, Path(name): Path<String>, body: Bytes) -> Response {
    let (cwd, request) = match verb_request(&name, &body) {
        Ok(asked) => asked,
        Err(e) => return e.into_response(),
    };
    let (store, offline) = (ui.store, ui.offline);
    let ran = run_blocking(move || {
        let target = Target::for_request(&store, offline, &request)?;
        target.call(&cwd, request, &Bar::hidden(), false)
    })
    .await;
    let result = match ran {
        Ok(result) => result.map(|(outcome, _exit)| outcome),
        Err(e) => return e.into_response(),
    };
    let (status, body) = verb_answer(result);
    (status, Json(body)).into_response()
}

fn router(ui: Ui, guard: Arc<Guard>) -> Router {
    Router::new()
        .route("/", get(assets::index))
        .route("/assets/{*file}", get(assets::file))
        .route("/v1/events", get(events::events))
        .route("/v1/{verb}", post(verb))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn_with_state(guard, guard::check))
        .with_state(ui)
}

/// A new token: 32 random bytes, in hex.
fn new_token() -> Result<String, Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| {
        io_error(
            "random bytes for the token",
            std::io::Error::other(e.to_string()),
        )
    })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Serves the page of `store` on 127.0.0.1:`port` (0: a free one) until SIGTERM or
/// SIGINT, never fetching from a remote if `offline`; `on_listening` gets the URL to open
/// (with its token) as soon as it listens.
pub fn serve(
    store: &Utf8Path,
    port: u16,
    offline: bool,
    on_listening: impl FnOnce(&str),
) -> Result<(), Error> {
    if !store.join(cas::DATABASE_FILE).is_file() {
        return Err(cas::OpenError::Missing {
            path: store.to_owned(),
        }
        .into());
    }
    let token = new_token()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| io_error("starting the server", e))?;
    runtime.block_on(async {
        let address = format!("127.0.0.1:{port}");
        let listener = tokio::net::TcpListener::bind(&address).await.map_err(|e| {
            io_error(
                format!("{address}: cannot listen (give another --port, or 0 for a free one)"),
                e,
            )
        })?;
        let port = listener
            .local_addr()
            .map_err(|e| io_error(&address, e))?
            .port();
        let stop = CancellationToken::new();
        let ui = Ui {
            store: store.to_owned(),
            offline,
            changes: StoreChanges::watch(store, stop.clone())?,
        };
        let app = router(ui, Arc::new(Guard::new(token.clone(), port)));
        on_listening(&format!("http://127.0.0.1:{port}/?token={token}"));
        let stopping = async move {
            http::shutdown_signal("cairn ui").await;
            stop.cancel();
        };
        axum::serve(listener, app)
            .with_graceful_shutdown(stopping)
            .await
            .map_err(|e| io_error(&address, e))
    })
}
