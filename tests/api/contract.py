"""Runs schemathesis against a running `cairn serve` through a loopback TCP bridge.

schemathesis speaks TCP; the server listens on a Unix socket. The bridge accepts on
127.0.0.1 (an ephemeral port) and pipes each connection to the socket, byte for byte, so
what schemathesis judges is exactly what the server answered.

usage: contract.py SOCKET SPEC SANDBOX SEED MAX_EXAMPLES [st run options...]
SANDBOX is the only directory generated paths may name (see hooks.py). schemathesis runs
in the current directory (it keeps its files there). Exit status: schemathesis's (0: no
failure).
"""

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        try:
            writer.close()
        except RuntimeError:
            pass


def start_bridge(socket_path):
    """The TCP port forwarding to `socket_path`, served by a daemon thread."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    port = []

    async def handle(tcp_reader, tcp_writer):
        try:
            unix_reader, unix_writer = await asyncio.open_unix_connection(socket_path)
        except OSError:
            tcp_writer.close()
            return
        await asyncio.gather(pipe(tcp_reader, unix_writer), pipe(unix_reader, tcp_writer))

    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port.append(server.sockets[0].getsockname()[1])
        ready.set()
        async with server:
            await server.serve_forever()

    threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True).start()
    if not ready.wait(10):
        sys.exit("the bridge did not start")
    return port[0]


def main():
    socket_path, spec, sandbox, seed, max_examples = sys.argv[1:6]
    spec = str(Path(spec).resolve())
    port = start_bridge(socket_path)
    here = Path(__file__).resolve().parent
    env = dict(os.environ)
    env["SCHEMATHESIS_HOOKS"] = "cairn_hooks"
    env["PYTHONPATH"] = str(here)
    env["CAIRN_SANDBOX"] = sandbox
    # No __pycache__ in the source tree.
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--no-color",
        "--config-file",
        str(here / "schemathesis.toml"),
        "run",
        spec,
        "--url",
        f"http://127.0.0.1:{port}",
        "--checks",
        "all",
        "--seed",
        seed,
        "--max-examples",
        max_examples,
        "--generation-database",
        "none",
        "--workers",
        "1",
        "--request-timeout",
        "60",
        # `cairn ui`'s event stream, not a route of `cairn serve` (tests/cli/ui_server.rs).
        "--exclude-path",
        "/v1/events",
        *sys.argv[6:],
    ]
    print("+", " ".join(command), flush=True)
    sys.exit(subprocess.run(command, env=env).returncode)


if __name__ == "__main__":
    main()
