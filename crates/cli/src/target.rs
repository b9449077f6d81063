//! Where a request runs: the `cairn serve` holding the store, when one answers on its
//! socket, else an engine in this process. Either way the caller gets the typed outcome.

use cairn_engine::{Call, Engine, Error, Outcome, Request};
use camino::{Utf8Path, Utf8PathBuf};

use crate::progress::Bar;

/// Options for stores this process opens itself: it waits, saying so, while another
/// process holds the store.
pub fn open_options() -> cas::OpenOptions {
    cas::OpenOptions {
        on_wait: Some(|root| {
            eprintln!("cairn: waiting for store {root}: another process holds it");
        }),
        ..cas::OpenOptions::from_env()
    }
}

/// `engine` with the git backend every engine of this binary has (gitoxide).
pub fn with_git(engine: Engine) -> Engine {
    engine.with_git(cairn_git::Gitoxide)
}

/// An engine in this process for `store`, opened per call.
fn local_engine(store: &Utf8Path) -> Engine {
    with_git(Engine::per_call(store, open_options()))
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
    /// process holding the store, so one is started for it when none answers.
    pub fn for_request(
        store: &Utf8Path,
        offline: bool,
        request: &Request,
    ) -> Result<Target, Error> {
        if matches!(request, Request::Mount(_))
            && cairn_client::Client::connect(&cairn_client::Client::socket_of(store)).is_err()
        {
            start_for_mounts(store)?;
        }
        Ok(Target::for_store(store, offline))
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
            Target::Server {
                client,
                store,
                offline,
            } => {
                let mut show = |e: &cairn_client::ProgressEvent| bar.show(e);
                let on_progress = stream.then_some(&mut show as &mut dyn FnMut(&_));
                match client.run(cwd, request.clone(), on_progress) {
                    Ok(answer) => answer,
                    // A stale socket (the server was killed): open the store here instead.
                    Err(e @ cairn_client::ClientError::Unavailable { .. }) => {
                        tracing::debug!("not using a server: {e}");
                        let engine = local_engine(store);
                        local(&engine, cwd, request, bar, *offline)
                    }
                    Err(e) => Err(Error::failure("server", e.to_string())),
                }
            }
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
    let call = Call::new(cwd.to_owned())
        .with_progress(bar)
        .offline(offline);
    let outcome = engine.handle(&call, request)?;
    let exit = outcome.exit();
    Ok((outcome, exit))
}

/// Starts `cairn serve --for-mounts` for `store` in the background, and returns once it
/// answers (a `mount` without a running server).
pub fn start_for_mounts(store: &Utf8Path) -> Result<(), Error> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::failure("io", format!("finding the cairn binary: {e}")))?;
    let dir = store.join("mounts");
    std::fs::create_dir_all(&dir).map_err(|e| Error::failure("io", format!("{dir}: {e}")))?;
    let log_path = dir.join("serve.log");
    let log = std::fs::File::options()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| Error::failure("io", format!("{log_path}: {e}")))?;
    use std::os::unix::process::CommandExt;
    let mut child = std::process::Command::new(exe)
        .args(["--store", store.as_str(), "serve", "--for-mounts"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        // Its own session: the terminal's hangup or ^C does not reach the mounts.
        .process_group(0)
        .spawn()
        .map_err(|e| Error::failure("io", format!("starting cairn serve: {e}")))?;
    let socket = cairn_client::Client::socket_of(store);
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_secs(30) {
        if cairn_client::Client::connect(&socket).is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            let last = log.lines().last().unwrap_or("").to_owned();
            return Err(Error::failure(
                "server",
                format!("cairn serve for the mount exited ({status}): {last}"),
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Err(Error::failure(
        "server",
        format!(
            "cairn serve for the mount did not answer on {socket} within 30 s (see {log_path})"
        ),
    ))
}
