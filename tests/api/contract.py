"""Runs schemathesis against a running `cairn serve` through a loopback TCP bridge.

schemathesis speaks TCP; the server listens on a Unix socket. The bridge accepts on
127.0.0.1 (an ephemeral port) and pipes each connection to the socket, byte for byte, so
what schemathesis judges is exactly what the server answered.

usage: contract.py SOCKET SPEC SANDBOX SEED MAX_EXAMPLES [st run options...]
SANDBOX is the only directory generated paths may name (see hooks.py). schemathesis runs
in the current directory (it keeps its files there). Exit status: schemathesis's (0: no
failure).
"""

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path


def start_bridge(socket_path):
    """The TCP port forwarding to `socket_path`, each connection served by two threads.

    Each direction has its own socket half, so a server that answers before it has read
    the whole request (a 405, a 413) and closes is seen as it is: its answer is read out
    to the client before the close, while what is left of the request is read and
    dropped. (asyncio's streams share one transport per socket: a failed write there
    closes the reading side too, and a queued answer was lost.)
    """
    listener = socket.create_server(("127.0.0.1", 0))

    def requests(client, server):
        # Client to server; once the server stops reading, drain what the client sends.
        writable = True
        try:
            while data := client.recv(65536):
                if writable:
                    try:
                        server.sendall(data)
                    except OSError:
                        writable = False
        except OSError:
            pass
        try:
            server.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def answers(client, server):
        # Server to client, to the server's close; then the client's end of it.
        try:
            while data := server.recv(65536):
                client.sendall(data)
        except OSError:
            pass
        try:
            client.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def serve(client):
        # The drain ends when the client closes, or at the latest after its timeout.
        client.settimeout(60)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            server.connect(socket_path)
        except OSError:
            server.close()
            client.close()
            return
        inbound = threading.Thread(target=requests, args=(client, server), daemon=True)
        inbound.start()
        answers(client, server)
        inbound.join()
        server.close()
        client.close()

    def accept():
        while True:
            try:
                client, _ = listener.accept()
            except OSError as error:
                print(f"the bridge stopped accepting: {error}", file=sys.stderr, flush=True)
                return
            threading.Thread(target=serve, args=(client,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener.getsockname()[1]


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
