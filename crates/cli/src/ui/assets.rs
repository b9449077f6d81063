//! The page's files, embedded in the binary: every file of `src/ui/assets/`, listed by
//! `build.rs`. A request names one by its exact path there; nothing else is reachable.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// Every asset: its path under `src/ui/assets/` and its bytes.
static ASSETS: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/ui_assets.rs"));

/// The asset at `name`, if there is one.
pub fn asset(name: &str) -> Option<&'static [u8]> {
    ASSETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, bytes)| *bytes)
}

/// The `Content-Type` of an asset, from its name's extension.
fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("json") => "application/json",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("woff2") => "font/woff2",
        Some("txt" | "md") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// The answer with the asset `name`, or 404.
pub fn serve(name: &str) -> Response {
    match asset(name) {
        Some(bytes) => ([(header::CONTENT_TYPE, content_type(name))], bytes).into_response(),
        None => super::refusal(
            StatusCode::NOT_FOUND,
            "unknown_asset",
            format!("no asset {name:?}"),
        ),
    }
}

/// `GET /assets/{*file}`.
pub async fn file(Path(name): Path<String>) -> Response {
    serve(&name)
}

/// `GET /`: the page's shell.
pub async fn index() -> Response {
    serve("index.html")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shell_and_its_script_are_embedded() {
        assert!(asset("index.html").is_some_and(|b| !b.is_empty()));
        assert!(asset("app.js").is_some());
        assert!(asset("../Cargo.toml").is_none());
        // The script that vendors highlight.js is no asset.
        assert!(asset("vendor/highlight.min.js").is_some());
        assert!(asset("vendor.sh").is_none() && asset("../vendor.sh").is_none());
        assert_eq!(
            content_type("vendor/x.js"),
            "text/javascript; charset=utf-8"
        );
    }
}
