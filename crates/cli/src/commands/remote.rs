//! `cairn remote add|rm|list`: where snapshots go to be shared.

use cairn_engine::{
    RemoteAddOptions, RemoteListOptions, RemoteRmOptions, RemotesOutcome, Request, verbs,
};
use clap::Subcommand;

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View};

/// Remotes: where snapshots go to be shared across machines.
#[derive(clap::Args, Debug)]
#[command(display_order = 21)]
pub struct Args {
    #[command(subcommand)]
    action: RemoteAction,
}

#[derive(Subcommand, Debug)]
enum RemoteAction {
    /// Add a remote: s3://BUCKET[/PREFIX] on any S3-compatible engine, or file:///PATH.
    /// Credentials come from the AWS environment variables and files, never the store.
    Add {
        /// Its name here (the default remote is `origin`).
        name: String,
        /// s3://BUCKET[/PREFIX] or file:///PATH.
        url: String,
        /// The S3 endpoint, for engines other than AWS (http:// allowed).
        #[arg(long, value_name = "URL")]
        endpoint: Option<String>,
        /// The S3 region.
        #[arg(long, value_name = "R")]
        region: Option<String>,
    },
    /// Forget a remote (nothing on it changes).
    Rm {
        /// Its name.
        name: String,
    },
    /// List remotes.
    List,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        let request = match self.action {
            RemoteAction::Add {
                name,
                url,
                endpoint,
                region,
            } => Request::RemoteAdd(RemoteAddOptions {
                name,
                url,
                endpoint,
                region,
            }),
            RemoteAction::Rm { name } => Request::RemoteRm(RemoteRmOptions { name }),
            RemoteAction::List => Request::RemoteList(RemoteListOptions {}),
        };
        super::with_default_view(request)
    }
}

impl Human for verbs::RemoteAdd {
    fn report(o: &RemotesOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, remotes(o, "added "))
    }
}

impl Human for verbs::RemoteRm {
    fn report(o: &RemotesOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, remotes(o, "removed "))
    }
}

impl Human for verbs::RemoteList {
    fn report(o: &RemotesOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, remotes(o, ""))
    }
}

fn remotes(o: &RemotesOutcome, verb: &str) -> String {
    o.remotes
        .iter()
        .map(|r| {
            let endpoint = r
                .endpoint
                .as_deref()
                .map(|e| format!(" (endpoint {e})"))
                .unwrap_or_default();
            let refs = if r.conditional_writes {
                ""
            } else {
                " [refs refused: the engine ignores conditional writes]"
            };
            format!("{verb}{}\t{}{endpoint}{refs}\n", r.name, r.url)
        })
        .collect()
}
