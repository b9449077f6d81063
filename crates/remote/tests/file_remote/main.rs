//! Push, fetch, refs and gc against a `file://` remote (object_store's folder backend):
//! the protocol without an S3 engine. The engines themselves are tested end to end in
//! `tests/cli/remote_commands.rs`.

mod chunks;
mod formats;
mod frames;
mod gc;
mod hostile;
mod locations;
mod refs;
mod transfer;
mod util;
