//! A progress bar on stderr (files and bytes), only when stderr is a terminal; for a
//! running check (`check NAME`, whose items are seconds) its seconds so far.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};

use cairn_client::ProgressEvent;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Bar {
    bar: Option<ProgressBar>,
    files: AtomicU64,
    total_files: AtomicU64,
}

impl Bar {
    /// Shows a progress event from a server on this terminal's bar.
    pub fn show(&self, e: &ProgressEvent) {
        if let Some(b) = &self.bar {
            if b.prefix() != e.what {
                b.set_style(style_for(&e.what));
                b.set_message(message(&e.what, e.files, e.total_files));
                b.set_prefix(e.what.clone());
                b.reset();
            }
            b.set_length(e.total_bytes);
            b.set_position(e.bytes);
            b.set_message(message(&e.what, e.files, e.total_files));
            if e.done {
                b.finish_and_clear();
            }
        }
    }
}

impl Bar {
    /// A bar that draws nothing (the terminal is not the caller's).
    pub fn hidden() -> Bar {
        Bar {
            bar: None,
            files: AtomicU64::new(0),
            total_files: AtomicU64::new(0),
        }
    }

    pub fn new() -> Bar {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            bar.set_style(style_for(""));
            bar
        });
        Bar {
            bar,
            files: AtomicU64::new(0),
            total_files: AtomicU64::new(0),
        }
    }
}

/// Whether `what` is a running check, whose items are seconds.
fn is_check(what: &str) -> bool {
    what.starts_with("check ")
}

/// Files and bytes with a bar; for a check, its seconds alone.
fn style_for(what: &str) -> ProgressStyle {
    let template = if is_check(what) {
        "{prefix:>9} {spinner} {msg}"
    } else {
        "{prefix:>9} [{bar:30}] {msg}, {binary_bytes}/{binary_total_bytes} ({binary_bytes_per_sec}, {eta})"
    };
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

/// `12/600 files`, or for a check `12 s` (`of 600 s` with a timeout).
fn message(what: &str, done: u64, total: u64) -> String {
    match (is_check(what), total) {
        (false, _) => format!("{done}/{total} files"),
        (true, 0) => format!("{done} s"),
        (true, _) => format!("{done} s of {total} s"),
    }
}

impl cairn_engine::Progress for Bar {
    fn start(&self, what: &str, files: u64, bytes: u64) {
        if let Some(b) = &self.bar {
            // Style and message first: each setter draws.
            b.set_style(style_for(what));
            b.set_message(message(what, 0, files));
            b.set_prefix(what.to_owned());
            b.set_length(bytes);
            b.reset();
            self.files.store(0, Ordering::Relaxed);
            self.total_files.store(files, Ordering::Relaxed);
        }
    }

    fn advance(&self, files: u64, bytes: u64) {
        if let Some(b) = &self.bar {
            let done = self.files.fetch_add(files, Ordering::Relaxed) + files;
            b.inc(bytes);
            let what = b.prefix();
            if is_check(&what) || done.is_multiple_of(256) {
                b.set_message(message(
                    &what,
                    done,
                    self.total_files.load(Ordering::Relaxed),
                ));
            }
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
