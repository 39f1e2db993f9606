"""Headless Chromium over the DevTools protocol on a pipe (`--remote-debugging-pipe`).

The report test must look at the page as a browser renders it, with scripts disabled
for the page: the DevTools protocol reads the rendered layout (which text boxes were
laid out, and where) and takes screenshots, without a WebSocket client or any package:
Chromium reads NUL-terminated JSON messages on fd 3 and writes them on fd 4.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BINARIES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    for name in ("/usr/lib/chromium/chromium", *BINARIES):
        path = shutil.which(name) or (name if os.access(name, os.X_OK) else None)
        if path:
            return path
    return None


TRAMPOLINE = (
    "import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); "
    "os.execv(sys.argv[3], sys.argv[3:])"
)


class Browser:
    """One headless Chromium process and one page session attached to a tab."""

    def __init__(self, binary: str, width_px: int = 1200, height_px: int = 900) -> None:
        self._profile = tempfile.mkdtemp(prefix="ql-chromium-")
        # Chromium reads commands on its fd 3 and answers on its fd 4. The pipe ends it
        # gets are moved above 9 first, so that moving them onto 3 and 4 never overwrites
        # one with the other, whatever numbers the pipes had (dash takes no fd above 9,
        # so a small Python trampoline does the moves).
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        child_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
        child_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
        for fd in (to_child_r, from_child_w):
            os.close(fd)
        args = [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--remote-debugging-pipe",
            f"--user-data-dir={self._profile}",
            f"--window-size={width_px},{height_px}",
            "--blink-settings=scriptEnabled=false",
            "about:blank",
        ]
        self._proc = subprocess.Popen(
            [sys.executable, "-c", TRAMPOLINE, str(child_r), str(child_w), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(child_r, child_w),
        )
        os.close(child_r)
        os.close(child_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None

    def call(self, method: str, session: bool = True, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session and self.session is not None:
            message["sessionId"] = self.session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._read()
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def wait_for(self, method: str) -> dict[str, Any]:
        for index, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(index)
        while True:
            event = self._read()
            if event.get("method") == method:
                return event
            self.events.append(event)

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def open(self, url: str) -> None:
        """A new tab on `url`, loaded, with this object's calls going to it."""
        target = self.call("Target.createTarget", session=False, url="about:blank")
        attached = self.call(
            "Target.attachToTarget", session=False, targetId=target["targetId"], flatten=True
        )
        self.session = attached["sessionId"]
        self.call("Page.enable")
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def screenshot(self, path: Path) -> None:
        """The whole page, beyond the viewport, as a PNG."""
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, OSError):
            self.call("Browser.close", session=False)
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        os.close(self._to_child)
        os.close(self._from_child)
        shutil.rmtree(self._profile, ignore_errors=True)
