//! Progress reporting, implemented by the caller (the CLI draws a bar on a terminal).

/// Receives progress of long operations. Called from worker threads.
pub trait Progress: Sync {
    /// The work ahead: files and bytes (either may grow while walking).
    fn start(&self, _what: &str, _files: u64, _bytes: u64) {}
    /// Files and bytes done since the last call.
    fn advance(&self, _files: u64, _bytes: u64) {}
    /// The operation is over.
    fn finish(&self) {}
}

/// Reports nothing.
pub struct Silent;
impl Progress for Silent {}
