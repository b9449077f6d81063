//! `remote`: cairn's snapshots on other machines, through an object store that already
//! exists (any S3-compatible engine, or a folder for `file://` remotes), never a server
//! of our own.
//!
//! A remote holds objects in packs of tens of MB, each with an index that says which
//! objects it holds and where ([`layout`]); a push sends only what the remote's indexes
//! lack, and the pack holding its snapshots goes last, so a snapshot is visible only once
//! everything it reaches is there. A fetch reads just the byte ranges it needs and checks
//! every object as a local read does before anything is stored. Refs on a remote are
//! chains of create-only objects, so two machines updating one ref never overwrite each
//! other, on S3 and on a folder alike ([`refs`]).
//!
//! It owns the remote layout, the transport and the records a store keeps about its
//! remotes (their configuration, what it last saw of their refs, a cache of their
//! indexes). It must not know worktrees, git, the command line or HTTP.

mod attestations;
mod catalog;
mod config;
mod credentials;
mod deps;
mod error;
mod fetch;
mod gc;
pub mod layout;
mod lazy;
mod probe;
mod push;
pub mod refs;
mod transport;
mod url;

pub use attestations::ReceivedAttestation;
/// Pushes and fetches report through the workspace's one progress trait.
pub use cas::{Progress, Silent};
pub use catalog::{Catalog, Detached, LIST_MARGIN_MILLIS, Listing, locations_read_here};
pub use config::{
    CONDEMNED, Conditional, INDEX_CACHE, LOCATIONS, Probe, REMOTES, RemoteConfig, RemotesOwner,
    TRACKING, add_remote, remote_config, remotes, remove_remote, set_tracking, tracking_ref,
    tracking_refs, validate_remote_name,
};
pub use deps::{layer_record, put_layer_record};
pub use error::{CorruptCause, InvalidRemote, RemoteError};
pub use fetch::{FetchOutcome, Need, fetch, fetch_blobs_by_id};
pub use gc::{REPACK_AT, REPACK_BELOW, RemoteGcOptions, RemoteGcOutcome, gc};
pub use lazy::{LazyBlobs, PREFETCH, PrefetchProgress, SharedStore, missing_blobs};
pub use probe::probe;
pub use push::{RemotePushOutcome, push};
pub use refs::{RefUpdate, RemoteRef};
pub use transport::{REQUESTS, Remote};
pub use url::{RemoteUrl, UrlError};

/// The remote used when none is named.
pub const DEFAULT_REMOTE: &str = "origin";
