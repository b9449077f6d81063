#!/bin/sh
# The README's best-of-N walk-through, run for real: three agents try one task, a verifier
# checks each attempt, `compare` shows where they agree, `combine` joins two of them, an
# agent still at work takes the repository's new base with `rebase`, and the merge agent
# merges only what passed. `tests/cli/walkthrough.rs` runs it; the README shows its output.
# Needs cairn on the PATH, git and python3. Prints each command it runs, then its output.
set -eu
work=$(mktemp -d "${TMPDIR:-/tmp}/cairn-best-of-n.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
export CAIRN_STORE="$work/.cairn" GIT_AUTHOR_NAME=me GIT_AUTHOR_EMAIL=me@example.com \
    GIT_COMMITTER_NAME=me GIT_COMMITTER_EMAIL=me@example.com
say() {
    printf '$'
    for word; do
        case $word in
            *' '* | *'('*) printf " '%s'" "$word" ;;
            *) printf ' %s' "$word" ;;
        esac
    done
    printf '\n'
}
c() { say cairn "$@"; cairn "$@"; }
# Runs and prints a cairn command, keeping the last id it printed in $last (12 hex digits).
c_keep() {
    say cairn "$@"
    out=$(cairn "$@")
    printf '%s\n' "$out"
    last=$(printf '%s\n' "$out" | grep -o '[0-9a-f]\{64\}' | tail -n 1 | cut -c1-12)
}
# A command that must refuse (exit 1); any other exit stops the walk-through.
c_refused() {
    say cairn "$@"
    code=0
    cairn "$@" || code=$?
    [ "$code" = 1 ] || { echo "expected exit 1 from cairn $*, got $code" >&2; exit 1; }
}

# The user's repository: login() lets an unknown user in with no password.
mkdir app
cat > app/auth.py <<'EOF'
USERS = {"ann": "s3cret"}


def login(user, password):
    return USERS.get(user) == password
EOF
cat > app/test_auth.py <<'EOF'
import unittest

from auth import login


class LoginTest(unittest.TestCase):
    def test_right_password(self):
        self.assertTrue(login("ann", "s3cret"))

    def test_unknown_user(self):
        self.assertFalse(login("bob", None))


if __name__ == "__main__":
    unittest.main()
EOF
printf '# app\n' > app/README.md
git -C app init -q -b main
git -C app add -A
git -C app commit -q -m "app"

c_keep onboard app
base=$last
printf '$ for i in 1 2 3; do cairn checkout %s try$i; done\n' "$base"
for i in 1 2 3; do cairn checkout "$base" "try$i"; done

# What the three agents write: 1 and 2 make the same fix, 1 adds a test, 2 a note; 3 breaks.
sed -i 's/return USERS.get(user) == password/return user in USERS and USERS[user] == password/' \
    try1/auth.py try2/auth.py
sed -i 's/^if __name__/    def test_wrong_password(self):\n        self.assertFalse(login("ann", "nope"))\n\n\nif __name__/' \
    try1/test_auth.py
printf '\nUnknown users cannot log in.\n' >> try2/README.md
sed -i 's/return USERS.get(user) == password/return USERS[user] == password/' try3/auth.py

c_keep snapshot try1 -m "attempt 1"
a=$last
c_keep snapshot try2 -m "attempt 2"
b=$last
c_keep snapshot try3 -m "attempt 3"
k=$last

for s in "$a" "$b" "$k"; do
    say cairn verify "$s" --check tests -- python3 -m unittest -q
    cairn verify "$s" --check tests -- python3 -m unittest -q 2>&1 || true
done
c compare "$a" "$b" "$k"
c checks "$k" --log tests

c_keep combine "$a" "$b" -m "attempts 1 and 2"
both=$last
c verify "$both" --check tests -- python3 -m unittest -q
# The CI verifier's key; the merge agent trusts only what it signed.
say ssh-keygen -q -t ed25519 -N "''" -C ci -f ci_key
ssh-keygen -q -t ed25519 -N '' -C ci -f ci_key
printf 'ci namespaces="cairn-attestation" %s\n' "$(cat ci_key.pub)" > ci_signers
ssh-keygen -q -t ed25519 -N '' -C else -f else_key
printf 'else namespaces="cairn-attestation" %s\n' "$(cat else_key.pub)" > else_signers
c verify "$both" --check tests --sign ci_key -- python3 -m unittest -q

# Meanwhile the repository moved on; the agent still at work in try2 takes the new base.
sed -i 's/^USERS = .*/USERS = {"ann": "s3cret", "cy": "hunter2"}/' app/auth.py
git -C app commit -q -am "cy"
c_keep snapshot app -m "cy joins"
moved=$last
c_keep rebase try2 --onto "$moved"
rebased=$last
c verify "$rebased" --check tests -- python3 -m unittest -q
c log try2 -n 2

c_refused merge "$k" --into app --require tests
c_refused merge "$both" --into app --require tests --signed-by else_signers
c merge "$both" --into app --require tests --signed-by ci_signers
say git -C app log -1 --format=%\(trailers\) "cairn/$both"
git -C app log -1 --format=%\(trailers\) "cairn/$both"
