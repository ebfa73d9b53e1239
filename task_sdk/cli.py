"""Command line: ``python -m task_sdk run --server URL --ti-id ID --token TOKEN file.py:function``.

Every option can also come from the environment (``TASK_SDK_SERVER``, ``TASK_SDK_TI_ID``,
``TASK_SDK_TOKEN``, ``TASK_SDK_TASK_ID``, ``TASK_SDK_TRY_NUMBER``,
``TASK_SDK_HEARTBEAT_INTERVAL``). Exits 0 when the task succeeded and was recorded; otherwise
prints one line with the reason to stderr and exits 1 (2 for bad usage).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys

import httpx

from task_sdk.client import Client
from task_sdk.supervisor import DEFAULT_HEARTBEAT_INTERVAL, Supervisor


def _env_default(name: str) -> str | None:
    # a string default goes through the option's ``type`` like a command-line value, so a bad
    # environment value is a usage error naming the option
    return os.environ.get(name) or None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m task_sdk", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run one task instance under a supervisor")
    run.add_argument("task", help="path/to/file.py:function (or package.module:function)")
    run.add_argument(
        "--server",
        default=_env_default("TASK_SDK_SERVER"),
        help="server URL, e.g. http://127.0.0.1:8000 (env TASK_SDK_SERVER)",
    )
    run.add_argument(
        "--ti-id",
        default=_env_default("TASK_SDK_TI_ID"),
        help="task instance id (env TASK_SDK_TI_ID)",
    )
    run.add_argument(
        "--token",
        default=_env_default("TASK_SDK_TOKEN"),
        help="the task instance's JWT (env TASK_SDK_TOKEN)",
    )
    run.add_argument(
        "--task-id",
        default=_env_default("TASK_SDK_TASK_ID"),
        help="the task instance's task id, under which its XComs are kept (env "
        "TASK_SDK_TASK_ID; default: the @task's task_id, else the function's name)",
    )
    run.add_argument(
        "--try-number",
        type=int,
        default=_env_default("TASK_SDK_TRY_NUMBER"),
        help="try number, used when the server does not say whether to retry",
    )
    run.add_argument(
        "--heartbeat-interval",
        type=float,
        default=_env_default("TASK_SDK_HEARTBEAT_INTERVAL") or DEFAULT_HEARTBEAT_INTERVAL,
        help=f"seconds between heartbeats (default {DEFAULT_HEARTBEAT_INTERVAL:g})",
    )
    run.add_argument("--log-level", default=os.environ.get("TASK_SDK_LOG_LEVEL", "INFO"))
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    missing = [name for name in ("server", "ti_id", "token") if not getattr(args, name)]
    if missing:
        options = ", ".join("--" + name.replace("_", "-") for name in missing)
        parser.error(f"missing {options} (or the TASK_SDK_* environment variables)")
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        client = Client(args.server, args.token)
    except httpx.InvalidURL as exc:
        parser.error(f"argument --server: {exc}")
    with client:
        supervisor = Supervisor(
            client,
            args.ti_id,
            args.task,
            try_number=args.try_number,
            task_id=args.task_id,
            heartbeat_interval=args.heartbeat_interval,
        )
        # SIGTERM stops the task process; run() then reports the task instance failed (or
        # up_for_retry) instead of leaving it running, and we exit 128 + SIGTERM.
        signal.signal(signal.SIGTERM, lambda signum, frame: supervisor.terminate())
        result = supervisor.run()
    if supervisor.terminated:
        sys.stderr.write(
            f"error: terminated (SIGTERM); the task process was stopped and the task instance "
            f"ended {result.state or 'without a reported state'}\n"
        )
        return 128 + signal.SIGTERM
    if result.succeeded:
        sys.stdout.write(f"task instance {result.ti_id} succeeded\n")
        return 0
    sys.stderr.write(f"error: {result.reason or f'task ended {result.state}'}\n")
    return 1


def main_entry() -> None:
    """Console script ``task-sdk``."""
    sys.exit(main())
