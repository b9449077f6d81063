//! `cairn show OBJECT`: a file's bytes or a tree listing.

use cairn_engine::ShowOptions;

/// Print a file's bytes or a tree listing: SNAP, SNAP:PATH, or any object id.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A snapshot (ref name or id prefix), optionally `:PATH`, or a tree or blob id.
    object: String,
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
