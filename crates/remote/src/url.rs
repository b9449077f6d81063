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

impl RemoteUrl {
    /// Parses `url`, or says what is wrong with it.
    pub fn parse(url: &str) -> Result<RemoteUrl, String> {
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            let bucket_ok = (3..=63).contains(&bucket.len())
                && bucket
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.".contains(&b));
            if !bucket_ok {
                return Err(format!(
                    "{url}: bucket {bucket:?} is not a bucket name (3 to 63 of a-z, 0-9, '.', '-')"
                ));
            }
            let prefix = prefix.trim_matches('/');
            if prefix.split('/').any(|c| c == "." || c == "..")
                || prefix.contains("//")
                || prefix.chars().any(char::is_control)
            {
                return Err(format!(
                    "{url}: prefix {prefix:?} has an empty, '.' or '..' part"
                ));
            }
            return Ok(RemoteUrl::S3 {
                bucket: bucket.to_owned(),
                prefix: prefix.to_owned(),
            });
        }
        if let Some(path) = url.strip_prefix("file://") {
            if !path.starts_with('/') {
                return Err(format!(
                    "{url}: a file:// remote needs an absolute path (file:///PATH)"
                ));
            }
            return Ok(RemoteUrl::File {
                path: Utf8PathBuf::from(path),
            });
        }
        Err(format!(
            "{url}: not a remote URL (s3://BUCKET[/PREFIX] or file:///PATH)"
        ))
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
            let err = RemoteUrl::parse(bad).expect_err(bad);
            assert!(err.starts_with(bad), "{err}");
        }
    }
}
