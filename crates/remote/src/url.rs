//! Where a remote is: `s3://BUCKET[/PREFIX]` or `file:///PATH`.

use camino::Utf8PathBuf;

/// A remote's location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteUrl {
    /// A bucket, and a prefix inside it (`""` for the whole bucket).
    S3 {
        /// The bucket.
        bucket: String,
        /// Keys start with this, then `/` (none if empty).
        prefix: String,
    },
    /// A folder on this machine (or a mounted file system).
    File {
        /// Absolute.
        path: Utf8PathBuf,
    },
}

/// Why a string is not a remote URL; each names the URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlError {
    /// An `s3://` URL whose bucket cannot be a bucket's name.
    #[error("{url}: bucket {bucket:?} is not a bucket name (3 to 63 of a-z, 0-9, '.', '-')")]
    Bucket {
        /// The URL.
        url: String,
        /// Its bucket part.
        bucket: String,
    },
    /// An `s3://` URL whose prefix has an empty, `.` or `..` part (or a control character).
    #[error("{url}: prefix {prefix:?} has an empty, '.' or '..' part")]
    Prefix {
        /// The URL.
        url: String,
        /// Its prefix, without the slashes around it.
        prefix: String,
    },
    /// A `file://` URL whose path is not absolute.
    #[error("{url}: a file:// remote needs an absolute path (file:///PATH)")]
    RelativePath {
        /// The URL.
        url: String,
    },
    /// Neither `s3://` nor `file://`.
    #[error("{url}: not a remote URL (s3://BUCKET[/PREFIX] or file:///PATH)")]
    Scheme {
        /// The URL.
        url: String,
    },
}

impl RemoteUrl {
    /// Parses `url`, or says what is wrong with it.
    pub fn parse(url: &str) -> Result<RemoteUrl, UrlError> {
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            let bucket_ok = (3..=63).contains(&bucket.len())
                && bucket
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.".contains(&b));
            if !bucket_ok {
                return Err(UrlError::Bucket {
                    url: url.to_owned(),
                    bucket: bucket.to_owned(),
                });
            }
            let prefix = prefix.trim_matches('/');
            if prefix.split('/').any(|c| c == "." || c == "..")
                || prefix.contains("//")
                || prefix.chars().any(char::is_control)
            {
                return Err(UrlError::Prefix {
                    url: url.to_owned(),
                    prefix: prefix.to_owned(),
                });
            }
            return Ok(RemoteUrl::S3 {
                bucket: bucket.to_owned(),
                prefix: prefix.to_owned(),
            });
        }
        if let Some(path) = url.strip_prefix("file://") {
            if !path.starts_with('/') {
                return Err(UrlError::RelativePath {
                    url: url.to_owned(),
                });
            }
            return Ok(RemoteUrl::File {
                path: Utf8PathBuf::from(path),
            });
        }
        Err(UrlError::Scheme {
            url: url.to_owned(),
        })
    }
}

impl std::fmt::Display for RemoteUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RemoteUrl::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            RemoteUrl::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
            RemoteUrl::File { path } => write!(f, "file://{path}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_and_print_back() {
        for ok in [
            "s3://bucket",
            "s3://my-bucket/team/agents",
            "file:///srv/cairn",
        ] {
            assert_eq!(
                RemoteUrl::parse(ok).map(|u| u.to_string()),
                Ok(ok.to_owned())
            );
        }
        assert_eq!(
            RemoteUrl::parse("s3://bucket/a/b/").map(|u| u.to_string()),
            Ok("s3://bucket/a/b".to_owned())
        );
        for bad in [
            "s3://B",
            "s3://b",
            "s3://bucket/a/../b",
            "file://rel",
            "http://x",
            "",
        ] {
            let err = RemoteUrl::parse(bad).expect_err(bad).to_string();
            assert!(err.starts_with(bad), "{err}");
        }
    }
}
