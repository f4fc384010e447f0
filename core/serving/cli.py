"""``python -m core serve``: start the app with the operator's serving policy.

``serve [--allow-root DIR]… [--demo] [--port N] [--address HOST]`` checks the roots, puts them in
``CTE_ALLOW_ROOTS`` / ``CTE_DEMO`` (see :mod:`core.serving`) and runs ``streamlit run app.py`` from the project
root (in place of this process), so the shipped ``.streamlit/config.toml`` applies. Bad flags: one line on stderr,
exit status 2.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import socket
import sys
from typing import Any

from . import ENV_DEMO, ENV_ROOTS, parse_roots
from ..errors import ChatTemplateExplorerError

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


def serve_command(roots: list[str], demo: bool, port: int, address: str,
                  environ: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The ``streamlit run`` command line and its environment for these flags.

    ``roots`` are checked and resolved with :func:`core.serving.parse_roots` (raises
    :class:`core.serving.ServingConfigError`); the returned environment is ``environ`` (default ``os.environ``)
    with ``CTE_ALLOW_ROOTS`` set to exactly these roots (an inherited value is replaced) and ``CTE_DEMO``.
    """
    resolved = parse_roots(roots, "--allow-root")
    env = dict(os.environ if environ is None else environ)
    env[ENV_ROOTS] = os.pathsep.join(str(r) for r in resolved)
    env[ENV_DEMO] = "1" if demo else "0"
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port),
           "--server.address", address]
    return cmd, env


def listen_problem(address: str, port: int) -> str | None:
    """Why this machine cannot listen on ``address``:``port`` (an unknown name, a port in use or reserved), or
    None. Checked by binding once, so the error is ours — one line — and not streamlit's traceback after start."""
    try:
        infos = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, where = infos[0]
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does: a TIME_WAIT is no bar
            s.bind(where)
    except OSError as e:  # socket.gaierror too
        return e.strerror or str(e)
    return None


def _cmd_serve(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        print(f"error: --port {args.port}: expected a port number between 1 and 65535", file=sys.stderr)
        return 2
    try:
        cmd, env = serve_command(args.allow_root or [], args.demo, args.port, args.address)
    except ChatTemplateExplorerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    problem = listen_problem(args.address, args.port)
    if problem:
        flag = f"--address {args.address}" if args.address != "127.0.0.1" else f"--port {args.port}"
        print(f"error: {flag}: cannot listen on {args.address}:{args.port} ({problem})", file=sys.stderr)
        return 2
    roots = env["CTE_ALLOW_ROOTS"]
    print(f"serving on http://{args.address}:{args.port} · {'demo mode' if args.demo else 'local mode'} · "
          f"server folders: {roots or 'none (upload, Hub and bundled examples only)'}", file=sys.stderr)
    sys.stderr.flush()
    os.chdir(ROOT)
    os.execve(cmd[0], cmd, env)  # streamlit takes this process over: signals (Ctrl-C, a service manager) reach it
    return 0  # not reached


def register(subparsers: Any) -> None:
    """Add ``serve`` to an ``argparse`` sub-parsers object (called by ``core/cli.py``)."""
    s = subparsers.add_parser("serve", help="run the app (streamlit) with allowed server folders and demo mode")
    s.add_argument("--allow-root", action="append", metavar="DIR",
                   help="a folder whose templates browser users may open (repeatable); none: no server path is "
                        "read at all")
    s.add_argument("--demo", action="store_true",
                   help="public demo: smaller paste/upload caps, bounded concurrent analyses and corpus runs, the Hub "
                        "never sends HF_TOKEN")
    s.add_argument("--port", type=int, default=8501, help="port (default 8501)")
    s.add_argument("--address", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; 0.0.0.0 to serve other machines)")
    s.set_defaults(func=_cmd_serve)
