//! `cairn gc`: drop what nothing reaches, in the store or on a remote.

use cairn_engine::{GcOptions, GcOutcome, Request, verbs};

use crate::commands::{IntoRequest, Requested};
use crate::output::Report;
use crate::render::{Human, View};

/// Drop what nothing reaches (with --remote: on that remote).
#[derive(clap::Args, Debug)]
#[command(display_order = 25)]
pub struct Args {
    /// Report what would be removed; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// First drop op-log entries older than DAYS days; no size budget drops newer ones.
    #[arg(long, value_name = "DAYS", alias = "prune-ops")]
    keep_within: Option<u32>,
    /// Then drop older history, oldest first, until the store's database file takes at
    /// most BYTES, mount layers not counted (never refs, worktree heads, named
    /// checkpoints, task baselines, the change `undo` would revert or what is within
    /// --keep-within).
    #[arg(long, value_name = "BYTES")]
    max_size: Option<u64>,
    /// Collect a remote's garbage: packs no remote ref or pinned snapshot reaches.
    #[arg(long, value_name = "NAME")]
    remote: Option<String>,
    /// With --remote: hours a pack stays condemned before it is deleted (default 24),
    /// so a push in progress elsewhere is never cut.
    #[arg(long, value_name = "HOURS", requires = "remote")]
    grace: Option<u32>,
}

impl IntoRequest for Args {
    fn request(self, _json: bool) -> Requested {
        let view = self.view();
        Ok((Request::Gc(self.into()), view))
    }
}

impl Args {
    /// A pruning run says what it dropped against the size asked for.
    pub fn view(&self) -> View {
        View {
            pruning: self.keep_within.is_some() || self.max_size.is_some(),
            max_size: self.max_size,
            ..View::default()
        }
    }
}

impl From<Args> for GcOptions {
    fn from(args: Args) -> GcOptions {
        GcOptions {
            dry_run: args.dry_run,
            keep_within: args.keep_within,
            max_size: args.max_size,
            remote: args.remote,
            grace: args.grace,
        }
    }
}

impl Human for verbs::Gc {
    fn report(o: &GcOutcome, json: serde_json::Value, view: &View) -> Report {
        Report::new(json, gc(o, view))
    }
}

fn gc(o: &GcOutcome, view: &View) -> String {
    let verb = if o.dry_run { "would remove" } else { "removed" };
    if let Some(r) = &o.remote {
        let repacked = match r.packs_repacked {
            0 => String::new(),
            n => format!("; {n} small packs repacked into {}", r.packs_written),
        };
        return format!(
            "{verb} {} packs ({} bytes); {} packs condemned, waiting for the grace period; {} rescued; {} old ref entries dropped; {} objects reachable{repacked}\n",
            r.packs_removed,
            r.bytes_freed,
            r.packs_condemned,
            r.packs_rescued,
            r.ref_entries_dropped,
            r.reachable
        );
    }
    let count = |k: &str| o.removed.iter().filter(|r| r.kind == k).count();
    let mut human = format!(
        "{verb} {} objects ({} snapshots, {} trees, {} blobs), {} bytes\n",
        o.removed.len(),
        count("snapshot"),
        count("tree"),
        count("blob"),
        o.bytes_freed,
    );
    if view.pruning {
        human.push_str(&format!(
            "{} {} op-log entries, {} unnamed checkpoints\n",
            if o.dry_run { "would prune" } else { "pruned" },
            o.ops_pruned,
            o.checkpoints_pruned
        ));
        for r in &o.retained {
            let mut what = r.reason.clone();
            for part in [&r.name, &r.worktree].into_iter().flatten() {
                what.push(' ');
                what.push_str(part);
            }
            human.push_str(&format!(
                "kept by {what}: {} bytes (snapshot {})\n",
                r.bytes, r.snapshot
            ));
        }
    }
    if !o.dry_run {
        human.push_str(&format!(
            "store file {} -> {} bytes; store folder {} bytes\n",
            o.file_bytes_before, o.file_bytes_after, o.store_bytes
        ));
        if let Some(max) = view.max_size.filter(|max| o.file_bytes_after > *max) {
            human.push_str(&format!(
                "store file still past --max-size {max}: what is kept above, and the file's own overhead, take more\n"
            ));
        }
    }
    human
}
