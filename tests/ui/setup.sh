#!/usr/bin/env bash
# Installs what the browser scenarios need, when missing: Debian's chromium, and this
# folder's node_modules from the committed lockfile (npm ci). Tests and benches run it
# before a scenario; many at once are safe: one installs, the others wait for it.
set -euo pipefail
cd "$(dirname "$0")"
exec 9>.setup.lock
flock 9
if [ ! -x /usr/bin/chromium ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq chromium >&2 || { apt-get update -qq && apt-get install -y -qq chromium >&2; }
fi
version() { node -p "try { require('$1').$2 } catch { '' }"; }
pinned=$(version ./package-lock.json 'packages["node_modules/playwright-core"].version')
installed=$(version ./node_modules/playwright-core/package.json version)
if [ -z "$pinned" ]; then
  echo "tests/ui/package-lock.json pins no playwright-core" >&2
  exit 1
fi
if [ "$pinned" != "$installed" ]; then
  npm ci --no-audit --no-fund --loglevel=error --update-notifier=false >&2
fi
