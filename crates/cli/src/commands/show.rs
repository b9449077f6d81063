//! `cairn show OBJECT`: a file's bytes or a tree listing.

use cairn_engine::{Request, ShowOptions, ShowOutcome, verbs};

use crate::commands::{IntoRequest, Requested};
use crate::output::{Report, quote_path};
use crate::render::{Human, View, check_marks};

/// Print a file's bytes or a tree listing: SNAP, SNAP:PATH, or any object id.
#[derive(clap::Args, Debug)]
#[command(display_order = 18)]
pub struct Args {
    /// A snapshot (ref name or id prefix), optionally `:PATH`, or a tree or blob id.
    object: String,
}

impl IntoRequest for Args {
    fn request(self, json: bool) -> Requested {
        super::with_default_view(Request::Show(self.options(json)))
    }
}

impl Args {
    /// The engine's options; a file's bytes are read only to be printed (not with `json`).
    pub fn options(self, json: bool) -> ShowOptions {
        ShowOptions {
            object: self.object,
            contents: !json,
        }
    }
}

impl Human for verbs::Show {
    fn report(o: &ShowOutcome, json: serde_json::Value, _: &View) -> Report {
        match o {
            ShowOutcome::Blob { contents, .. } => {
                Report::new(json, "").with_bytes(contents.clone().unwrap_or_default())
            }
            ShowOutcome::Tree {
                entries, checks, ..
            } => {
                let mut human = String::new();
                if !checks.is_empty() {
                    human = format!("checks: {}\n", check_marks(checks));
                }
                human += &entries
                    .iter()
                    .map(|e| {
                        let kind = match e.kind.as_str() {
                            "executable" => "exec",
                            "symlink" => "link",
                            other => other,
                        };
                        format!(
                            "{kind} {} {:>10}\t{}\n",
                            e.id,
                            e.size,
                            quote_path(e.name.as_bytes())
                        )
                    })
                    .collect::<String>();
                Report::new(json, human)
            }
        }
    }
}
