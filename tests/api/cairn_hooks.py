"""schemathesis hooks for cairn's contract test (contract.py loads them through
SCHEMATHESIS_HOOKS).

Generated input must never make the server act outside the test's sandbox directory, so
just before each request is sent (every phase goes through `before_call`) its paths are
confined: an absolute `cwd` becomes the sandbox, path arguments become names inside it,
and no name keeps a `/` or `..`. schemathesis revalidates a case after this hook
edits it, so its checks judge the request actually sent (a value may change from invalid
to valid or back, and the checks follow). No failure is filtered out.
"""

import os
import re

import schemathesis

SANDBOX = os.environ["CAIRN_SANDBOX"]

# Verb arguments that name a directory (or may: `a`, `b`, `target` also take snapshots).
PATH_ARGUMENTS = {"worktree", "dest", "dir", "target", "a", "b", "into", "paths", "src", "path", "write", "also", "allow_write"}

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
            if any(request.get("verb") == verb for verb in COMMAND_VERBS):
                confine_command(args)
        return
    confine_arguments(body, has_cwd)
    if path == "/v1/remote_add":
        confine_remote(body)
    if path.removeprefix("/v1/") in COMMAND_VERBS:
        confine_command(body)


# The verbs that start a command: `run`, and `verify` (its check).
COMMAND_VERBS = {"run", "verify"}


def confine_command(args):
    """A command `run` or `verify` starts (confined, on this machine) is always `true`: what
    generated words would run, and for how long, is no one's guess. Its arguments stay, so
    the request keeps its shape."""
    command = args.get("command")
    if isinstance(command, list) and command and isinstance(command[0], str):
        command[0] = "true"


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
