"""schemathesis hooks for cairn's contract test (contract.py loads them through
SCHEMATHESIS_HOOKS).

Generated input must never make the server act outside the test's sandbox directory, so
just before each request is sent (every phase goes through `before_call`) its paths are
confined: an absolute `cwd` becomes the sandbox, path arguments become names inside it,
and no name keeps a `/` or `..`. schemathesis revalidates a case after this hook
edits it, so its checks judge the request actually sent (a value may change from invalid
to valid or back, and the checks follow).
"""

import os
import re

import schemathesis
from schemathesis.openapi.checks import RejectedPositiveData

SANDBOX = os.environ["CAIRN_SANDBOX"]

# Verb arguments that name a directory (or may: `a`, `b`, `target` also take snapshots).
PATH_ARGUMENTS = {"worktree", "dest", "dir", "target", "a", "b", "into", "paths", "src", "path", "write"}

def inside(value):
    """`value` as a name that stays in the directory it is resolved against."""
    return re.sub(r"\.\.+", "_", value.replace("/", "_"))


def confine_path(value, has_cwd):
    if not isinstance(value, str):
        return value
    name = inside(value)
    # Without a cwd the server resolves relative paths against `/`.
    return name if has_cwd else f"{SANDBOX}/{name}"


def confine_cwd(body):
    cwd = body.get("cwd")
    if isinstance(cwd, str) and cwd.startswith("/"):
        body["cwd"] = SANDBOX


@schemathesis.hook
def before_call(context, case, kwargs):
    body = case.body
    if not isinstance(body, dict):
        return
    path = case.operation.path
    if path.startswith("/v1/objects/"):
        return
    confine_cwd(body)
    has_cwd = isinstance(body.get("cwd"), str)
    if path == "/v1/call":
        # The typed request of any verb: its arguments are under request.args.
        request = body.get("request")
        args = request.get("args") if isinstance(request, dict) else None
        if isinstance(args, dict):
            confine_arguments(args, has_cwd)
            # A remote is a folder inside the sandbox, never a bucket out there.
            if request.get("verb") == "remote_add":
                confine_remote(args)
        return
    confine_arguments(body, has_cwd)
    if path == "/v1/remote_add":
        confine_remote(body)


def confine_remote(args):
    """A remote is a folder inside the sandbox, never a bucket out there."""
    if isinstance(args.get("url"), str):
        args["url"] = f"file://{SANDBOX}/remote-{inside(args['url'])}"


def confine_arguments(args, has_cwd):
    for key in PATH_ARGUMENTS & args.keys():
        value = args[key]
        if isinstance(value, list):
            args[key] = [confine_path(item, has_cwd) for item in value]
        else:
            args[key] = confine_path(value, has_cwd)


# 400s with these codes come from the server's reading of the request, never from the
# command it runs: a schema-valid request must not get them.
REQUEST_SHAPE_CODES = {"invalid_json", "invalid_arguments", "missing_argument", "invalid_id"}


def refuses_what_it_names(case, response):
    """A well-formed request refused for what it names (exit 2 of the command: an unknown
    snapshot, a directory that is not a worktree, ...), or objects that fail verification."""
    if response.status_code == 422 and case.operation.path == "/v1/objects/put":
        return True
    if response.status_code != 400:
        return False
    try:
        error = response.json()["error"]
    except (ValueError, KeyError, TypeError):
        return False
    code = error.get("code")
    if code == "invalid_path" and str(error.get("message", "")).startswith("cwd"):
        return False
    return code not in REQUEST_SHAPE_CODES


@schemathesis.hook
def filter_failure(context, failure, case, response):
    """Keeps every failure but one kind: schemathesis expects a schema-valid request to be
    accepted, while the API documents a 400 (or 422 from objects/put) for a well-formed
    request whose snapshot, worktree or object is not there or not valid. Those are dropped;
    a schema-valid request refused as malformed still fails the run."""
    rejected_valid = isinstance(failure, RejectedPositiveData)
    return not (rejected_valid and refuses_what_it_names(case, response))
