//! `cairn policy [WORKTREE]`, `policy allow`, `policy revoke`: the grants, and the question
//! `policy allow` asks on a terminal, naming what it grants.

use std::io::IsTerminal;

use cairn_engine::{
    GrantSet, Outcome, PolicyAllowOptions, PolicyOptions, PolicyOutcome, PolicyRevokeOptions,
    Request, verbs,
};
use camino::{Utf8Path, Utf8PathBuf};
use clap::Subcommand;

use crate::commands::{IntoRequest, Requested};
use crate::context::prompt;
use crate::error::{CliError, Error};
use crate::output::Report;
use crate::progress::Bar;
use crate::render::{Human, View};
use crate::target::Target;

/// A worktree's remembered sandbox grants (what `cairn run` may write beyond the
/// worktree, and the network); reading stays allowed everywhere.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, display_order = 11)]
pub struct Args {
    /// The worktree (default: the one holding the current directory).
    worktree: Option<Utf8PathBuf>,
    #[command(subcommand)]
    action: Option<PolicyAction>,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        let request = match self.action {
            None => Request::Policy(PolicyOptions {
                worktree: self.worktree,
                take_once: false,
            }),
            Some(PolicyAction::Allow {
                grant,
                yes,
                confirm,
                reason,
            }) => Request::PolicyAllow(PolicyAllowOptions {
                worktree: grant.worktree,
                write: grant.write,
                network: grant.network,
                once: grant.once,
                yes,
                confirm,
                request: grant.request,
                reason,
            }),
            Some(PolicyAction::Revoke { grant }) => Request::PolicyRevoke(PolicyRevokeOptions {
                worktree: grant.worktree,
                write: grant.write,
                network: grant.network,
                once: grant.once,
                request: grant.request,
            }),
        };
        super::with_default_view(request)
    }
}

#[derive(Subcommand, Debug)]
enum PolicyAction {
    /// Remember a grant for every later `cairn run` of the worktree (or, with --once, the
    /// next one only), or grant a listed request (--request ID). A path must be absolute,
    /// existing and canonical, never the store's folder nor a pseudo file system (/proc,
    /// /sys, /dev). Granting is a person's decision: on a terminal it asks, naming what is
    /// granted; without one it needs --yes, and a system directory or the user's
    /// credentials (/etc, /usr, ~/.ssh, ~/.aws, ...) must be named again with --confirm
    /// PATH. Recorded in the op log.
    Allow {
        #[command(flatten)]
        grant: Grant,
        /// Confirm the grant without being asked (no terminal).
        #[arg(long)]
        yes: bool,
        /// Confirm a grant of a system directory or the user's credentials by naming it
        /// (repeatable); --yes is not enough for those.
        #[arg(long, value_name = "PATH")]
        confirm: Vec<Utf8PathBuf>,
        /// Why, kept in the op log.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
    },
    /// Take a remembered grant back (with --once: a next-run-only grant), as it was
    /// granted, or deny a listed request (--request ID). Recorded in the op log.
    Revoke {
        #[command(flatten)]
        grant: Grant,
    },
}

/// The grants `allow` and `revoke` name.
#[derive(clap::Args, Debug)]
struct Grant {
    /// The worktree.
    worktree: Utf8PathBuf,
    /// Writing beneath PATH (repeatable).
    #[arg(long, value_name = "PATH", required_unless_present_any = ["network", "request"])]
    write: Vec<Utf8PathBuf>,
    /// TCP bind and connect.
    #[arg(long)]
    network: bool,
    /// For the next run only.
    #[arg(long)]
    once: bool,
    /// The request an agent made (`cairn policy` lists them): `allow` grants what it asks,
    /// `revoke` denies it.
    #[arg(long, value_name = "ID", conflicts_with_all = ["write", "network", "once"])]
    request: Option<u64>,
}

/// Asks on this terminal before granting, naming what is granted (and, for each system
/// directory or credentials path, asking for it to be typed again). Without a terminal, or
/// with `--yes` given, the options go as they are: the engine then wants `--yes` and
/// `--confirm`.
pub fn ask(
    target: &Target,
    cwd: &Utf8Path,
    mut options: PolicyAllowOptions,
) -> Result<PolicyAllowOptions, Error> {
    if options.yes || !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Ok(options);
    }
    let (root, what, once, asked) = match options.request {
        None => (
            options.worktree.clone(),
            GrantSet {
                writable: options.write.clone(),
                network: options.network,
            },
            options.once,
            String::new(),
        ),
        Some(id) => {
            let listed = target.call(
                cwd,
                Request::Policy(PolicyOptions {
                    worktree: Some(options.worktree.clone()),
                    take_once: false,
                }),
                &Bar::hidden(),
                false,
            )?;
            let Outcome::Policy(listed) = listed.0 else {
                return Ok(options);
            };
            // An unknown request: the engine says so.
            let Some(r) = listed.requests.into_iter().find(|r| r.id == id) else {
                return Ok(options);
            };
            let why = r.reason.map(|w| format!(": {w}")).unwrap_or_default();
            (
                listed.worktree,
                r.grant,
                r.once,
                format!("(request {id}, asked by {}{why})\n", r.by),
            )
        }
    };
    let runs = if once {
        "the next `cairn run`"
    } else {
        "every later `cairn run`"
    };
    let mut question = format!("Grant {runs} of {root}:\n");
    for path in &what.writable {
        question.push_str(&format!("  write beneath {path}\n"));
    }
    if what.network {
        question.push_str("  TCP bind and connect (the network)\n");
    }
    question.push_str(&asked);
    question.push_str("Grant it? [y/N] ");
    let answer = prompt(&question)?;
    let refused = || -> Error {
        CliError::NotGranted {
            root: root.to_owned(),
        }
        .into()
    };
    if !matches!(answer.as_str(), "y" | "Y" | "yes") {
        return Err(refused());
    }
    let home = std::env::var_os("HOME").and_then(|h| std::fs::canonicalize(h).ok());
    for path in &what.writable {
        if let Some(why) = path_policy::sensitive(path.as_std_path(), home.as_deref()) {
            let typed = prompt(&format!(
                "Writing beneath {path} reaches {why}. Type the path to grant it: "
            ))?;
            if typed != path.as_str() {
                return Err(refused());
            }
            options.confirm.push(path.clone());
        }
    }
    options.yes = true;
    Ok(options)
}

impl Human for verbs::Policy {
    fn report(o: &PolicyOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, policy(o))
    }
}

impl Human for verbs::PolicyAllow {
    fn report(o: &PolicyOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, policy(o))
    }
}

impl Human for verbs::PolicyRevoke {
    fn report(o: &PolicyOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, policy(o))
    }
}

impl Human for verbs::PolicyRequest {
    fn report(o: &PolicyOutcome, json: serde_json::Value, _: &View) -> Report {
        Report::new(json, policy(o))
    }
}

/// A worktree's sandbox grants, one per line.
fn policy(o: &PolicyOutcome) -> String {
    let mut human = format!(
        "{}: writable: the worktree; readable: everything\n",
        o.worktree
    );
    for (set, when) in [(&o.policy.always, ""), (&o.policy.once, " (next run only)")] {
        for path in &set.writable {
            human.push_str(&format!("  write {path}{when}\n"));
        }
        if set.network {
            human.push_str(&format!("  network{when}\n"));
        }
    }
    if o.policy.is_empty() {
        human.push_str("  no grants\n");
    }
    for r in &o.requests {
        let mut what: Vec<String> = r
            .grant
            .writable
            .iter()
            .map(|p| format!("write {p}"))
            .collect();
        if r.grant.network {
            what.push("network".into());
        }
        let when = if r.once { " (next run only)" } else { "" };
        let why = r
            .reason
            .as_deref()
            .map(|w| format!(": {w}"))
            .unwrap_or_default();
        human.push_str(&format!(
            "  request {}: {}{when}, asked by {} at {}{why}\n",
            r.id,
            what.join(", "),
            r.by,
            r.asked.round(jiff::Unit::Second).unwrap_or(r.asked),
        ));
    }
    if let Some(message) = &o.message {
        human.push_str(message);
        human.push('\n');
    }
    human
}
