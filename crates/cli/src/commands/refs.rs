use clap::Subcommand;

use crate::context::Ctx;
use crate::error::CliError;
use crate::output::Report;

#[derive(Subcommand, Debug)]
pub enum RefAction {
    /// Point NAME at a snapshot.
    Set {
        /// The ref name.
        name: String,
        /// The snapshot (ref name or id prefix).
        snapshot: String,
    },
    /// Remove a ref.
    Rm {
        /// The ref name.
        name: String,
    },
    /// List refs.
    List,
}

#[derive(serde::Serialize)]
struct RefOut {
    name: String,
    snapshot: cas::SnapshotId,
}

pub fn run(ctx: &Ctx, action: RefAction) -> Result<Report, CliError> {
    match action {
        RefAction::Set { name, snapshot } => {
            cas::validate_ref_name(&name)?;
            let store = ctx.open_or_create()?;
            let id = crate::context::resolve_snapshot(&store.reader()?, &snapshot)?;
            store.set_ref(&name, id)?;
            let human = format!("{name} -> {id}\n");
            Ok(Report::new(
                serde_json::json!({ "refs": [RefOut { name, snapshot: id }] }),
                human,
            ))
        }
        RefAction::Rm { name } => {
            let store = ctx.open_existing()?;
            let id = store.remove_ref(&name)?;
            let human = format!("removed ref {name} (was {id})\n");
            Ok(Report::new(
                serde_json::json!({ "refs": [RefOut { name, snapshot: id }] }),
                human,
            ))
        }
        RefAction::List => {
            let store = ctx.open_read_only()?;
            let refs: Vec<RefOut> = store
                .reader()?
                .refs()?
                .into_iter()
                .map(|(name, snapshot)| RefOut { name, snapshot })
                .collect();
            let human: String = refs
                .iter()
                .map(|r| format!("{}\t{}\n", r.snapshot, r.name))
                .collect();
            Ok(Report::new(serde_json::json!({ "refs": refs }), human))
        }
    }
}
