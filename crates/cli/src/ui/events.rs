//! `GET /v1/events`: server-sent events, one `store` event each time the store changes.
//! A change is a write to the store's database file, seen with inotify on the store's
//! folder, so the writes of any process count (agents' commands with no server included).
//! Writes close together are one event: sent once they pause for [`DEBOUNCE`].

use std::convert::Infallible;
use std::mem::MaybeUninit;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use camino::Utf8Path;
use futures_util::Stream;
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::error::{Error, io_error};

/// Writes closer together than this are one event.
pub const DEBOUNCE: Duration = Duration::from_millis(100);

/// Writes that go on without a pause are one event this often.
pub const LONGEST_WAIT: Duration = Duration::from_millis(500);

/// How often an idle event stream sends a comment, so proxies and the browser keep it.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The store's changes, counted: each change (debounced) adds one to the count.
#[derive(Clone)]
pub struct StoreChanges {
    seq: watch::Receiver<u64>,
    /// Cancelled when the server stops: every event stream ends then.
    stop: CancellationToken,
}

impl StoreChanges {
    /// Starts watching the store folder `store` (its database file). Must run inside the
    /// server's runtime; the watch lasts as long as the process.
    pub fn watch(store: &Utf8Path, stop: CancellationToken) -> Result<StoreChanges, Error> {
        let fd = inotify::init(CreateFlags::CLOEXEC)
            .map_err(|e| io_error(format!("{store}: watching for changes"), e.into()))?;
        inotify::add_watch(
            &fd,
            store.as_std_path(),
            WatchFlags::MODIFY | WatchFlags::MOVED_TO | WatchFlags::CREATE,
        )
        .map_err(|e| io_error(format!("{store}: watching for changes"), e.into()))?;
        let changed = Arc::new(Notify::new());
        let database = cas::DATABASE_FILE.as_bytes();
        {
            let changed = changed.clone();
            std::thread::Builder::new()
                .name("cairn-ui-watch".into())
                .spawn(move || {
                    let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
                    let mut reader = inotify::Reader::new(&fd, &mut buf);
                    loop {
                        match reader.next() {
                            Ok(event) => {
                                let lost = event.events().contains(ReadFlags::QUEUE_OVERFLOW);
                                let ours = event
                                    .file_name()
                                    .is_some_and(|name| name.to_bytes() == database);
                                if lost || ours {
                                    changed.notify_one();
                                }
                            }
                            Err(Errno::INTR) => {}
                            Err(e) => {
                                tracing::warn!("watching the store stopped: {e}");
                                return;
                            }
                        }
                    }
                })
                .map_err(|e| io_error("starting the store watch", e))?;
        }
        let (tx, seq) = watch::channel(0u64);
        tokio::spawn(async move {
            loop {
                changed.notified().await;
                // One event once the writes pause for DEBOUNCE (a command writes the
                // file a few times), or at the latest after LONGEST_WAIT.
                let latest = tokio::time::Instant::now() + LONGEST_WAIT;
                loop {
                    tokio::select! {
                        () = changed.notified() => {}
                        () = tokio::time::sleep(DEBOUNCE) => break,
                        () = tokio::time::sleep_until(latest) => break,
                    }
                }
                tx.send_modify(|n| *n += 1);
            }
        });
        Ok(StoreChanges { seq, stop })
    }
}

/// `GET /v1/events`: `event: store` with `{"seq": N}` at each change, a keep-alive comment
/// every [`KEEP_ALIVE`]; ends when the server stops. A slow client misses nothing it needs:
/// it gets the latest count when it reads next, never a queue.
pub async fn events(
    State(changes): State<StoreChanges>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let StoreChanges { mut seq, stop } = changes;
    seq.mark_unchanged();
    let stream = futures_util::stream::unfold((seq, stop), |(mut seq, stop)| async move {
        tokio::select! {
            changed = seq.changed() => {
                changed.ok()?;
                let n = *seq.borrow_and_update();
                let event = Event::default()
                    .event("store")
                    .data(serde_json::json!({ "seq": n }).to_string());
                Some((Ok(event), (seq, stop)))
            }
            () = stop.cancelled() => None,
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
}
