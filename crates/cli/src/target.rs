//! Where a request runs: the `cairn serve` holding the store, when one answers on its
//! socket, else an engine in this process. Either way the caller gets the typed outcome.

use crate::error::{CliError, io_error, opened_as};
use cairn_engine::{Call, Engine, Error, Outcome, Request};
use camino::{Utf8Path, Utf8PathBuf};
use std::collections::HashMap;
use std::sync::Arc;

use crate::progress::Bar;

/// Options for stores this process opens itself: it waits, saying so, while another
/// process holds the store.
pub fn open_options() -> cairn_engine::OpenOptions {
    with_format_1_tables(cairn_engine::OpenOptions {
        on_wait: Some(|root| {
            eprintln!("cairn: waiting for store {root}: another process holds it");
        }),
        ..cairn_engine::OpenOptions::from_env()
    })
}

/// `options` with where each layer of this binary keeps what a format 1 store held in
/// tables of its own, so such a store opened here is upgraded whole.
pub fn with_format_1_tables(mut options: cairn_engine::OpenOptions) -> cairn_engine::OpenOptions {
    options.format_1_tables.extend(fs_manager::FORMAT_1_TABLES);
    options.format_1_tables.extend(cairn_git::FORMAT_1_TABLES);
    options
}

/// `engine` with the backends every engine of this binary has: git (gitoxide) and, for
/// `run`, the sandbox (Landlock, through this binary's own helper).
pub fn with_backends(engine: Engine) -> Engine {
    let engine = engine.with_git(cairn_git::Gitoxide);
    match sandbox() {
        Ok(sandbox) => engine.with_sandbox(sandbox),
        // Without its own path this binary cannot start its helper: `run` is refused.
        Err(_) => engine,
    }
}

/// The sandbox of this binary: Landlock, through its own hidden `__sandbox-exec`.
pub fn sandbox() -> Result<sandbox::Landlock, Error> {
    let exe = std::env::current_exe().map_err(|e| io_error("current executable", e))?;
    Ok(sandbox::Landlock::new(exe, ["__sandbox-exec"]))
}

/// An engine in this process for `store`, opened per call.
pub fn local_engine(store: &Utf8Path) -> Engine {
    with_backends(Engine::per_call(store, open_options()))
}

/// An engine in this process, or a server.
pub enum Target {
    Local {
        engine: Box<Engine>,
        offline: bool,
    },
    Server {
        client: cairn_client::Client,
        store: Utf8PathBuf,
        offline: bool,
    },
}

impl Target {
    /// The server holding `store` if its socket is there, else an engine here.
    pub fn for_store(store: &Utf8Path, offline: bool) -> Target {
        match cairn_client::Client::new(&cairn_client::Client::socket_of(store)) {
            Ok(client) => Target::Server {
                client: client.offline(offline),
                store: store.to_owned(),
                offline,
            },
            Err(_) => Target::Local {
                engine: Box::new(local_engine(store)),
                offline,
            },
        }
    }

    /// The target for `request`: as [`Target::for_store`], but a mount is served by the
    /// process holding the store, so one is started for it when none answers; and so is
    /// one for a check, whose view is then a mount, where FUSE is available (if it cannot
    /// start, the check runs here, in a checkout).
    pub fn for_request(
        store: &Utf8Path,
        offline: bool,
        request: &Request,
    ) -> Result<Target, Error> {
        if matches!(request, Request::Verify(_))
            && cairn_engine::fuse_available().is_ok()
            // A store, not a folder a wrong `--store` names: the server's log goes there.
            && store.join(cas::DATABASE_FILE).is_file()
            && cairn_client::Client::connect(&cairn_client::Client::socket_of(store)).is_err()
            && let Err(e) = start_for_mounts(store)
        {
            tracing::debug!("verify: no server for a mounted view, checking out: {e}");
        }
        Ok(
            Target::server(store, offline, request)?.unwrap_or_else(|| Target::Local {
                engine: Box::new(local_engine(store)),
                offline,
            }),
        )
    }

    /// The server holding `store` if its socket is there (one is started for a mount when
    /// none answers), else `None`.
    pub fn server(
        store: &Utf8Path,
        offline: bool,
        request: &Request,
    ) -> Result<Option<Target>, Error> {
        let socket = cairn_client::Client::socket_of(store);
        let mount = matches!(request, Request::Mount(_));
        if mount && cairn_client::Client::connect(&socket).is_err() {
            start_for_mounts(store)?;
        }
        Ok(match Target::for_store(store, offline) {
            server @ Target::Server { .. } => Some(server),
            // The server that answered was stopping (it had nothing left): start another.
            Target::Local { .. } if mount => {
                start_for_mounts(store)?;
                match Target::for_store(store, offline) {
                    server @ Target::Server { .. } => Some(server),
                    Target::Local { .. } => None,
                }
            }
            Target::Local { .. } => None,
        })
    }

    /// Runs `request` as if from `cwd`, its progress drawn on `bar` (a server streams it
    /// only if `stream`). Returns the outcome and its exit status (0, or 1 for a refusal).
    pub fn call(
        &self,
        cwd: &Utf8Path,
        request: Request,
        bar: &Bar,
        stream: bool,
    ) -> Result<(Outcome, u8), Error> {
        match self {
            Target::Local { engine, offline } => local(engine, cwd, request, bar, *offline),
            Target::Server { store, offline, .. } => {
                let answer = match self.on_server(cwd, request.clone(), bar, stream) {
                    Some(answer) => answer,
                    // A stale socket (the server was killed): open the store here instead.
                    None => local(&local_engine(store), cwd, request.clone(), bar, *offline),
                };
                // The server was stopping (it had nothing left) or is gone since: a mount
                // is served by another, started for it once the stopping one's socket is
                // gone.
                let mut answer = answer;
                let started = std::time::Instant::now();
                loop {
                    match answer {
                        Err(e)
                            if e.code() == "needs_server"
                                && matches!(request, Request::Mount(_))
                                && started.elapsed() < SERVER_STOPS_WITHIN =>
                        {
                            std::thread::sleep(std::time::Duration::from_millis(50));
                            start_for_mounts(store)?;
                            answer = Target::for_store(store, *offline)
                                .on_server(cwd, request.clone(), bar, stream)
                                .unwrap_or(Err(e));
                        }
                        answer => return answer,
                    }
                }
            }
        }
    }

    /// [`Target::call`] on the server; `None` if none answers on its socket (nothing was
    /// sent) or this is no server.
    pub fn on_server(
        &self,
        cwd: &Utf8Path,
        request: Request,
        bar: &Bar,
        stream: bool,
    ) -> Option<Result<(Outcome, u8), Error>> {
        let Target::Server { client, .. } = self else {
            return None;
        };
        let mut show = |e: &cairn_client::ProgressEvent| bar.show(e);
        let on_progress = stream.then_some(&mut show as &mut dyn FnMut(&_));
        match client.run(cwd, request, on_progress) {
            Ok(answer) => Some(answer),
            Err(e @ cairn_client::ClientError::Unavailable { .. }) => {
                tracing::debug!("not using a server: {e}");
                None
            }
            Err(e) => Some(Err(CliError::Client(e).into())),
        }
    }
}

fn local(
    engine: &Engine,
    cwd: &Utf8Path,
    request: Request,
    bar: &Bar,
    offline: bool,
) -> Result<(Outcome, u8), Error> {
    // This process is the command line: a person's terminal.
    let call = Call::new(cwd.to_owned())
        .by_person(true)
        .with_progress(bar)
        .offline(offline);
    let outcome = engine.handle(&call, request)?;
    let exit = outcome.exit();
    Ok((outcome, exit))
}

/// How long a `mount` refused by a stopping server tries to reach the next one.
const SERVER_STOPS_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

/// Starts `cairn serve --for-mounts` for `store` in the background, and returns once it
/// answers (a `mount` or `verify` without a running server); it stops once it has no mount
/// and no request left.
pub fn start_for_mounts(store: &Utf8Path) -> Result<(), Error> {
    let exe = std::env::current_exe().map_err(|e| io_error("finding the cairn binary", e))?;
    let dir = store.join("mounts");
    std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
    let log_path = dir.join("serve.log");
    let log = std::fs::File::options()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| io_error(&log_path, e))?;
    use std::os::unix::process::CommandExt;
    let mut child = std::process::Command::new(exe)
        .args(["--store", store.as_str(), "serve", "--for-mounts"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        // Its own session: the terminal's hangup or ^C does not reach the mounts.
        .process_group(0)
        .spawn()
        .map_err(|e| io_error("starting cairn serve", e))?;
    let socket = cairn_client::Client::socket_of(store);
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_secs(30) {
        if cairn_client::Client::connect(&socket).is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            let last = log.lines().last().unwrap_or("").to_owned();
            return Err(CliError::ServerExited { status, last }.into());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Err(CliError::ServerSilent {
        socket,
        log: log_path,
    }
    .into())
}

/// One engine per store for the calls of a long-running process with no server (`cairn
/// mcp`): calls that run at once share it, as `cairn serve`'s requests share its engine,
/// instead of each opening the store and contending for its lock; once no call holds it,
/// the store is closed, so other processes can have it between calls. One call at a time
/// opens, closes or creates a store while the others wait: two handles on one store in
/// this process would refuse each other as if another process held it.
pub struct Shared {
    /// Each store a call holds, or is opening, closing or creating.
    slots: std::sync::Mutex<HashMap<Utf8PathBuf, Slot>>,
    /// Told when a store is opened or stops being busy.
    changed: tokio::sync::Notify,
    /// How many calls wait to write each store: reads that come meanwhile wait behind
    /// them. Locked after `slots` when both are.
    writes_waiting: std::sync::Mutex<HashMap<Utf8PathBuf, usize>>,
    options: cairn_engine::OpenOptions,
}

/// A store in [`Shared`].
enum Slot {
    /// Open, held by `holders` calls.
    Open { engine: Arc<Engine>, holders: usize },
    /// Not held open: `holders` calls that only read open it read-only each for itself.
    /// A call that writes waits until they are done, and reads that come while one waits
    /// wait behind it ([`Shared::writes_waiting`]), so reads one after another cannot
    /// keep it waiting.
    Reading { holders: usize },
    /// One call is opening or closing it, or creating it (it was missing): the others wait.
    Busy,
}

/// What a [`Claim`] holds of its store's [`Slot`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// One of the holders of the open store.
    Shares,
    /// One of the calls reading it.
    Reads,
    /// The call has the store busy.
    Busy,
}

/// A call's engine from [`Shared::hold`]; dropping the last one of a store closes the store
/// before any other call can open it again.
pub struct HeldEngine {
    engine: Arc<Engine>,
    /// Let go after `engine`.
    _claim: Claim,
}

impl std::ops::Deref for HeldEngine {
    type Target = Engine;
    fn deref(&self) -> &Engine {
        &self.engine
    }
}

/// A call to write a store counted in [`Shared::writes_waiting`] while it gets the store
/// (however that ends: got, failed or cancelled).
struct WriteWaits {
    shared: Arc<Shared>,
    store: Utf8PathBuf,
}

impl WriteWaits {
    fn new(shared: &Arc<Shared>, store: &Utf8Path) -> WriteWaits {
        let mut waiting =
            (shared.writes_waiting.lock()).unwrap_or_else(std::sync::PoisonError::into_inner);
        *waiting.entry(store.to_owned()).or_default() += 1;
        WriteWaits {
            shared: shared.clone(),
            store: store.to_owned(),
        }
    }
}

impl Drop for WriteWaits {
    fn drop(&mut self) {
        let mut waiting =
            (self.shared.writes_waiting.lock()).unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = waiting.get_mut(&self.store) {
            *n -= 1;
            if *n == 0 {
                waiting.remove(&self.store);
            }
        }
        drop(waiting);
        // Reads held back by it go on.
        self.shared.changed.notify_waiters();
    }
}

/// A call's place in a store's [`Slot`], given back when dropped.
struct Claim {
    shared: Arc<Shared>,
    store: Utf8PathBuf,
    role: Role,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut slots = self.shared.slots();
        match (self.role, slots.get_mut(&self.store)) {
            (Role::Reads, Some(Slot::Reading { holders, .. })) => {
                *holders -= 1;
                if *holders == 0 {
                    slots.remove(&self.store);
                }
            }
            (Role::Shares, Some(Slot::Open { holders, .. })) => {
                *holders -= 1;
                if *holders > 0 {
                    return;
                }
                // The last holder closes it (its own engine went first), the store busy
                // meanwhile.
                let last = slots.insert(self.store.clone(), Slot::Busy);
                drop(slots);
                drop(last);
                slots = self.shared.slots();
                slots.remove(&self.store);
            }
            (Role::Busy, Some(Slot::Busy)) => {
                slots.remove(&self.store);
            }
            _ => {}
        }
        drop(slots);
        self.shared.changed.notify_waiters();
    }
}

impl Claim {
    /// Opens the store this claim has busy (trying once) and shares it; a missing store is
    /// left busy for this call, which creates it on an engine of its own.
    fn open(mut self, options: &cairn_engine::OpenOptions) -> Result<HeldEngine, Error> {
        match Engine::open(&self.store, options) {
            Ok(engine) => {
                let engine = Arc::new(with_backends(engine));
                let open = Slot::Open {
                    engine: engine.clone(),
                    holders: 1,
                };
                self.shared.slots().insert(self.store.clone(), open);
                self.role = Role::Shares;
                self.shared.changed.notify_waiters();
                Ok(HeldEngine {
                    engine,
                    _claim: self,
                })
            }
            Err(e) if matches!(opened_as(&e), Some(cas::OpenError::Missing { .. })) => {
                let engine = Engine::per_call(&self.store, self.shared.options.clone());
                Ok(HeldEngine {
                    engine: Arc::new(with_backends(engine)),
                    _claim: self,
                })
            }
            Err(e) => Err(e),
        }
    }
}

impl Shared {
    /// Stores are opened with `options` (waiting up to their lock timeout for a store
    /// another process holds).
    pub fn new(options: cairn_engine::OpenOptions) -> Shared {
        Shared {
            slots: Default::default(),
            changed: tokio::sync::Notify::new(),
            writes_waiting: Default::default(),
            options,
        }
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<Utf8PathBuf, Slot>> {
        self.slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether a call waits to write `store`.
    fn write_waits(&self, store: &Utf8Path) -> bool {
        let waiting =
            (self.writes_waiting.lock()).unwrap_or_else(std::sync::PoisonError::into_inner);
        waiting.get(store).is_some_and(|n| *n > 0)
    }

    fn claim(self: &Arc<Self>, store: &Utf8Path, role: Role) -> Claim {
        Claim {
            shared: self.clone(),
            store: store.to_owned(),
            role,
        }
    }

    /// An engine for a call that only reads ([`Request::reads_only`]): the open one if a
    /// call holds `store`, else one of the call's own that opens the store read-only for
    /// the call (waiting while a call here opens or closes it). Opening the store for
    /// writing writes its file even if the call writes nothing, which whoever watches the
    /// store (`cairn ui`) takes for a change. Dropping the future stops the wait.
    pub async fn hold_to_read(self: &Arc<Self>, store: &Utf8Path) -> HeldEngine {
        loop {
            // Made before the look, so a change after it wakes this call.
            let changed = self.changed.notified();
            // `None`: wait; else the open engine to share, or none to read on one's own.
            let taken = {
                let mut slots = self.slots();
                match slots.get_mut(store) {
                    Some(Slot::Open { engine, holders }) => {
                        *holders += 1;
                        Some(Some(engine.clone()))
                    }
                    _ if self.write_waits(store) => None,
                    Some(Slot::Reading { holders }) => {
                        *holders += 1;
                        Some(None)
                    }
                    None => {
                        slots.insert(store.to_owned(), Slot::Reading { holders: 1 });
                        Some(None)
                    }
                    Some(Slot::Busy) => None,
                }
            };
            let Some(shared) = taken else {
                changed.await;
                continue;
            };
            return match shared {
                Some(engine) => HeldEngine {
                    engine,
                    _claim: self.claim(store, Role::Shares),
                },
                None => HeldEngine {
                    engine: Arc::new(with_backends(Engine::per_call(store, self.options.clone()))),
                    _claim: self.claim(store, Role::Reads),
                },
            };
        }
    }

    /// The engine of `store`, shared with every call holding it now; opened if none does,
    /// waiting while another process holds the store. A missing store is this call's
    /// alone, on an engine that opens it per call (to create it), until it is done.
    /// Dropping the future stops the wait.
    pub async fn hold(self: &Arc<Self>, store: &Utf8Path) -> Result<HeldEngine, Error> {
        let _waiting = WriteWaits::new(self, store);
        let started = std::time::Instant::now();
        let mut said = false;
        loop {
            // Made before the look, so a change after it wakes this call.
            let changed = self.changed.notified();
            let claim = {
                let mut slots = self.slots();
                match slots.get_mut(store) {
                    Some(Slot::Open { engine, holders }) => {
                        *holders += 1;
                        return Ok(HeldEngine {
                            engine: engine.clone(),
                            _claim: self.claim(store, Role::Shares),
                        });
                    }
                    Some(Slot::Busy | Slot::Reading { .. }) => None,
                    None => {
                        slots.insert(store.to_owned(), Slot::Busy);
                        Some(self.claim(store, Role::Busy))
                    }
                }
            };
            let Some(claim) = claim else {
                changed.await;
                continue;
            };
            // Tried without waiting, so the wait can be given up between tries.
            let options = cairn_engine::OpenOptions {
                create: false,
                lock_timeout: std::time::Duration::ZERO,
                on_wait: None,
                ..self.options.clone()
            };
            let opened = tokio::task::spawn_blocking(move || claim.open(&options))
                .await
                .map_err(|source| CliError::Task {
                    what: format!("opening store {store}"),
                    source,
                })?;
            let e = match opened {
                Ok(held) => return Ok(held),
                Err(e) => e,
            };
            match opened_as(&e) {
                Some(cas::OpenError::LockTimeout { .. })
                    if started.elapsed() < self.options.lock_timeout =>
                {
                    if !said {
                        said = true;
                        if let Some(notify) = self.options.on_wait {
                            notify(store);
                        }
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                Some(cas::OpenError::LockTimeout { path, .. }) => {
                    return Err(cas::OpenError::LockTimeout {
                        path: path.clone(),
                        waited: started.elapsed(),
                    }
                    .into());
                }
                _ => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Calls that overlap in part, each letting go of the store on its own thread while
    /// the next takes it, with no wait allowed for another process: every call gets the
    /// store, and once all are done it is closed.
    #[test]
    fn a_call_taking_the_store_as_the_last_one_lets_go_never_finds_it_held() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Utf8PathBuf::try_from(dir.path().join("store")).expect("utf-8 path");
        let no_wait = cairn_engine::OpenOptions {
            lock_timeout: std::time::Duration::ZERO,
            ..open_options()
        };
        let create = cairn_engine::OpenOptions {
            create: true,
            ..no_wait.clone()
        };
        drop(cas::Store::open(&store, &create).expect("a store"));
        let shared = Arc::new(Shared::new(no_wait.clone()));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            for round in 0..100 {
                let calls: Vec<_> = (0..4)
                    .map(|_| {
                        let (shared, store) = (shared.clone(), store.clone());
                        tokio::spawn(async move {
                            let held = shared.hold(&store).await?;
                            tokio::task::spawn_blocking(move || drop(held))
                                .await
                                .expect("let go");
                            Ok::<_, Error>(())
                        })
                    })
                    .collect();
                for call in calls {
                    let answer = call.await.expect("the call ran");
                    answer.unwrap_or_else(|e| panic!("round {round}: {e}"));
                }
            }
        });
        // Between calls the store is closed: another process can have it.
        cas::Store::open(&store, &no_wait).expect("the store was let go");
    }

    /// A write waiting for a read holds back the reads that come after it, then they share
    /// the store it opened: reads one after another never keep a write out.
    #[test]
    fn a_waiting_write_goes_before_later_reads() {
        use std::time::Duration;
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Utf8PathBuf::try_from(dir.path().join("store")).expect("utf-8 path");
        let options = cairn_engine::OpenOptions {
            create: true,
            ..open_options()
        };
        drop(cas::Store::open(&store, &options).expect("a store"));
        let shared = Arc::new(Shared::new(open_options()));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let first = shared.hold_to_read(&store).await;
            let write = tokio::spawn({
                let (shared, store) = (shared.clone(), store.clone());
                async move {
                    let held = shared.hold(&store).await?;
                    // Held while the later read comes in.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    tokio::task::spawn_blocking(move || drop(held))
                        .await
                        .expect("let go");
                    Ok::<_, Error>(())
                }
            });
            let later = tokio::spawn({
                let (shared, store) = (shared.clone(), store.clone());
                async move {
                    // After the write has started waiting.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    let read = shared.hold_to_read(&store).await;
                    let shares = matches!(shared.slots().get(&store), Some(Slot::Open { .. }));
                    drop(read);
                    shares
                        .then_some(())
                        .ok_or("the later read did not share the write's store")
                }
            });
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert!(!write.is_finished(), "the write went in beside a read");
            assert!(
                !later.is_finished(),
                "a later read went before the waiting write"
            );
            drop(first);
            write
                .await
                .expect("the write ran")
                .expect("the write got the store");
            later.await.expect("the read ran").expect("the later read");

            // A write given up while it waits holds back no read.
            let first = shared.hold_to_read(&store).await;
            let write = tokio::spawn({
                let (shared, store) = (shared.clone(), store.clone());
                async move { shared.hold(&store).await.map(drop) }
            });
            tokio::time::sleep(Duration::from_millis(50)).await;
            write.abort();
            assert!(write.await.is_err_and(|e| e.is_cancelled()));
            let read = tokio::time::timeout(Duration::from_secs(10), shared.hold_to_read(&store));
            drop(read.await.expect("a read waited for a write given up"));
            drop(first);
        });
    }
}
