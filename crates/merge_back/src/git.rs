//! What every operation on a repository shares, below all of them.

/// What gitoxide (or the file system below it) reported, kept whole as the `source()` of
/// this crate's errors. Boxed: gix fails with many types, and none of them belongs in
/// merge_back's API. The same type as the store's (`cas::BoxError`), not a second one.
pub use cas::BoxError;

/// The configured author or committer, else a fallback naming cairn (a merge must not fail
/// for want of `user.name`).
pub(crate) fn signature(repo: &gix::Repository, author: bool) -> gix::actor::Signature {
    let configured = if author {
        repo.author()
    } else {
        repo.committer()
    };
    let now = gix::date::Time::now_local_or_utc();
    match configured.and_then(Result::ok) {
        Some(s) => gix::actor::Signature {
            name: s.name.into(),
            email: s.email.into(),
            time: s.time().unwrap_or(now),
        },
        None => gix::actor::Signature {
            name: "cairn".into(),
            email: "cairn@localhost".into(),
            time: now,
        },
    }
}
