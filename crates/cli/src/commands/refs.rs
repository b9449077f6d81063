//! `cairn ref set|rm|list`: named pointers that keep snapshots alive.

use cairn_engine::{RefListOptions, RefRmOptions, RefSetOptions, RefsOutcome, Request, verbs};
use clap::Subcommand;

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View};

/// Named pointers that keep snapshots alive for gc.
#[derive(clap::Args, Debug)]
#[command(name = "ref", display_order = 20)]
pub struct Args {
    #[command(subcommand)]
    action: RefAction,
}

#[derive(Subcommand, Debug)]
enum RefAction {
    /// Point NAME (or NAME@REMOTE) at a snapshot.
    Set {
        /// The ref name, or NAME@REMOTE for a ref on a remote.
        name: String,
        /// The snapshot (ref name or id prefix).
        snapshot: String,
        /// For NAME@REMOTE: only if it still holds this snapshot (without: only if it does
        /// not exist).
        #[arg(long, value_name = "OLD")]
        expect: Option<String>,
    },
    /// Remove a ref (NAME@REMOTE: on the remote; ID@REMOTE: unpin a snapshot pushed by id).
    Rm {
        /// The ref name, NAME@REMOTE or ID@REMOTE.
        name: String,
        /// For NAME@REMOTE: only if it still holds this snapshot.
        #[arg(long, value_name = "OLD")]
        expect: Option<String>,
    },
    /// List refs (with --remote: a remote's).
    List {
        /// The remote whose refs to list.
        #[arg(long, value_name = "NAME")]
        remote: Option<String>,
    },
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        let request = match self.action {
            RefAction::Set {
                name,
                snapshot,
                expect,
            } => Request::RefSet(RefSetOptions {
                name,
                snapshot,
                expect,
            }),
            RefAction::Rm { name, expect } => Request::RefRm(RefRmOptions { name, expect }),
            RefAction::List { remote } => Request::RefList(RefListOptions { remote }),
        };
        super::with_default_view(request)
    }
}

impl Human for verbs::RefSet {
    fn report(o: &RefsOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, refs(o, |r| format!("{} -> {}\n", r.name, r.snapshot)))
    }
}

impl Human for verbs::RefRm {
    fn report(o: &RefsOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(
            json,
            refs(o, |r| {
                format!("removed ref {} (was {})\n", r.name, r.snapshot)
            }),
        )
    }
}

impl Human for verbs::RefList {
    fn report(o: &RefsOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, refs(o, |r| format!("{}\t{}\n", r.snapshot, r.name)))
    }
}

fn refs(o: &RefsOutcome, line: impl Fn(&cairn_engine::RefEntry) -> String) -> String {
    o.refs.iter().map(line).collect()
}
