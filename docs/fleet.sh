#!/bin/sh
# The README's verifier fleet, run for real: machine A pushes an agent's change as
# `task@origin`; machines B and C, whose stores never saw it, check it in views mounted from
# the remote and push their signed attestations; A merges once it has pulled them. Three
# stores stand for the three machines. `tests/cli/remote_mounts.rs` runs it on SeaweedFS;
# the README shows its output. Needs cairn on the PATH, git, python3, ssh-keygen, and an S3
# remote: CAIRN_FLEET_URL (s3://BUCKET/PREFIX), CAIRN_FLEET_ENDPOINT, and the AWS variables.
# Prints each command it runs (`a$` for machine A, ...), then its output.
set -eu
work=$(mktemp -d "${TMPDIR:-/tmp}/cairn-fleet.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
export GIT_AUTHOR_NAME=me GIT_AUTHOR_EMAIL=me@example.com \
    GIT_COMMITTER_NAME=me GIT_COMMITTER_EMAIL=me@example.com
say() {
    printf '%s$' "$1"
    shift
    for word; do
        case $word in
            *' '* | *'('* | *'*'*) printf " \"%s\"" "$word" ;;
            *) printf ' %s' "$word" ;;
        esac
    done
    printf '\n'
}
# Runs cairn on machine $1 (its own store) and prints the command and what it printed, the
# work folder left out; its exit status is the command's.
on() {
    m=$1
    shift
    say "$m" cairn "$@"
    status=0
    cairn --store "$work/$m" "$@" >"$work/out" 2>&1 || status=$?
    sed "s|$work/||g" "$work/out"
    return $status
}

# Machine A's repository: a function, its test, and 48 MB of data no check opens.
mkdir app
printf 'def add(a, b):\n    return a - b\n' >app/calc.py
printf 'import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n' >app/test_calc.py
head -c 50000000 /dev/urandom >app/data.bin
git -C app init -q -b main
git -C app add -A
git -C app commit -qm first
for m in a b c; do
    cairn --store "$work/$m" remote add origin "$CAIRN_FLEET_URL" \
        --endpoint "$CAIRN_FLEET_ENDPOINT" >/dev/null
done
ssh-keygen -q -t ed25519 -N '' -C b -f b_key
ssh-keygen -q -t ed25519 -N '' -C c -f c_key
printf 'b@fleet %s\nc@fleet %s\n' "$(cat b_key.pub)" "$(cat c_key.pub)" >fleet_signers
cairn --store "$work/a" onboard app >"$work/out"
base=$(grep -o '[0-9a-f]\{64\}' "$work/out" | head -n 1)
cairn --store "$work/a" checkout "$base" agent >/dev/null
sed -i 's/a - b/a + b/' agent/calc.py

on a snapshot agent -m 'fix add'
snap=$(grep -o '[0-9a-f]\{64\}' "$work/out" | head -n 1 | cut -c1-12)
on a push "$snap"
on a ref set task@origin "$snap"
on b verify task@origin --check tests --sign b_key --push -- python3 -m unittest -q
on c verify task@origin --check lint --sign c_key --push -- \
    sh -c "! grep -rn TODO --include='*.py' ."
on b fsck
if on a merge "$snap" --into app --require tests --require lint --signed-by fleet_signers; then
    echo "merged before the proofs were pulled" >&2
    exit 1
fi
on a pull task
on a merge "$snap" --into app --require tests --require lint --signed-by fleet_signers
say a git -C app log -1 '--format=%(trailers:key=Cairn-Verified)' "cairn/$snap"
git -C app log -1 '--format=%(trailers:key=Cairn-Verified)' "cairn/$snap"
on a fsck
