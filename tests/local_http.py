"""A throwaway HTTP server on 127.0.0.1 for tests: answer requests with a plain function."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, str, bytes]
"""Status, content type, body."""
Answer = Callable[[str, str, bytes], Reply]
"""(method, path, request body) → reply."""


@contextmanager
def serve(answer: Answer) -> Iterator[str]:
    """Serve ``answer`` on a free port of 127.0.0.1; yields the base URL."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # else each reply waits ~40 ms for a delayed ACK

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _reply(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            status, kind, data = answer(self.command, self.path, body)
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _reply

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
