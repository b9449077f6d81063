//! What every request to `cairn ui` passes first, assets included: its `Host` must be the
//! server's own (a page of another site that a DNS rebinding points at 127.0.0.1 names its
//! own host), so must its `Origin` when it has one (a cross-site request), and it must
//! carry the token of the printed URL (`?token=`, the `X-Cairn-Token` header, or the
//! `cairn_ui` cookie that a `GET /?token=` sets). Every answer carries the page's
//! security headers.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use subtle::ConstantTimeEq;

/// The cookie that carries the token once the page was opened.
pub const COOKIE: &str = "cairn_ui";

/// The header that carries the token, for programs.
pub const TOKEN_HEADER: &str = "x-cairn-token";

/// The page's content policy: its own scripts, styles and requests only; no inline code.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'";

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

    /// How the request proves it holds the token, if it does.
    fn token_in(&self, request: &Request) -> Option<Proof> {
        let query = request.uri().query().unwrap_or("");
        if query
            .split('&')
            .filter_map(|pair| pair.strip_prefix("token="))
            .any(|t| self.is_token(t))
        {
            return Some(Proof::Query);
        }
        let headers = request.headers();
        let header = headers.get(TOKEN_HEADER).and_then(|v| v.to_str().ok());
        if header.is_some_and(|t| self.is_token(t)) {
            return Some(Proof::Header);
        }
        cookies(headers)
            .filter_map(|(name, value)| (name == COOKIE).then_some(value))
            .any(|t| self.is_token(t))
            .then_some(Proof::Cookie)
    }

    /// How `request` proves it holds the token, or why it is refused.
    fn check(&self, request: &Request) -> Result<Proof, Refused> {
        let headers = request.headers();
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
        if !host.is_some_and(|h| self.hosts.iter().any(|ours| ours == h)) {
            return Err(Refused::Host(format!(
                "Host {} is not this server's ({} or {}): a page of another site may not use it",
                host.unwrap_or("(none)"),
                self.hosts[0],
                self.hosts[1]
            )));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("(not text)");
            if !self.origins.iter().any(|ours| ours == origin) {
                return Err(Refused::Origin(format!(
                    "a request from {origin} is not this server's page's: refused"
                )));
            }
        }
        match self.token_in(request) {
            Some(proof) => Ok(proof),
            None if request.method() == Method::GET && request.uri().path() == "/" => {
                Err(Refused::PageWithoutToken)
            }
            None => Err(Refused::NoToken),
        }
    }
}

/// Why a request is refused.
enum Refused {
    /// Another host's name (DNS rebinding): the message.
    Host(String),
    /// Another site's page: the message.
    Origin(String),
    /// The page opened without its token.
    PageWithoutToken,
    /// Anything else without the token.
    NoToken,
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        match self {
            Refused::Host(message) => {
                super::refusal(StatusCode::FORBIDDEN, "foreign_host", message)
            }
            Refused::Origin(message) => {
                super::refusal(StatusCode::FORBIDDEN, "foreign_origin", message)
            }
            Refused::PageWithoutToken => {
                (StatusCode::UNAUTHORIZED, Html(NO_TOKEN_PAGE)).into_response()
            }
            Refused::NoToken => super::refusal(
                StatusCode::UNAUTHORIZED,
                "no_token",
                "no valid token: open the URL `cairn ui` printed (its ?token=), or send the token in the X-Cairn-Token header",
            ),
        }
    }
}

/// Where a request's token came from.
#[derive(PartialEq, Eq)]
enum Proof {
    Query,
    Header,
    Cookie,
}

/// The page a browser gets at `/` without the token.
const NO_TOKEN_PAGE: &str = "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>cairn</title></head>\n<body><p>This page needs its token: open the URL that <code>cairn ui</code> printed (it ends in <code>?token=</code>...).</p></body></html>\n";

/// The `name=value` pairs of a request's `Cookie` headers.
fn cookies(headers: &HeaderMap) -> impl Iterator<Item = (&str, &str)> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
}

/// The middleware: refuses what [`Guard`] refuses; sets the cookie on the page opened with
/// the token; adds the security headers to every answer.
pub async fn check(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let data = request.uri().path().starts_with("/v1/");
    let opened = request.method() == Method::GET && request.uri().path() == "/";
    let mut response = match guard.check(&request) {
        Ok(proof) => {
            let mut response = next.run(request).await;
            if opened && proof == Proof::Query {
                let cookie = format!(
                    "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
                    guard.token
                );
                if let Ok(value) = HeaderValue::from_str(&cookie) {
                    response.headers_mut().append(header::SET_COOKIE, value);
                }
            }
            response
        }
        Err(refused) => refused.into_response(),
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
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
        let pass = |uri, headers: &[(&str, &str)]| guard.check(&request(uri, headers)).is_ok();
        assert!(pass("/v1/x?token=ab12", &[host]));
        assert!(pass("/v1/x?a=b&token=ab12", &[("host", "localhost:4000")]));
        assert!(pass("/v1/x", &[host, (TOKEN_HEADER, "ab12")]));
        assert!(pass("/v1/x", &[host, ("cookie", "a=b; cairn_ui=ab12")]));
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
        assert!(!pass("/v1/x", &[host, ("cookie", "other=ab12")]));
    }
}
