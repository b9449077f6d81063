//! `cairn fsck`: verify the store.

use cairn_engine::{FsckOptions, FsckOutcome, Request, verbs};

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View};

/// Verify every object and reference.
#[derive(clap::Args, Debug)]
#[group(skip)]
#[command(display_order = 24)]
pub struct Args {}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        super::with_default_view(Request::Fsck(self.into()))
    }
}

impl From<Args> for FsckOptions {
    fn from(_: Args) -> FsckOptions {
        FsckOptions {}
    }
}

impl Human for verbs::Fsck {
    fn report(o: &FsckOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, fsck(o))
    }
}

fn fsck(o: &FsckOutcome) -> String {
    let mut human: String = o.problems.iter().map(|p| format!("{p}\n")).collect();
    let c = &o.checked;
    let summary = format!(
        "checked {} blobs, {} trees, {} snapshots, {} references",
        c.blobs, c.trees, c.snapshots, c.references
    );
    if o.problems.is_empty() {
        human.push_str(&format!("{summary}: no problems\n"));
    } else {
        human.push_str(&format!("{summary}\n"));
    }
    human
}
