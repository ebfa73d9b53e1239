"""gunicorn settings read whenever gunicorn starts in the repository root (the deployment
command of docs/deployment.md, the test suite's and the benchmarks' servers); command-line
options win.

- ``limit_request_line``: the largest request line gunicorn accepts (8190 bytes; its default
  is 4094): an asset's name or uri of up to 1500 characters travels in the query string of
  ``/execution/assets/by-name`` and ``/execution/asset-events/by-asset``. A longer line is
  answered 414 by gunicorn itself (declared in the OpenAPI schema).
- The control socket (gunicorn ≥ 25): one per server, at ``GUNICORN_CONTROL_SOCKET`` when set;
  otherwise none, because every gunicorn of a user shares one default path
  (``$XDG_RUNTIME_DIR/gunicorn.ctl``), so several servers on one host would take it from each
  other, and ``gunicornc`` would reach whichever started last.
"""

import os

limit_request_line = 8190

control_socket = os.environ.get("GUNICORN_CONTROL_SOCKET", "")
control_socket_disable = not control_socket
