//! Progress reporting, one trait for every long operation of cairn (captures, checkouts,
//! pushes, fetches), implemented by the caller (the command line draws a bar on a terminal,
//! `serve` streams events).

/// Receives progress of long operations. Called from worker threads.
pub trait Progress: Sync {
    /// The work ahead: items (files, objects) and bytes (either may grow while walking).
    fn start(&self, _what: &str, _items: u64, _bytes: u64) {}
    /// Items and bytes done since the last call.
    fn advance(&self, _items: u64, _bytes: u64) {}
    /// The operation (or this step of it) is over.
    fn finish(&self) {}
}

/// Reports nothing.
pub struct Silent;
impl Progress for Silent {}
