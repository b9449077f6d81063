"""Drives `cairn mcp` with the official MCP Python SDK: list_tools, then a session of
calls an agent would make. Usage: client.py CAIRN STORE WORKDIR. Exits non-zero on any
mismatch."""

import asyncio
import json
import os
import sys

from mcp import ClientSession, MCPError, StdioServerParameters, types
from mcp.client.stdio import stdio_client

CAIRN, STORE, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
EXPECTED = {
    "snapshot", "checkout", "rollback", "diff", "status", "undo", "redo",
    "checkpoint", "rewind", "merge", "log", "review", "push", "pull", "remote_list",
    "ref_set", "ref_list", "mount", "unmount", "policy", "policy_allow", "policy_revoke", "gc",
    "run", "verify", "checks", "combine", "rebase", "compare", "deps_save", "deps_list", "deps_rm",
}


# The tools that only read, as their annotations say.
READ_ONLY = {
    "diff", "status", "log", "review", "remote_list", "checks", "compare", "deps_list",
}


def store_file():
    """The store's database file as a write would change it."""
    found = os.stat(os.path.join(STORE, "store.redb"))
    return found.st_mtime_ns, found.st_size, found.st_ino


def text(result):
    return "".join(c.text for c in result.content)


async def call(session, name, args, ok=True):
    result = await session.call_tool(name, args)
    body = text(result)
    assert result.is_error == (not ok), f"{name} {args}: is_error={result.is_error}: {body}"
    return json.loads(body) if body.startswith("{") else body


async def main():
    wt = os.path.join(WORK, "agent")
    os.makedirs(wt)
    with open(os.path.join(wt, "main.py"), "w") as f:
        f.write("print('v1')\n")
    params = StdioServerParameters(command=CAIRN, args=["--store", STORE, "mcp"])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.server_info.name == "cairn", init.server_info
            tools = (await session.list_tools()).tools
            names = {t.name for t in tools}
            assert names == EXPECTED, names
            for t in tools:
                assert t.input_schema["type"] == "object", t
            read_only = {t.name for t in tools if t.annotations and t.annotations.read_only_hint}
            assert read_only == READ_ONLY, read_only
            assert "worktree" in next(t for t in tools if t.name == "snapshot").input_schema["required"]
            # Every argument's limit is in its schema, as the engine enforces it.
            snapshot_args = next(t for t in tools if t.name == "snapshot").input_schema["properties"]
            assert snapshot_args["message"]["maxLength"] == 65536, snapshot_args
            assert snapshot_args["worktree"]["maxLength"] == 4096, snapshot_args
            log_args = next(t for t in tools if t.name == "log").input_schema["properties"]
            assert log_args["max_count"]["maximum"] == 4294967295, log_args
            rollback_args = next(t for t in tools if t.name == "rollback").input_schema["properties"]
            assert rollback_args["paths"]["maxItems"] == 100000, rollback_args

            cp = await call(session, "checkpoint", {"dir": wt, "name": "start"})
            assert cp["name"] == "start" and cp["onboarded"] is True, cp
            with open(os.path.join(wt, "main.py"), "w") as f:
                f.write("print('v2')\n")
            with open(os.path.join(wt, "new.py"), "w") as f:
                f.write("x = 1\n")
            status = await call(session, "status", {"worktree": wt})
            assert status["stats"]["files"] == 2, status
            snap = await call(session, "snapshot", {"worktree": wt, "message": "turn 1"})
            assert snap["changed"] is True and snap["added"] == 1 and snap["modified"] == 1, snap
            diff = await call(session, "diff", {"a": cp["snapshot"], "b": snap["snapshot"]})
            assert [a["path"] for a in diff["added"]] == ["new.py"], diff
            assert [m["path"] for m in diff["modified"]] == ["main.py"], diff

            undone = await call(session, "undo", {"worktree": wt})
            assert sorted(undone["reverted"]) == ["main.py", "new.py"], undone
            assert open(os.path.join(wt, "main.py")).read() == "print('v1')\n"
            assert not os.path.exists(os.path.join(wt, "new.py"))
            redone = await call(session, "redo", {"worktree": wt})
            assert sorted(redone["reapplied"]) == ["main.py", "new.py"], redone

            rewound = await call(session, "rewind", {"dir": wt, "to": "start"})
            assert rewound["deleted"] == ["new.py"], rewound
            review = await call(session, "review", {"dir": wt})
            assert review["stats"]["files"] == 0, review

            dest = os.path.join(WORK, "verifier")
            co = await call(session, "checkout", {"snapshot": snap["snapshot"], "dest": dest})
            assert co["files"] == 2, co
            assert open(os.path.join(dest, "main.py")).read() == "print('v2')\n"
            log = await call(session, "log", {"target": snap["snapshot"], "max_count": 5})
            assert [s["id"] for s in log["snapshots"]] == [snap["snapshot"], cp["snapshot"]], log

            # Reads leave the store's file as it was (an open `cairn ui` page takes a write
            # for a change of the store).
            before = store_file()
            await call(session, "status", {"worktree": wt})
            await call(session, "diff", {"a": cp["snapshot"], "b": snap["snapshot"]})
            await call(session, "log", {"target": snap["snapshot"]})
            await call(session, "review", {"dir": wt})
            await call(session, "remote_list", {})
            await call(session, "deps_list", {})
            assert store_file() == before, (before, store_file())

            # A mounted worktree: ready at once, snapshotted like any other, then unmounted.
            mnt = os.path.join(WORK, "mounted")
            mounted = await call(session, "mount", {"snapshot": snap["snapshot"], "dir": mnt})
            assert mounted["worktree"] == mnt and mounted["snapshot"] == snap["snapshot"], mounted
            assert open(os.path.join(mnt, "main.py")).read() == "print('v2')\n"
            with open(os.path.join(mnt, "mounted.py"), "w") as f:
                f.write("y = 2\n")
            msnap = await call(session, "snapshot", {"worktree": mnt, "message": "in the mount"})
            assert msnap["added"] == 1 and msnap["parent"] == snap["snapshot"], msnap
            gone = await call(session, "unmount", {"dir": mnt})
            assert gone["materialized"] is False, gone
            assert not os.path.exists(os.path.join(mnt, "mounted.py"))

            # The snapshot goes to the store's remote (added by the test), for other machines.
            remotes = await call(session, "remote_list", {})
            assert [r["name"] for r in remotes["remotes"]] == ["origin"], remotes
            pushed = await call(session, "push", {"snapshots": [snap["snapshot"]]})
            assert pushed["pushed"] == [snap["snapshot"]] and pushed["objects_sent"] > 0, pushed
            again = await call(session, "push", {"snapshots": [snap["snapshot"]]})
            assert again["objects_sent"] == 0, again
            pulled = await call(session, "pull", {"snapshots": [snap["snapshot"]]})
            assert pulled["pulled"] == [snap["snapshot"]] and pulled["objects_received"] == 0, pulled
            nowhere = await call(session, "push", {"snapshots": [snap["snapshot"]], "remote": "nowhere"}, ok=False)
            assert nowhere["error"]["code"] == "unknown_remote", nowhere
            shared = await call(session, "ref_set", {"name": "verified@origin", "snapshot": snap["snapshot"]})
            assert shared["refs"] == [{"name": "verified@origin", "snapshot": snap["snapshot"]}], shared
            listed = await call(session, "ref_list", {"remote": "origin"})
            assert listed["refs"] == shared["refs"], listed
            moved = await session.call_tool("ref_set", {"name": "verified@origin", "snapshot": cp["snapshot"]})
            assert moved.is_error and snap["snapshot"] in text(moved), text(moved)

            # The agent asks for the grant a sandboxed run needs. This client cannot ask its
            # user (no elicitation), so it stays a request for a person: nothing is granted.
            cache = os.path.realpath(os.path.join(WORK, "cache"))
            os.makedirs(cache)
            ask = {"worktree": wt, "write": [cache], "once": True, "reason": "the build cache"}
            asked = await call(session, "policy_allow", ask)
            assert asked["policy"]["once"]["writable"] == [] and asked["policy"]["writable"] == [], asked
            [req] = asked["requests"]
            assert req["id"] == asked["requested"] and req["writable"] == [cache] and req["once"] is True, req
            assert req["by"].startswith("MCP client ") and req["reason"] == "the build cache", req
            assert f"cairn policy allow {wt} --request {req['id']}" in asked["message"], asked
            shown = await call(session, "policy", {"worktree": wt})
            assert shown["requests"] == asked["requests"] and shown["policy"] == asked["policy"], shown
            again = await call(session, "policy_allow", ask)
            assert again["requested"] == req["id"] and len(again["requests"]) == 1, again
            # The agent cannot confirm for the user, nor reach a pseudo file system.
            self_confirmed = await call(session, "policy_allow", {**ask, "yes": True}, ok=False)
            assert "yes" in self_confirmed, self_confirmed
            relative = await call(session, "policy_allow", {"worktree": wt, "write": ["cache"]}, ok=False)
            assert relative["error"]["code"] == "invalid_grant", relative
            for pseudo in ("/proc", "/proc/sys/kernel", "/sys", "/dev"):
                refused = await call(session, "policy_allow", {"worktree": wt, "write": [pseudo]}, ok=False)
                assert refused["error"]["code"] == "invalid_grant", refused
                assert "never granted" in refused["error"]["message"], refused
            never = await call(session, "policy_revoke", {"worktree": wt, "write": [cache], "once": True}, ok=False)
            assert never["error"]["code"] == "unknown_grant", never

            # gc: with every op-log entry recent nothing goes; under a budget of one byte
            # the history goes (`between`: only the op log and its child keep it), never
            # what is named nor the state undo would go back to (`undoable`), and
            # `retained` says what keeps the rest.
            drafts = []
            for content in ("draft 1\n", "draft 2\n", "draft 3\n"):
                with open(os.path.join(wt, "draft.txt"), "w") as f:
                    f.write(content)
                drafts.append(await call(session, "snapshot", {"worktree": wt}))
            latest = drafts[-1]
            undoable = latest["parent"]
            between = drafts[-2]["parent"]
            gc_schema = next(t for t in tools if t.name == "gc").input_schema
            assert gc_schema["properties"]["max_size"]["type"] == "integer", gc_schema
            dry = await call(session, "gc", {"dry_run": True, "keep_within": 30, "max_size": 1})
            assert dry["dry_run"] is True and dry["ops_pruned"] == 0 and dry["removed"] == [], dry
            kept = {(r["reason"], r.get("name")) for r in dry["retained"]}
            assert ("named checkpoint", "start") in kept, kept
            collected = await call(session, "gc", {"max_size": 1})
            assert collected["ops_pruned"] > 0, collected
            assert between in [r["id"] for r in collected["removed"]], collected
            history = await call(session, "log", {"target": wt})
            assert [s["id"] for s in history["snapshots"]] == [latest["snapshot"], undoable], history
            kept = {(r["reason"], r.get("name")) for r in collected["retained"]}
            assert ("named checkpoint", "start") in kept and ("remote ref", "verified@origin") in kept, kept
            assert any(r["reason"] == "undo" and r["snapshot"] == undoable for r in collected["retained"]), collected
            again = os.path.join(WORK, "after-gc")
            co = await call(session, "checkout", {"snapshot": snap["snapshot"], "dest": again})
            assert open(os.path.join(again, "main.py")).read() == "print('v2')\n"
            bad_gc = await call(session, "gc", {"max_size": -1}, ok=False)
            assert "max_size" in json.dumps(bad_gc), bad_gc

            # Refusals and errors come back as tool errors carrying cairn's message.
            for _ in range(10):
                r = await session.call_tool("undo", {"worktree": dest})
                if r.is_error:
                    break
            body = json.loads(text(r))
            assert body["message"] == "No edits have been applied to any file with this session.", body
            bad = await call(session, "rollback", {"worktree": wt}, ok=False)
            assert "snapshot" in bad, bad
            missing = await call(session, "snapshot", {"worktree": os.path.join(WORK, "nope")}, ok=False)
            assert missing["error"]["code"] in ("invalid_path", "not_a_worktree"), missing
            try:
                await session.call_tool("no_such_tool", {})
                raise AssertionError("an unknown tool must be a protocol error")
            except MCPError as e:
                assert "no_such_tool" in e.error.message, e.error
    await elicitation(params, wt)
    print(json.dumps({"tools": sorted(names), "ok": True}))


async def ask_with(params, answer, args):
    """Calls policy_allow in a session whose client asks its user through elicitation;
    `answer(params)` is the user's answer. Returns (is_error, body, questions asked)."""
    asked = []

    async def on_elicit(context, request):
        asked.append(request)
        return answer(request)

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, elicitation_callback=on_elicit) as session:
            await session.initialize()
            result = await session.call_tool("policy_allow", args)
            return result.is_error, json.loads(text(result)), asked


async def elicitation(params, wt):
    """A client that asks its user: the user's answer grants the request or denies it."""
    def accept(content):
        return lambda request: types.ElicitResult(action="accept", content=content)

    def policy_of(body):
        return body["policy"]["writable"], [r["id"] for r in body["requests"]]

    out = os.path.realpath(os.path.join(WORK, "out"))
    os.makedirs(out)
    args = {"worktree": wt, "write": [out], "reason": "test output"}
    # Declined: nothing granted, the request is closed.
    is_error, body, asked = await ask_with(params, lambda r: types.ElicitResult(action="decline"), args)
    assert is_error and "declined" in body["message"], body
    assert len(asked) == 1 and out in asked[0].message and "test output" in asked[0].message, asked
    assert asked[0].requested_schema["required"] == ["grant"], asked[0].requested_schema
    assert out not in policy_of(body)[0], body
    open_before = policy_of(body)[1]
    # Accepted without ticking "grant": declined too.
    is_error, body, _ = await ask_with(params, accept({"grant": False}), args)
    assert is_error and out not in policy_of(body)[0] and policy_of(body)[1] == open_before, body
    # Dismissed: the request stays for a person.
    is_error, body, _ = await ask_with(params, lambda r: types.ElicitResult(action="cancel"), args)
    assert not is_error and out not in policy_of(body)[0], body
    assert body["requested"] in policy_of(body)[1], body
    # Accepted: granted, and the request closed.
    is_error, body, _ = await ask_with(params, accept({"grant": True}), args)
    assert not is_error and out in policy_of(body)[0], body
    assert policy_of(body)[1] == open_before, body
    # The user's credentials: granted only if the user types the path.
    aws = os.path.join(os.environ["HOME"], ".aws")
    os.makedirs(aws)
    aws = os.path.realpath(aws)
    secret = {"worktree": wt, "write": [aws]}
    is_error, body, asked = await ask_with(params, accept({"grant": True}), secret)
    assert is_error and aws not in policy_of(body)[0], body
    assert asked[0].requested_schema["required"] == ["grant", "confirm_1"], asked[0].requested_schema
    assert aws in asked[0].message and "credentials" in asked[0].message, asked[0].message
    is_error, body, _ = await ask_with(params, accept({"grant": True, "confirm_1": aws}), secret)
    assert not is_error and aws in policy_of(body)[0], body


asyncio.run(main())
