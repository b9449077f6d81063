//! What every request to `cairn ui` passes first: its `Host` must be the server's own (a
//! page of another site that a DNS rebinding points at 127.0.0.1 names its own host), so
//! must its `Origin` when it has one (a cross-site request). Everything but the page's
//! static files (`/assets/`, code in the binary that shows no data) must also carry the
//! token of the printed URL: `?token=` or the `X-Cairn-Token` header. There is no cookie:
//! a browser sends a cookie of 127.0.0.1 to every port of it, so another local server
//! would get the token. Every answer carries the page's security headers.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use subtle::ConstantTimeEq;

/// The header that carries the token, for programs.
pub const TOKEN_HEADER: &str = "x-cairn-token";

/// The page's content policy: its own scripts, styles and requests only; no inline code.
/// No page of another site may frame it (clicks lured onto its actions).
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'";

/// What a request must match.
pub struct Guard {
    token: String,
    /// The `Host` values that name this server.
    hosts: [String; 2],
    /// The `Origin` values of its own page.
    origins: [String; 2],
}

impl Guard {
    /// The guard of a server on 127.0.0.1:`port` with `token`.
    pub fn new(token: String, port: u16) -> Guard {
        let hosts = [format!("127.0.0.1:{port}"), format!("localhost:{port}")];
        let origins = hosts.clone().map(|h| format!("http://{h}"));
        Guard {
            token,
            hosts,
            origins,
        }
    }

    fn is_token(&self, given: &str) -> bool {
        given.as_bytes().ct_eq(self.token.as_bytes()).into()
    }

    fn has_token(&self, request: &Request) -> bool {
        let query = request.uri().query().unwrap_or("");
        let header = request.headers().get(TOKEN_HEADER);
        query
            .split('&')
            .filter_map(|pair| pair.strip_prefix("token="))
            .chain(header.and_then(|v| v.to_str().ok()))
            .any(|t| self.is_token(t))
    }

    /// The refusal of `request`, if it is refused.
    fn refusal(&self, request: &Request) -> Option<Response> {
        let headers = request.headers();
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
        if !host.is_some_and(|h| self.hosts.iter().any(|ours| ours == h)) {
            let message = format!(
                "Host {} is not this server's ({} or {}): a page of another site may not use it",
                host.unwrap_or("(none)"),
                self.hosts[0],
                self.hosts[1]
            );
            return Some(super::refusal(
                StatusCode::FORBIDDEN,
                "foreign_host",
                message,
            ));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("(not text)");
            if !self.origins.iter().any(|ours| ours == origin) {
                let message =
                    format!("a request from {origin} is not this server's page's: refused");
                return Some(super::refusal(
                    StatusCode::FORBIDDEN,
                    "foreign_origin",
                    message,
                ));
            }
        }
        let path = request.uri().path();
        if path.starts_with("/assets/") || self.has_token(request) {
            return None;
        }
        Some(if request.method() == Method::GET && path == "/" {
            (StatusCode::UNAUTHORIZED, Html(NO_TOKEN_PAGE)).into_response()
        } else {
            super::refusal(
                StatusCode::UNAUTHORIZED,
                "no_token",
                "no valid token: open the URL `cairn ui` printed (its ?token=), or send the token in the X-Cairn-Token header",
            )
        })
    }
}

/// The page a browser gets at `/` without the token. Its script opens the page again with
/// the token this tab was given, if it was (a reload: the page takes the token out of the
/// address bar).
const NO_TOKEN_PAGE: &str = "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>cairn</title><script type=\"module\" src=\"/assets/reopen.js\"></script></head>\n<body><p>This page needs its token: open the URL that <code>cairn ui</code> printed (it ends in <code>?token=</code>...).</p></body></html>\n";

/// The middleware: refuses what [`Guard`] refuses; adds the security headers to every
/// answer.
pub async fn check(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let data = request.uri().path().starts_with("/v1/");
    let mut response = match guard.refusal(&request) {
        None => next.run(request).await,
        Some(refused) => refused,
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(if data { "no-store" } else { "no-cache" }),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(uri: &str, headers: &[(&str, &str)]) -> Request {
        let mut builder = Request::builder().uri(uri);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(axum::body::Body::empty()).unwrap()
    }

    #[test]
    fn only_its_own_host_and_origin_with_the_token_pass() {
        let guard = Guard::new("ab12".into(), 4000);
        let host = ("host", "127.0.0.1:4000");
        let pass = |uri, headers: &[(&str, &str)]| guard.refusal(&request(uri, headers)).is_none();
        assert!(pass("/v1/x?token=ab12", &[host]));
        assert!(pass("/v1/x?a=b&token=ab12", &[("host", "localhost:4000")]));
        assert!(pass("/v1/x", &[host, (TOKEN_HEADER, "ab12")]));
        assert!(pass(
            "/v1/x",
            &[
                host,
                ("origin", "http://localhost:4000"),
                (TOKEN_HEADER, "ab12")
            ]
        ));
        assert!(!pass("/v1/x", &[host]));
        assert!(!pass("/v1/x?token=ab1", &[host]));
        assert!(!pass("/v1/x?token=ab12", &[("host", "127.0.0.1:4001")]));
        assert!(!pass("/v1/x?token=ab12", &[("host", "evil.example:4000")]));
        assert!(!pass("/v1/x?token=ab12", &[]));
        assert!(!pass(
            "/v1/x?token=ab12",
            &[host, ("origin", "http://evil.example")]
        ));
        // No cookie carries it (a cookie of 127.0.0.1 goes to every port).
        assert!(!pass("/v1/x", &[host, ("cookie", "cairn_ui=ab12")]));
        assert!(!pass("/", &[host]));
        assert!(pass("/?token=ab12", &[host]));
        // The page's static files need no token, but the Host and Origin rules hold.
        assert!(pass("/assets/app.js", &[host]));
        assert!(!pass("/assets/app.js", &[("host", "evil.example:4000")]));
        assert!(!pass(
            "/assets/app.js",
            &[host, ("origin", "http://evil.example")]
        ));
    }
}
