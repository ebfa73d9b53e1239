"""Starts ``python -m task_sdk ARGS`` with ``task_sdk.forking.start_cli`` from a process of its
own (the tests' process runs threads, so it would not fork). No tests in this module.

It sets up logging of its own first, which the child must not inherit.
``python fork_helper.py SPEC``, SPEC a JSON object: ``args``, ``env`` (the child's whole
environment), ``output`` (a file path), ``threads`` (start a thread first). Prints one JSON
line: the kind of process started and its exit status.
"""

import json
import logging
import sys
import threading
import time

from task_sdk.forking import preload, start_cli

spec = json.loads(sys.argv[1])
# logging of its own, as a worker has: the child must not inherit it
logging.basicConfig(level=logging.ERROR, format="PARENT'S FORMAT %(message)s")
logging.getLogger("task_sdk.task").setLevel(logging.CRITICAL)
if spec.get("threads"):
    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
preload()
with open(spec["output"], "ab") as output:
    process = start_cli(spec["args"], env=spec["env"], output=output)
code = process.wait()
print(json.dumps({"kind": type(process).__name__, "returncode": code}), flush=True)
