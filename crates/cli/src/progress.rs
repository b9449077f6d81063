//! A progress bar on stderr (files and bytes), only when stderr is a terminal.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use cairn_client::ProgressEvent;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Bar {
    bar: Option<ProgressBar>,
    files: AtomicU64,
    total_files: AtomicU64,
    /// Where a request's progress goes when it runs in `cairn serve` for another process.
    sink: Option<Sink>,
    stream: Mutex<StreamState>,
}

/// Receives progress events of commands run for another process.
pub type Sink = Arc<dyn Fn(&ProgressEvent) + Send + Sync>;

#[derive(Default)]
struct StreamState {
    event: ProgressEvent,
    last: Option<Instant>,
}

thread_local! {
    static SINK: std::cell::RefCell<Option<Sink>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with the progress of the commands it runs sent to `sink` (no bar is drawn).
pub fn with_sink<T>(sink: Sink, f: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            SINK.with(|s| *s.borrow_mut() = None);
        }
    }
    SINK.with(|s| *s.borrow_mut() = Some(sink));
    let _reset = Reset;
    f()
}

/// Events this far apart at most (and at the start and end of each phase).
const STREAM_EVERY: Duration = Duration::from_millis(100);

impl Bar {
    fn emit(&self, update: impl FnOnce(&mut ProgressEvent), force: bool) {
        let Some(sink) = &self.sink else { return };
        let mut state = self.stream.lock().unwrap_or_else(PoisonError::into_inner);
        update(&mut state.event);
        let due = force || state.last.is_none_or(|t| t.elapsed() >= STREAM_EVERY);
        if due {
            state.last = Some(Instant::now());
            sink(&state.event);
        }
    }

    /// Shows a progress event from a server on this terminal's bar.
    pub fn show(&self, e: &ProgressEvent) {
        if let Some(b) = &self.bar {
            if b.prefix() != e.what {
                b.reset();
                b.set_prefix(e.what.clone());
            }
            b.set_length(e.total_bytes);
            b.set_position(e.bytes);
            b.set_message(format!("{}/{}", e.files, e.total_files));
            if e.done {
                b.finish_and_clear();
            }
        }
    }
}

impl Bar {
    pub fn new() -> Bar {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{prefix:>9} [{bar:30}] {msg} files, {binary_bytes}/{binary_total_bytes} ({binary_bytes_per_sec}, {eta})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            bar.set_style(style);
            bar
        });
        let sink = SINK.with(|s| s.borrow().clone());
        // Serving another process: its progress goes to the sink, never to this terminal.
        let here = sink.is_none() && !crate::context::serving_request();
        Bar {
            bar: if here { bar } else { None },
            files: AtomicU64::new(0),
            total_files: AtomicU64::new(0),
            sink,
            stream: Mutex::new(StreamState::default()),
        }
    }
}

impl fs_manager::Progress for Bar {
    fn start(&self, what: &str, files: u64, bytes: u64) {
        self.emit(
            |e| {
                *e = ProgressEvent {
                    what: what.to_owned(),
                    total_files: files,
                    total_bytes: bytes,
                    ..ProgressEvent::default()
                }
            },
            true,
        );
        if let Some(b) = &self.bar {
            b.reset();
            b.set_prefix(what.to_owned());
            b.set_length(bytes);
            self.files.store(0, Ordering::Relaxed);
            self.total_files.store(files, Ordering::Relaxed);
            b.set_message(format!("0/{files}"));
        }
    }

    fn advance(&self, files: u64, bytes: u64) {
        self.emit(
            |e| {
                e.files += files;
                e.bytes += bytes;
            },
            false,
        );
        if let Some(b) = &self.bar {
            let done = self.files.fetch_add(files, Ordering::Relaxed) + files;
            b.inc(bytes);
            if done.is_multiple_of(256) {
                b.set_message(format!(
                    "{done}/{}",
                    self.total_files.load(Ordering::Relaxed)
                ));
            }
        }
    }

    fn finish(&self) {
        self.emit(|e| e.done = true, true);
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
