//! Bringing a snapshot into the git repository it was onboarded from, as a commit on a branch.

use std::collections::{HashSet, VecDeque};

use camino::{Utf8Path, Utf8PathBuf};
use cas::{SnapshotId, Store};

use gix::refs::transaction::{PreviousValue, RefEdit};

use crate::export::export_into;
use crate::git::{BoxError, signature};
use crate::journal::{self, CheckoutJournal};
use crate::merge::{MergeConflict, merge_trees_in};
use crate::snapshot_error::{MergeSnapshotError, Refusal};
use crate::worktree;

/// What to merge, and where the result goes.
#[derive(Debug, Clone)]
pub struct MergeSnapshotOptions<'a> {
    /// The git repository (the top of its work tree).
    pub repo: &'a Utf8Path,
    /// The snapshot to bring in.
    pub snapshot: SnapshotId,
    /// The common ancestor; default: the nearest ancestor of `snapshot` (itself included)
    /// onboarded from `repo` while it was a git repository.
    pub base: Option<SnapshotId>,
    /// The branch to create (without `refs/heads/`); default `cairn/<first 12 hex of snapshot>`.
    pub branch: Option<&'a str>,
    /// The commit message; default: the snapshot's message, or a line naming it.
    pub message: Option<&'a str>,
    /// Commit to the checked-out branch (or detached `HEAD`) and move the index and working
    /// files with it, if every path that changes is clean there; `branch` is then unused.
    pub checkout: bool,
    /// Trailers (key, value) the commit message carries after `Cairn-Snapshot`, in order
    /// (the caller's: `Cairn-Verified`); a value holds no line break.
    pub trailers: &'a [(String, String)],
}

/// What [`merge_snapshot`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeSnapshotOutcome {
    /// The base snapshot used.
    pub base: SnapshotId,
    /// The new commit (its parent is `HEAD`) and the branch that now points at it (`HEAD`
    /// when detached); `None` when conflicts or dirty paths stopped the merge and nothing in
    /// the repository changed.
    pub commit: Option<(String, String)>,
    /// The unresolved paths.
    pub conflicts: Vec<MergeConflict>,
    /// With `checkout`: the paths the merge must change that have uncommitted changes (or
    /// untracked files in the way).
    pub dirty: Vec<Vec<u8>>,
}

/// The nearest ancestor of `start` (itself included, breadth first) onboarded or imported
/// from the git repository at `repo`.
fn find_base(
    store: &Store,
    repo: &Utf8Path,
    start: SnapshotId,
) -> Result<Option<SnapshotId>, cas::StoreError> {
    let reader = store
        .reader()
        .map_err(|e| cas::StoreError::from(cas::ReadError::from(e)))?;
    let mut queue = VecDeque::from([start]);
    let mut seen = HashSet::from([start]);
    while let Some(id) = queue.pop_front() {
        let snapshot = reader.snapshot(id)?;
        if snapshot
            .source
            .as_ref()
            .is_some_and(|s| s.path == repo && s.git.is_some())
        {
            return Ok(Some(id));
        }
        for parent in snapshot.parents {
            // History gc pruned holds no base.
            let pruned = reader
                .pruned(parent)
                .map_err(|e| cas::StoreError::from(cas::ReadError::from(e)))?;
            if !pruned && seen.insert(parent) {
                queue.push_back(parent);
            }
        }
    }
    Ok(None)
}

/// Three-way merges `options.snapshot` into the repository's `HEAD`: base and snapshot trees
/// are exported into the repository, merged against `HEAD`'s tree with git's rules, and a
/// clean result becomes a commit (parent `HEAD`, trailer `Cairn-Snapshot: <id>`) on a new
/// branch, leaving `HEAD`, the index and the working files alone. With `checkout` the commit
/// goes to `HEAD` instead, after the working files and index entries of every changed path
/// (all of which must be clean) have been moved to it. With conflicts or dirty paths nothing
/// changes but unreferenced objects, which git's gc collects.
pub fn merge_snapshot(
    store: &Store,
    options: &MergeSnapshotOptions<'_>,
) -> Result<MergeSnapshotOutcome, MergeSnapshotError> {
    let path = options.repo;
    let git_err = |source: BoxError| MergeSnapshotError::Git {
        path: path.to_owned(),
        source,
    };
    let repo = gix::open(path.as_std_path()).map_err(|e| MergeSnapshotError::NotARepository {
        path: path.to_owned(),
        source: e.into(),
    })?;
    if let Some(state) = repo.state() {
        return Err(MergeSnapshotError::InProgress {
            path: path.to_owned(),
            state: format!("{state:?}").to_lowercase(),
        });
    }
    let head = repo
        .head_commit()
        .map_err(|_| MergeSnapshotError::UnbornHead {
            path: path.to_owned(),
        })?;
    let head_id = head.id;
    let ours = head.tree_id().map_err(|e| git_err(e.into()))?.detach();

    let hex = options.snapshot.to_string();
    let target = if options.checkout {
        let state = checkout_state(&repo, path)?;
        let workdir = journal_key(&state.0, path)?;
        if let Some(what) = journal::pending(store, &workdir)? {
            return Err(MergeSnapshotError::Interrupted {
                path: workdir,
                what,
            });
        }
        Target::Head(Box::new(state))
    } else {
        Target::Branch(new_branch(&repo, path, options.branch, &hex)?)
    };

    let base = match options.base {
        Some(b) => b,
        None => {
            find_base(store, path, options.snapshot)?.ok_or_else(|| MergeSnapshotError::NoBase {
                snapshot: options.snapshot,
                path: path.to_owned(),
            })?
        }
    };
    let (base_tree, theirs_tree) = {
        let reader = store
            .reader()
            .map_err(|e| cas::StoreError::from(cas::ReadError::from(e)))?;
        let base_tree = reader.snapshot(base).map_err(cas::StoreError::from)?.tree;
        let theirs = reader
            .snapshot(options.snapshot)
            .map_err(cas::StoreError::from)?;
        (base_tree, theirs)
    };
    let base_git = export_into(store, &repo, path, base_tree)?.tree;
    let theirs_git = export_into(store, &repo, path, theirs_tree.tree)?.tree;
    let merged = merge_trees_in(&repo, path, &base_git, &ours.to_string(), &theirs_git)?;
    let Some(tree) = merged.tree else {
        return Ok(MergeSnapshotOutcome {
            base,
            commit: None,
            conflicts: merged.conflicts,
            dirty: Vec::new(),
        });
    };
    let tree = gix::ObjectId::from_hex(tree.as_bytes()).map_err(|e| git_err(e.into()))?;
    let plan = match &target {
        Target::Head(state) => {
            let (workdir, index, _) = &**state;
            let changes = worktree::changes(&repo, ours, tree).map_err(git_err)?;
            let dirty = worktree::dirty(workdir, index, &changes).map_err(git_err)?;
            if !dirty.is_empty() {
                return Ok(MergeSnapshotOutcome {
                    base,
                    commit: None,
                    conflicts: Vec::new(),
                    dirty: dirty.into_iter().map(Vec::from).collect(),
                });
            }
            Some(changes)
        }
        Target::Branch(_) => None,
    };

    let subject = match options.message {
        Some(m) => m.trim_end().to_owned(),
        None if !theirs_tree.message.trim().is_empty() => theirs_tree.message.trim_end().to_owned(),
        None => format!("cairn: merge snapshot {}", &hex[..12.min(hex.len())]),
    };
    let mut message = format!("{subject}\n\nCairn-Snapshot: {hex}\n");
    for (key, value) in options.trailers {
        message.push_str(&format!("{key}: {value}\n"));
    }
    let committer = signature(&repo, false);
    let commit = gix::objs::Commit {
        message: message.into(),
        tree,
        author: signature(&repo, true),
        committer: committer.clone(),
        encoding: None,
        parents: [head_id].into_iter().collect(),
        extra_headers: Vec::new(),
    };
    let commit_id = repo
        .write_object(&commit)
        .map_err(|e| git_err(e.into()))?
        .detach();
    let mut finish = None;
    let (refname, expected, branch) = match target {
        Target::Branch((refname, branch)) => (refname, PreviousValue::MustNotExist, branch),
        Target::Head(state) => {
            let (workdir, index, branch) = *state;
            let changes = plan.unwrap_or_default();
            let head_ref = match repo.head_name().map_err(|e| git_err(e.into()))? {
                Some(name) => name.as_bstr().to_string(),
                None => "HEAD".to_owned(),
            };
            let journal = CheckoutJournal::new(
                journal_key(&workdir, path)?,
                head_ref,
                head_id,
                commit_id,
                &changes,
            );
            journal.begin(store)?;
            worktree::apply(&repo, &workdir, index, &changes).map_err(|source| {
                MergeSnapshotError::Checkout {
                    path: path.to_owned(),
                    head: head_id.to_string(),
                    source,
                }
            })?;
            finish = Some(journal);
            let head: gix::refs::FullName = "HEAD"
                .try_into()
                .map_err(|e: gix::validate::reference::name::Error| git_err(e.into()))?;
            let expected = PreviousValue::MustExistAndMatch(gix::refs::Target::Object(head_id));
            (head, expected, branch)
        }
    };
    let mut edit = RefEdit::update(
        refname,
        commit_id,
        expected,
        format!("cairn merge: snapshot {hex}"),
    );
    edit.deref = true;
    let mut time = gix::date::parse::TimeBuf::default();
    repo.edit_references_as([edit], Some(committer.to_ref(&mut time)))
        .map_err(|e| git_err(e.into()))?;
    if let Some(journal) = finish {
        journal.end(store)?;
    }
    Ok(MergeSnapshotOutcome {
        base,
        commit: Some((commit_id.to_string(), branch)),
        conflicts: Vec::new(),
        dirty: Vec::new(),
    })
}

/// Where a clean merge's commit goes.
enum Target {
    /// A new branch: its full and short name.
    Branch((gix::refs::FullName, String)),
    /// `HEAD`, with the work tree, its index and the checked-out branch's short name.
    Head(Box<(std::path::PathBuf, gix::index::File, String)>),
}

/// The full and short name of the branch to create, refused if it exists.
fn new_branch(
    repo: &gix::Repository,
    path: &Utf8Path,
    branch: Option<&str>,
    hex: &str,
) -> Result<(gix::refs::FullName, String), MergeSnapshotError> {
    let branch = match branch {
        Some(b) => b.to_owned(),
        None => format!("cairn/{}", &hex[..12.min(hex.len())]),
    };
    let invalid = |source: BoxError| MergeSnapshotError::InvalidBranch {
        branch: branch.clone(),
        source,
    };
    // As `git check-ref-format --branch`: a name git would read as an option is refused
    // too, and `refs/heads/HEAD` (which makes git warn on every command) is reserved.
    if branch.starts_with('-') {
        return Err(invalid(Refusal::BranchStartsWithDash.into()));
    }
    let full = format!("refs/heads/{branch}");
    gix::validate::reference::branch_name(full.as_bytes().into()).map_err(|e| invalid(e.into()))?;
    let refname: gix::refs::FullName = full
        .try_into()
        .map_err(|e: gix::validate::reference::name::Error| invalid(e.into()))?;
    let git_err = |source: BoxError| MergeSnapshotError::Git {
        path: path.to_owned(),
        source,
    };
    // Exactly this ref (a partial name would also find look-alikes elsewhere).
    let find = |name: String| -> Result<bool, MergeSnapshotError> {
        let name: gix::refs::FullName = name
            .try_into()
            .map_err(|e: gix::validate::reference::name::Error| invalid(e.into()))?;
        repo.try_find_reference(name.as_ref())
            .map(|r| r.is_some())
            .map_err(|e| git_err(e.into()))
    };
    if repo
        .try_find_reference(refname.as_ref())
        .map_err(|e| git_err(e.into()))?
        .is_some()
    {
        return Err(MergeSnapshotError::BranchExists {
            path: path.to_owned(),
            branch,
        });
    }
    // A branch `a` rules out `a/b` and the other way round: refs are files and folders.
    let mut above = branch.as_str();
    while let Some((parent, _)) = above.rsplit_once('/') {
        if find(format!("refs/heads/{parent}"))? {
            return Err(MergeSnapshotError::BranchConflict {
                path: path.to_owned(),
                branch: branch.clone(),
                existing: parent.to_owned(),
            });
        }
        above = parent;
    }
    let below = format!("refs/heads/{branch}/");
    let platform = repo.references().map_err(|e| git_err(e.into()))?;
    let mut nested = platform
        .prefixed(below.as_str())
        .map_err(|e| git_err(e.into()))?;
    if let Some(existing) = nested.next() {
        let existing = existing.map_err(|e| git_err(e.into()))?;
        return Err(MergeSnapshotError::BranchConflict {
            path: path.to_owned(),
            branch: branch.clone(),
            existing: existing.name().shorten().to_string(),
        });
    }
    Ok((refname, branch))
}

/// The work tree as the store's journal names it: canonical, UTF-8.
fn journal_key(
    workdir: &std::path::Path,
    path: &Utf8Path,
) -> Result<Utf8PathBuf, MergeSnapshotError> {
    std::fs::canonicalize(workdir)
        .ok()
        .and_then(|p| Utf8PathBuf::from_path_buf(p).ok())
        .ok_or_else(|| MergeSnapshotError::Git {
            path: path.to_owned(),
            source: Refusal::WorkTreeNotUtf8(workdir.to_owned()).into(),
        })
}

/// The work tree, its index and the checked-out branch, for `--checkout`.
fn checkout_state(
    repo: &gix::Repository,
    path: &Utf8Path,
) -> Result<(std::path::PathBuf, gix::index::File, String), MergeSnapshotError> {
    let git_err = |source: BoxError| MergeSnapshotError::Git {
        path: path.to_owned(),
        source,
    };
    let workdir = repo
        .workdir()
        .ok_or_else(|| git_err(Refusal::BareRepository.into()))?
        .to_owned();
    let index = repo.index_or_empty().map_err(|e| git_err(e.into()))?;
    let index: gix::index::File = (**index).clone();
    if index.link().is_some() || index.is_sparse() {
        return Err(git_err(Refusal::SplitOrSparseIndex.into()));
    }
    let branch = match repo.head_name().map_err(|e| git_err(e.into()))? {
        Some(name) => name.shorten().to_string(),
        None => "HEAD".to_owned(),
    };
    Ok((workdir, index, branch))
}
