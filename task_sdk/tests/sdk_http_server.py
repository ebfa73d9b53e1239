"""A tiny real HTTP execution API for the CLI test (no tests in this module)."""

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from sdk_helpers import sample


@contextlib.contextmanager
def serve_fake_api():
    received = []

    class Handler(BaseHTTPRequestHandler):
        def _body(self):
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length).decode()

        def _reply(self, status, payload=None):
            data = json.dumps(payload).encode() if payload is not None else b""
            self.send_response(status)
            if data:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_PATCH(self):
            received.append((self.path, self._body()))
            if self.path.endswith("/run"):
                self._reply(200, json.loads(sample("run_response_minimal.json")))
            else:
                self._reply(204)

        def do_PUT(self):
            received.append((self.path, self._body()))
            self._reply(204)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
