"""An OpenAI-compatible chat completions server on 127.0.0.1 (in the test's process):
it answers each sample's first `rate_limited` requests HTTP 429 with a Retry-After
and a request id of its own, then "ok" with usage that names the sample (task.py);
it holds every answer until `go` is set."""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

STUB_INPUT_BASE = 2000
"""Uncached input tokens of sample N's answer: 2000 + N (task.py says so too)."""
HOLD_S_MAX = 120.0


def number_of(text: str) -> int:
    """N, of the question "sample N" (task.py)."""
    return int(text.split()[-1])


class Stub:
    def __init__(self, rate_limited: int) -> None:
        self.rate_limited = rate_limited
        self.go = threading.Event()
        self.lock = threading.Lock()
        self.requests: Counter[int] = Counter()
        self.throttled: dict[str, int] = {}
        """Request id of each 429 answered -> the sample number it was for."""
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> Stub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.go.set()
        self.server.shutdown()
        self.server.server_close()

    def answer(self, request: dict[str, Any]) -> tuple[int, dict[str, str], dict[str, Any]]:
        number = number_of(request["messages"][-1]["content"])
        with self.lock:
            self.requests[number] += 1
            count = self.requests[number]
        if count <= self.rate_limited:
            request_id = f"req_429_{number}_{count}"
            with self.lock:
                self.throttled[request_id] = number
            headers = {"retry-after-ms": "10", "retry-after": "0.01", "x-request-id": request_id}
            error = {
                "message": "Rate limit reached",
                "type": "requests",
                "code": "rate_limit_exceeded",
            }
            return 429, headers, {"error": error}
        prompt = STUB_INPUT_BASE + number
        body = {
            "id": f"chatcmpl-{number}-{count}",
            "object": "chat.completion",
            "created": 0,
            "model": request["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "ok"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": prompt, "completion_tokens": 2, "total_tokens": prompt + 2},
        }
        return 200, {"x-request-id": f"req_ok_{number}_{count}"}, body

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["content-length"])))
                stub.go.wait(HOLD_S_MAX)
                status, headers, body = stub.answer(request)
                data = json.dumps(body).encode()
                self.send_response(status)
                for name, value in {**headers, "content-type": "application/json"}.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
