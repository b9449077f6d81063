//! The public operations on [`Worktrees`] (defined in `worktrees`).

use crate::WorktreeRecord;
use camino::Utf8Path;
use cas::{SnapshotId, Store};

use crate::worktrees::Worktrees;
use crate::{
    CaptureError, CaptureOptions, CaptureOutcome, CheckoutError, LiveState, RecoverError,
    RollbackError, TaskError, UndoError, WorktreeAcceptOutcome, WorktreeCheckoutOptions,
    WorktreeCheckoutOutcome, WorktreeCheckpointOptions, WorktreeCheckpointOutcome,
    WorktreeDiscardOutcome, WorktreeError, WorktreeOnboardOptions, WorktreeOnboardOutcome,
    WorktreeRecoverOutcome, WorktreeRollbackOptions, WorktreeRollbackOutcome, WorktreeUndoOutcome,
};

impl Worktrees {
    /// Snapshots directory `src` in place and registers it as a worktree (see
    /// [`WorktreeOnboardOptions`]).
    pub fn onboard(
        &self,
        store: &Store,
        src: &Utf8Path,
        options: &WorktreeOnboardOptions<'_>,
    ) -> Result<WorktreeOnboardOutcome, CaptureError> {
        worktree_state::capture::onboard(&self.kept, store, src, options)
    }

    /// A new snapshot of the worktree holding `path`, parent = its head.
    pub fn snapshot(
        &self,
        store: &Store,
        path: &Utf8Path,
        options: &CaptureOptions<'_>,
    ) -> Result<CaptureOutcome, CaptureError> {
        worktree_state::capture::snapshot(&self.kept, store, path, options)
    }

    /// Records what a command did to the worktree as operation `op` of its op log.
    pub fn record_change(
        &self,
        store: &Store,
        path: &Utf8Path,
        op: &str,
        options: &CaptureOptions<'_>,
    ) -> Result<CaptureOutcome, CaptureError> {
        worktree_state::capture::record_change(&self.kept, store, path, op, options)
    }

    /// The worktree's live files as a tree, recording nothing but its stat cache.
    pub fn live_state(
        &self,
        store: &Store,
        path: &Utf8Path,
        options: &CaptureOptions<'_>,
    ) -> Result<LiveState, CaptureError> {
        worktree_state::capture::live_state(&self.kept, store, path, options)
    }

    /// Hydrates `snapshot` into `dest` and registers it as a worktree.
    pub fn checkout(
        &self,
        store: &Store,
        snapshot: SnapshotId,
        dest: &Utf8Path,
        options: &WorktreeCheckoutOptions<'_>,
    ) -> Result<WorktreeCheckoutOutcome, CheckoutError> {
        worktree_state::checkout::checkout(&self.kept, store, snapshot, dest, options)
    }

    /// Writes dependency `layers` into the isolated worktree at `root` (cloned from the
    /// store's unpacked copies where the file system can) and names them in its record
    /// (out of scope from then on); returns what was written of each.
    pub fn attach_deps(
        &self,
        store: &Store,
        root: &Utf8Path,
        layers: &[crate::LayerToWrite],
        progress: &dyn cas::Progress,
    ) -> Result<Vec<crate::LayerWritten>, CheckoutError> {
        worktree_state::checkout::attach(&self.kept, store, root, layers, progress)
    }

    /// Finishes or rolls back an interrupted operation on the worktree holding `path`.
    pub fn recover(
        &self,
        store: &Store,
        path: &Utf8Path,
    ) -> Result<WorktreeRecoverOutcome, RecoverError> {
        worktree_state::recover::recover(&self.kept, store, path)
    }

    /// Makes the worktree's scope equal `target` (see [`WorktreeRollbackOptions`]).
    pub fn rollback(
        &self,
        store: &Store,
        path: &Utf8Path,
        target: SnapshotId,
        options: &WorktreeRollbackOptions<'_>,
    ) -> Result<WorktreeRollbackOutcome, RollbackError> {
        worktree_state::rollback::rollback(&self.kept, store, path, target, options)
    }

    /// Captures the worktree's live state, makes a target of it with `make`, and makes
    /// the worktree equal that target as one change set; `None` when `make` made none and
    /// nothing was recorded (see [`worktree_state::rollback::rebase`]).
    pub fn rebase<E: From<RollbackError>>(
        &self,
        store: &Store,
        path: &Utf8Path,
        onto: SnapshotId,
        make: crate::MakeTarget<'_, E>,
        options: &WorktreeRollbackOptions<'_>,
    ) -> Result<Option<WorktreeRollbackOutcome>, E> {
        worktree_state::rollback::rebase(&self.kept, store, path, onto, options, "rebase", make)
    }

    /// A named snapshot on the worktree's checkpoint stack (onboarding `dir` if needed).
    pub fn checkpoint(
        &self,
        store: &Store,
        dir: &Utf8Path,
        options: &WorktreeCheckpointOptions<'_>,
    ) -> Result<WorktreeCheckpointOutcome, TaskError> {
        crate::task::checkpoint(&self.kept, store, dir, options)
    }

    /// Rolls the worktree back to checkpoint `to` (default: the latest).
    pub fn rewind(
        &self,
        store: &Store,
        path: &Utf8Path,
        to: Option<SnapshotId>,
        options: &WorktreeRollbackOptions<'_>,
    ) -> Result<WorktreeRollbackOutcome, TaskError> {
        crate::task::rewind(&self.kept, store, path, to, options)
    }

    /// Keeps the task's changes (under `paths` only, if any).
    pub fn accept(
        &self,
        store: &Store,
        path: &Utf8Path,
        paths: &[path_policy::RepoPathBuf],
        options: &CaptureOptions<'_>,
    ) -> Result<WorktreeAcceptOutcome, TaskError> {
        crate::task::accept(&self.kept, store, path, paths, options)
    }

    /// Puts the task's changes back to its baseline (see [`WorktreeRollbackOptions::paths`]).
    pub fn discard(
        &self,
        store: &Store,
        path: &Utf8Path,
        options: &WorktreeRollbackOptions<'_>,
    ) -> Result<WorktreeDiscardOutcome, TaskError> {
        crate::task::discard(&self.kept, store, path, options)
    }

    /// Reverts the newest change set not yet undone.
    pub fn undo(&self, store: &Store, path: &Utf8Path) -> Result<WorktreeUndoOutcome, UndoError> {
        crate::undo::undo(&self.kept, store, path)
    }

    /// Re-applies the newest undone change set.
    pub fn redo(&self, store: &Store, path: &Utf8Path) -> Result<WorktreeUndoOutcome, UndoError> {
        crate::undo::redo(&self.kept, store, path)
    }

    /// Removes the worktree rooted at `path` from the registry (its files stay).
    pub fn remove(&self, store: &Store, path: &Utf8Path) -> Result<WorktreeRecord, WorktreeError> {
        worktree_state::records::remove(&self.kept, store, path)
    }

    /// Accepts that the registered root `path` is now another directory.
    pub fn rebind(&self, store: &Store, path: &Utf8Path) -> Result<WorktreeRecord, WorktreeError> {
        worktree_state::records::rebind(&self.kept, store, path)
    }

    /// Changes the sandbox grants and grant requests of the worktree rooted at `root`,
    /// under its lock, read and written in one transaction: `change` edits them and returns
    /// the op-log entry to record, or `None` if nothing changed (then nothing is written).
    pub fn change_grants<E: From<WorktreeError>>(
        &self,
        store: &Store,
        root: &Utf8Path,
        change: impl FnOnce(
            &mut crate::SandboxGrants,
            &mut crate::GrantRequests,
        ) -> Result<Option<crate::OpRecord>, E>,
    ) -> Result<WorktreeRecord, E> {
        worktree_state::records::change_grants(&self.kept, store, root, change)
    }
}

/// The stat caches an operation keeps in memory, checked against the store through
/// every kind of operation.
#[cfg(test)]
mod tests {
    use crate::RegistryRead as _;
    use crate::RegistryWrite as _;
    use path_policy::{RepoPath, RepoPathBuf};

    /// A store and a worktree of `files` onboarded into it: (temp dir, store, worktree
    /// folder, its root as registered, its first snapshot).
    fn onboarded(
        files: &[(&str, &str)],
    ) -> (
        tempfile::TempDir,
        cas::Store,
        crate::Worktrees,
        camino::Utf8PathBuf,
        camino::Utf8PathBuf,
        cas::SnapshotId,
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = camino::Utf8Path::from_path(dir.path()).expect("utf8");
        let store = cas::Store::open(
            &base.join("store"),
            &cas::OpenOptions {
                create: true,
                ..cas::OpenOptions::default()
            },
        )
        .expect("store");
        let wt = base.join("wt");
        for (path, body) in files {
            let p = wt.join(path);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, body).expect("write");
        }
        let ws = crate::Worktrees::new();
        let onboarded = ws
            .onboard(&store, &wt, &crate::WorktreeOnboardOptions::default())
            .expect("onboard");
        (dir, store, ws, wt, onboarded.root, onboarded.snapshot)
    }

    /// The cache an operation keeps in memory must be exactly what the store holds, after
    /// every kind of operation that writes it; and it is not used once something else wrote.
    #[test]
    fn kept_cache_equals_the_stored_one() {
        let (_dir, store, ws, wt, root, first) = onboarded(&[
            ("a.txt", "a"),
            ("src/lib.rs", "lib"),
            ("src/deep/x.rs", "x"),
            (".gitignore", "*.log\n"),
            ("junk.log", "ignored"),
        ]);
        let same_as_stored = |step: &str| {
            let mut kept = ws
                .kept
                .caches()
                .take(&store, &root)
                .unwrap_or_else(|| panic!("{step}: nothing kept"));
            let reader = store.reader().expect("reader");
            let mut loaded = worktree_scope::dirstate::Cache::load(&reader, &root).expect("load");
            // Blob ids left in the trees, taken out of them: the same states.
            for cache in [&mut kept, &mut loaded] {
                let dirs: Vec<RepoPathBuf> = cache.dirs.keys().cloned().collect();
                let wanted = dirs.iter().map(RepoPathBuf::as_repo_path).collect();
                worktree_scope::dirstate::resolve_dirs(&mut cache.dirs, &wanted, &reader)
                    .unwrap_or_else(|e| panic!("{step}: {e:?}"));
            }
            assert_eq!(kept, loaded, "{step}");
            ws.kept.caches().keep(kept, &store, &root);
        };
        same_as_stored("onboard");

        // Past the racy margin, so the next captures trust (and keep) cached states.
        std::thread::sleep(crate::RACY_MARGIN * 2);
        std::fs::write(wt.join("src/lib.rs"), "lib 2").expect("write");
        std::fs::write(wt.join("src/new.rs"), "new").expect("write");
        std::fs::remove_file(wt.join("src/deep/x.rs")).expect("rm");
        ws.snapshot(&store, &root, &crate::CaptureOptions::default())
            .expect("snapshot");
        same_as_stored("snapshot");
        // Files written within the racy margin are read again (and their states updated)
        // by each capture: past it, an unchanged snapshot verifies them for good.
        std::thread::sleep(crate::RACY_MARGIN * 2);
        ws.snapshot(&store, &root, &crate::CaptureOptions::default())
            .expect("snapshot");
        same_as_stored("unchanged snapshot");
        ws.live_state(&store, &root, &crate::CaptureOptions::default())
            .expect("status");
        same_as_stored("status");

        std::fs::write(wt.join("a.txt"), "a 2").expect("write");
        ws.rollback(
            &store,
            &root,
            first,
            &crate::WorktreeRollbackOptions::default(),
        )
        .expect("rollback");
        same_as_stored("rollback");
        ws.checkpoint(&store, &root, &crate::WorktreeCheckpointOptions::default())
            .expect("checkpoint");
        std::fs::write(wt.join("src/lib.rs"), "lib 3").expect("write");
        ws.snapshot(&store, &root, &crate::CaptureOptions::default())
            .expect("snapshot");
        ws.undo(&store, &root).expect("undo");
        same_as_stored("undo");

        // Another write to the worktree's file states: the kept copy no longer counts.
        let mut batch = cas::WriteBatch::new();
        batch.set_file_state(&root, b"dx", None);
        store.write(&batch).expect("write");
        assert!(ws.kept.caches().take(&store, &root).is_none());
    }

    /// Twenty small files in each of `dirs`, as (path, content).
    fn twenty_files_in(dirs: &[&str]) -> Vec<(String, String)> {
        dirs.iter()
            .flat_map(|d| (0..20).map(move |i| (format!("{d}/f{i}"), format!("{d} {i}"))))
            .collect()
    }

    fn as_spec(files: &[(String, String)]) -> Vec<(&str, &str)> {
        files
            .iter()
            .map(|(p, b)| (p.as_str(), b.as_str()))
            .collect()
    }

    /// Options of a scan that stores nothing.
    fn dry_scan<'a>(
        scope: &'a crate::Scope,
        quiet: Option<&'a worktree_scope::watch::Quiet>,
    ) -> worktree_scope::scan::ScanOptions<'a> {
        worktree_scope::scan::ScanOptions {
            threads: 0,
            dry_run: true,
            scope,
            quiet,
            progress: &cas::Silent,
            group_bytes: 2 << 10,
        }
    }

    /// The scope a capture of the worktree at `root` has.
    fn scope_of(store: &cas::Store, root: &camino::Utf8Path) -> crate::Scope {
        use crate::RegistryRead;
        let record = store
            .reader()
            .expect("reader")
            .worktree(root)
            .expect("registry")
            .expect("registered");
        crate::ScopeSettings::load(store, &record)
            .expect("settings")
            .scope(&crate::OnDisk)
            .expect("scope")
    }

    /// The root tree a scan's directories build.
    fn root_tree(scan: &worktree_scope::scan::Scan) -> cas::TreeId {
        worktree_scope::build::trees_of(&scan.dirs, &scan.reuse)
            .expect("build")
            .0
    }

    /// A capture holds in memory, file by file, the files of changed directories, not
    /// every file: clean directories stand as cached, and the tree comes out as reading
    /// everything makes it.
    #[test]
    fn a_capture_holds_only_changed_directories() {
        let spec = twenty_files_in(&["a", "b", "c/d"]);
        let (_dir, store, ws, wt, root, _) = onboarded(&as_spec(&spec));
        std::thread::sleep(crate::RACY_MARGIN * 2);
        ws.snapshot(&store, &root, &crate::CaptureOptions::default())
            .expect("verify");
        std::fs::write(wt.join("b/f3"), "changed").expect("write");

        let scope = scope_of(&store, &root);
        let options = dry_scan(&scope, None);
        let scan_with =
            |cache| worktree_scope::scan::scan(&store, &root, cache, &options).expect("scan");
        let cache = worktree_scope::dirstate::Cache::load(&store.reader().expect("reader"), &root)
            .expect("load");
        let scanned = scan_with(cache);
        assert_eq!(scanned.held_files, 20, "b's files only");
        assert_eq!((scanned.file_count, scanned.read_files), (60, 1));

        let everything = scan_with(worktree_scope::dirstate::Cache::default());
        assert_eq!(everything.held_files, 60);
        assert_eq!(root_tree(&scanned), root_tree(&everything));
    }

    /// An unchanged directory's subdirectories are found in the cache by tree order, where
    /// a directory's subtree follows it unbroken: `a-b` sorts between `a` and `a/b` by
    /// bytes, but after `a/b` in tree order. A scan in byte order would lose `a/b`.
    #[test]
    fn a_pruned_directory_keeps_subdirectories_a_sibling_sorts_among() {
        let files = [("a/b/f", "f"), ("a/g", "g"), ("a-b/h", "h"), ("top", "t")];
        let (_dir, store, ws, wt, root, _) = onboarded(&files);
        std::thread::sleep(crate::RACY_MARGIN * 2);
        ws.snapshot(&store, &root, &crate::CaptureOptions::default())
            .expect("verify");
        // The root changes (a new name in it); `a`, `a/b` and `a-b` do not.
        std::fs::write(wt.join("new"), "n").expect("write");

        let scope = scope_of(&store, &root);
        let options = dry_scan(&scope, None);
        let cache = worktree_scope::dirstate::Cache::load(&store.reader().expect("reader"), &root)
            .expect("load");
        let scanned = worktree_scope::scan::scan(&store, &root, cache, &options).expect("scan");
        assert_eq!((scanned.file_count, scanned.read_files), (5, 1));
        let everything = worktree_scope::scan::scan(
            &store,
            &root,
            worktree_scope::dirstate::Cache::default(),
            &options,
        )
        .expect("scan");
        assert_eq!(root_tree(&scanned), root_tree(&everything));
    }

    /// Under a watcher, a quiet directory holding a file written just before the last
    /// capture (racy) has that file read again, and only that one held.
    #[test]
    fn a_racy_file_in_a_quiet_directory_is_read_alone() {
        let spec = twenty_files_in(&["a", "b"]);
        let (_dir, store, ws, wt, root, _) = onboarded(&as_spec(&spec));
        std::thread::sleep(crate::RACY_MARGIN * 2);
        std::fs::write(wt.join("b/f3"), "changed").expect("write");
        ws.snapshot(&store, &root, &crate::CaptureOptions::default())
            .expect("snapshot");

        let scope = scope_of(&store, &root);
        let mut cache =
            worktree_scope::dirstate::Cache::load(&store.reader().expect("reader"), &root)
                .expect("load");
        // Verified as it was written, however long the snapshot took to come: racy.
        let b = cache
            .dirs
            .get_mut(RepoPath::new(b"b").expect("a repo path"))
            .expect("b");
        for (name, child) in b.children_mut() {
            if let (b"f3", worktree_scope::dirstate::Child::File(f)) = (name.as_slice(), child) {
                f.verified_ns = f.mtime_ns;
            }
        }
        // Written since watching began: a suspect.
        let quiet = worktree_scope::watch::Quiet::all(cache.dirs.keys(), &[(b"b", b"f3")]);
        let options = dry_scan(&scope, Some(&quiet));
        let scanned = worktree_scope::scan::scan(&store, &root, cache, &options).expect("scan");
        assert_eq!((scanned.held_files, scanned.read_files), (1, 1));
        assert_eq!(scanned.file_count, 40);
        let everything = worktree_scope::scan::scan(
            &store,
            &root,
            worktree_scope::dirstate::Cache::default(),
            &dry_scan(&scope, None),
        )
        .expect("scan");
        assert_eq!(root_tree(&scanned), root_tree(&everything));
    }

    /// A stat cache whose blob ids are in a tree the store does not hold costs a re-read of
    /// every file, never a failed or wrong capture.
    #[test]
    fn a_cache_pointing_into_a_missing_tree_is_read_past() {
        let (_dir, store, ws, wt, root, _) = onboarded(&[("a.txt", "a"), ("b.txt", "b")]);
        std::thread::sleep(crate::RACY_MARGIN * 2);
        ws.snapshot(&store, &root, &crate::CaptureOptions::default())
            .expect("verify");
        let mut cache =
            worktree_scope::dirstate::Cache::load(&store.reader().expect("reader"), &root)
                .expect("load");
        let top = cache.dirs.get_mut(RepoPath::root()).expect("root dir");
        assert!(top.pending, "a verified record points into its tree");
        top.tree = Some((cas::TreeId::from_bytes([9; 32]), 2));
        let mut batch = cas::WriteBatch::new();
        batch.set_file_state(&root, &worktree_scope::dirstate::dir_key(b""), top.encode());
        store.write(&batch).expect("write");

        std::fs::write(wt.join("b.txt"), "b 2").expect("write");
        let snap = ws
            .snapshot(&store, &root, &crate::CaptureOptions::default())
            .expect("snapshot past the missing tree");
        assert!(snap.changed);
        assert_eq!(snap.read_files, 2, "every file read again");
        let reader = store.reader().expect("reader");
        let tree = reader.tree(snap.tree).expect("tree");
        let blob = |name: &[u8]| tree.get(name).and_then(cas::TreeEntry::blob);
        assert_eq!(blob(b"a.txt"), Some(cas::BlobId::of(b"a")));
        assert_eq!(blob(b"b.txt"), Some(cas::BlobId::of(b"b 2")));
    }

    /// A stat-cache record under a store key that is no repo path (nothing checks what
    /// the store holds) is dropped on load: the cache is as if it were not there, and the
    /// capture neither panics nor changes.
    #[test]
    fn a_cache_record_under_a_bad_key_is_dropped() {
        let (_dir, store, ws, _wt, root, first) = onboarded(&[("a/x.txt", "x"), ("b.txt", "b")]);
        std::thread::sleep(crate::RACY_MARGIN * 2);
        let verified = ws
            .snapshot(&store, &root, &crate::CaptureOptions::default())
            .expect("verify");
        let load = || {
            worktree_scope::dirstate::Cache::load(&store.reader().expect("reader"), &root)
                .expect("load")
        };
        let before = load();
        let stored = || {
            let states = store.reader().expect("reader").file_states(&root);
            states.expect("states").len()
        };
        let good = stored();
        let a = worktree_scope::dirstate::dir_key(b"a");
        let record = store.reader().expect("reader").file_state(&root, &a);
        let record = record.expect("read").expect("a's record");
        // `d` then the path with `/` as NUL: `..`, `../a`, `a/..`, `/a`, `a/`, `a//x`,
        // `.git`, `a/.git`, a control byte; and a `/`, which `dir_key` never writes.
        let bad: [&[u8]; 10] = [
            b"d..",
            b"d..\0a",
            b"da\0..",
            b"d\0a",
            b"da\0",
            b"da\0\0x",
            b"d.git",
            b"da\0.git",
            b"da\x01",
            b"da/x",
        ];
        let mut batch = cas::WriteBatch::new();
        for key in bad {
            batch.set_file_state(&root, key, Some(record.clone()));
        }
        store.write(&batch).expect("write");
        assert_eq!(stored(), good + bad.len(), "the bad records are stored");
        assert_eq!(load(), before, "records under bad keys are dropped");
        let again = ws
            .snapshot(&store, &root, &crate::CaptureOptions::default())
            .expect("snapshot");
        assert_eq!(again.tree, verified.tree);
        let reader = store.reader().expect("reader");
        assert_eq!(again.tree, reader.snapshot(first).expect("snapshot").tree);
    }

    /// A stat cache that names a blob the store does not hold costs a re-read of every
    /// file, never a failed or wrong capture: in a snapshot, and in a rollback, whose
    /// capture commits later, with its intent journal.
    #[test]
    fn a_cache_naming_a_missing_blob_is_read_past() {
        let (_dir, store, ws, wt, root, first) = onboarded(&[("a.txt", "a"), ("b.txt", "b")]);
        let a_blob = cas::BlobId::of(b"a");
        let damage = || {
            // Past the racy margin, so the cached states are trusted.
            std::thread::sleep(crate::RACY_MARGIN * 2);
            ws.snapshot(&store, &root, &crate::CaptureOptions::default())
                .expect("verify");
            let mut cache =
                worktree_scope::dirstate::Cache::load(&store.reader().expect("reader"), &root)
                    .expect("load");
            let top = cache.dirs.get_mut(RepoPath::root()).expect("root dir");
            for (name, child) in top.children_mut() {
                if let (b"a.txt", worktree_scope::dirstate::Child::File(state)) =
                    (name.as_slice(), child)
                {
                    state.blob = cas::BlobId::of(b"never stored");
                }
            }
            let mut batch = cas::WriteBatch::new();
            batch.set_file_state(&root, &worktree_scope::dirstate::dir_key(b""), top.encode());
            store.write(&batch).expect("write");
        };
        let a_in = |snapshot: cas::SnapshotId| {
            let reader = store.reader().expect("reader");
            let tree = reader.tree(reader.snapshot(snapshot).expect("snapshot").tree);
            tree.expect("tree").get(b"a.txt").expect("a.txt").blob()
        };

        damage();
        std::fs::write(wt.join("b.txt"), "b 2").expect("write");
        let snap = ws
            .snapshot(&store, &root, &crate::CaptureOptions::default())
            .expect("snapshot past the damage");
        assert!(snap.changed);
        assert_eq!(a_in(snap.snapshot), Some(a_blob));

        damage();
        std::fs::write(wt.join("b.txt"), "b 3").expect("write");
        let rolled = ws
            .rollback(
                &store,
                &root,
                first,
                &crate::WorktreeRollbackOptions::default(),
            )
            .expect("rollback past the damage");
        assert_eq!(a_in(rolled.captured), Some(a_blob));
        assert_eq!(
            std::fs::read_to_string(wt.join("b.txt")).expect("read"),
            "b"
        );
    }
}
