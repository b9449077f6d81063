//! What the HTTP servers (`cairn serve`, `cairn ui`) share: reading a verb route's request
//! (`POST /v1/{verb}`), answering with its outcome or error, the status each error code
//! has, and stopping on a signal.

use axum::Json;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use cairn_engine::{Error, Face, Outcome, Request, Verb};
use camino::{Utf8Path, Utf8PathBuf};
use serde_json::{Value, json};

/// An error answer: status and `{"error": {"code", "message"}}`.
pub struct ApiError {
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

/// The codes only the servers answer with, beside the engine's ([`cairn_engine::Code`]):
/// a malformed request, an object the object routes refuse, a request `cairn ui`'s guard
/// refuses, an asset it lacks. `docs/openapi.yaml` lists both.
pub const ROUTE_CODES: &[&str] = &[
    "invalid_json",
    "no_token",
    "foreign_host",
    "foreign_origin",
    "unknown_asset",
    "unknown_verb",
    "missing_argument",
    "invalid_id",
    "hash_mismatch",
    "invalid_object",
    "dangling",
];

/// An error answer with `code`, one of the engine's or of [`ROUTE_CODES`].
pub fn error(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
    debug_assert!(
        ROUTE_CODES.contains(&code) || code.parse::<cairn_engine::Code>().is_ok(),
        "{code} is neither an engine code nor among ROUTE_CODES"
    );
    ApiError {
        status,
        code,
        message: message.into(),
    }
}

/// Runs `f` on a blocking thread; a panic in it is a 500 `internal` answer.
pub async fn run_blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("request failed: {e}"),
        )
    })
}

pub fn parse<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            "invalid_json",
            format!("request body: {e}"),
        )
    })
}

/// HTTP status of an outcome: 200, or 409 for a refusal (exit status 1).
pub fn outcome_status(exit: u8) -> StatusCode {
    if exit == 0 {
        StatusCode::OK
    } else {
        StatusCode::CONFLICT
    }
}

/// HTTP status of an error, from its stable code (`cairn_engine::Code`)
/// and exit status. The one place codes become statuses: the body keeps the code and
/// message (and `/v1/call` the exit status), so a client gets the command's own answer back
/// whatever the status.
pub fn error_status(code: &str, exit: u8) -> StatusCode {
    match code {
        // What the request names is not there.
        "unknown_id" | "unknown_ref" | "unknown_remote" | "not_on_remote" | "not_a_worktree"
        | "not_a_mount" | "no_checkpoint" | "no_task" | "unknown_grant" | "unknown_request"
        | "store_missing" => StatusCode::NOT_FOUND,
        // Only a person may do it (grant a listed request).
        "not_permitted" => StatusCode::FORBIDDEN,
        // It is there, but busy, or in a state that refuses the request.
        "blocked"
        | "not_empty"
        | "worktree_exists"
        | "worktree_moved"
        | "remote_exists"
        | "branch_exists"
        | "repository_busy"
        | "mount_busy"
        | "not_mounted"
        | "store_busy"
        | "interrupted"
        | "ref_moved"
        | "confirmation_needed"
        | "too_many_requests" => StatusCode::CONFLICT,
        "remote_timeout" => StatusCode::GATEWAY_TIMEOUT,
        "remote_failed" | "remote_corrupt" | "remote_format" | "remote_credentials" => {
            StatusCode::BAD_GATEWAY
        }
        "no_space" => StatusCode::INSUFFICIENT_STORAGE,
        // Well-formed, but not something the command can do.
        _ if exit == cairn_engine::EXIT_USAGE => StatusCode::UNPROCESSABLE_ENTITY,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The request `POST /v1/{name}` with `body` asks for, and the directory it runs from: its
/// `"cwd"`, else `/` (refused for a verb that takes its directory from the cwd when the
/// body names none).
pub fn verb_request(name: &str, body: &Bytes) -> Result<(Utf8PathBuf, Request), ApiError> {
    let Some(spec) = Verb::named(name).filter(|v| v.on(Face::Route)) else {
        return Err(error(
            StatusCode::NOT_FOUND,
            "unknown_verb",
            format!("no verb {name:?}"),
        ));
    };
    let mut args: serde_json::Map<String, Value> = if body.is_empty() {
        serde_json::Map::new()
    } else {
        parse(body)?
    };
    let cwd = match args.remove("cwd") {
        // No caller's directory to default to: a directory left out would mean `/`.
        None => {
            if let Some(name) = spec
                .default_directory()
                .filter(|name| args.get(name).is_none_or(Value::is_null))
            {
                return Err(error(
                    StatusCode::BAD_REQUEST,
                    "missing_argument",
                    format!(
                        "{verb}: give {name:?} (or a \"cwd\" to take it from)",
                        verb = spec.name()
                    ),
                ));
            }
            Utf8PathBuf::from("/")
        }
        Some(Value::String(c)) if Utf8Path::new(&c).is_absolute() => Utf8PathBuf::from(c),
        Some(other) => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                "invalid_path",
                format!("cwd must be an absolute path, not {other}"),
            ));
        }
    };
    let request = spec
        .request(args)
        .map_err(|e| error(StatusCode::BAD_REQUEST, "invalid_arguments", e.to_string()))?;
    Ok((cwd, request))
}

/// The answer of `POST /v1/{verb}`: the outcome's JSON object (200, or 409 for a
/// refusal), or the error's with the status of its code.
pub fn verb_answer(result: Result<Outcome, Error>) -> (StatusCode, Value) {
    match result {
        Ok(outcome) => (outcome_status(outcome.exit()), outcome.to_json()),
        Err(e) => (
            error_status(e.code(), e.exit()),
            crate::output::error_json(&e),
        ),
    }
}

/// Resolves on SIGTERM or SIGINT, saying on stderr that `who` stops.
pub async fn shutdown_signal(who: &str) {
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
    eprintln!("{who}: stopping; finishing running requests");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Statuses HTTP clients expect: 400 only for a malformed request (the server's own
    /// codes), never for a well-formed one, and never a 500 for a remote's failure.
    #[test]
    fn an_errors_status_comes_from_its_code() {
        let usage = cairn_engine::EXIT_USAGE;
        let store = cairn_engine::EXIT_STORE;
        for (code, exit, status) in [
            ("unknown_id", usage, 404),
            ("unknown_ref", usage, 404),
            ("unknown_remote", usage, 404),
            ("not_a_worktree", usage, 404),
            ("unknown_request", usage, 404),
            ("not_permitted", usage, 403),
            ("too_many_requests", usage, 409),
            ("not_empty", usage, 409),
            ("blocked", usage, 409),
            ("interrupted", store, 409),
            ("invalid_path", usage, 422),
            ("ambiguous_id", usage, 422),
            ("too_large", usage, 422),
            ("remote_failed", store, 502),
            ("remote_corrupt", store, 502),
            ("remote_timeout", store, 504),
            ("no_space", store, 507),
            ("corrupt", store, 500),
            ("io", store, 500),
        ] {
            assert_eq!(error_status(code, exit).as_u16(), status, "{code}");
        }
        let remote = cairn_engine::Error::from(remote::RemoteError::Unknown {
            name: "nowhere".into(),
        });
        assert_eq!(error_status(remote.code(), remote.exit()).as_u16(), 404);
    }
}
