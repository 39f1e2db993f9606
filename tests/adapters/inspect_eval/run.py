"""`python tests/adapters/inspect_eval/run.py AUDIT_FILE eval ...`: inspect's command line,
with every network address it looks up or connects to (other than loopback) written
to AUDIT_FILE, one a line (an audit hook: what the process tried, not what a
firewall let through)."""

from __future__ import annotations

import sys
from typing import Any

LOOPBACK = ("127.0.0.1", "::1", "localhost")


def _audited(path: str) -> None:
    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "socket.getaddrinfo":
            host = args[0]
        elif event == "socket.connect" and isinstance(args[1], tuple):
            host = args[1][0]
        else:
            return
        if isinstance(host, bytes):
            host = host.decode()
        if host is not None and str(host) not in LOOPBACK:
            with open(path, "a", encoding="utf-8") as out:
                out.write(f"{event} {host}\n")

    sys.addaudithook(hook)


if __name__ == "__main__":
    _audited(sys.argv[1])
    from inspect_ai._cli.main import main

    sys.argv = ["inspect", *sys.argv[2:]]
    main()
