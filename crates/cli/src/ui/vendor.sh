#!/bin/sh
# Re-fetches the vendored highlight.js (the ES module of its common-languages build, two
# GitHub themes and its BSD licence) from the npm registry at a pinned version, into
# assets/vendor/ (every file under assets/ is served; this script is not).
# Run from anywhere: ./vendor.sh  (needs npm and tar).
set -eu
VERSION=11.11.1
here=$(cd "$(dirname "$0")/assets" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "@highlightjs/cdn-assets@$VERSION" >/dev/null)
tar -xzf "$work"/highlightjs-cdn-assets-"$VERSION".tgz -C "$work"
mkdir -p "$here/vendor"
cp "$work/package/es/highlight.min.js" "$here/vendor/highlight.min.js"
cp "$work/package/styles/github.min.css" "$here/vendor/github.min.css"
cp "$work/package/styles/github-dark.min.css" "$here/vendor/github-dark.min.css"
cp "$work/package/LICENSE" "$here/vendor/LICENSE.highlight.js"
echo "highlight.js $VERSION vendored into $here/vendor"
