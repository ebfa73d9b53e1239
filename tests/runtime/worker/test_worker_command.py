"""``manage.py worker``: its help and its refusals of bad options (nothing is claimed)."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from assets_app.models import TaskInstance, TaskInstanceState
from runtime.management.commands.worker import Command
from tests.factories import TaskInstanceFactory

pytestmark = pytest.mark.django_db


def test_help_describes_every_option():
    text = " ".join(Command().create_parser("manage.py", "worker").format_help().split())

    assert " ".join(Command.help.split()) in text
    for option in (
        "--server",
        "--concurrency",
        "--once",
        "--max-tasks",
        "--poll-interval",
        "--grace-period",
        "--log-dir",
    ):
        assert option in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(("--server", "registry:8000"), "--server must be an http(s) URL", id="url"),
        pytest.param(("--concurrency", "0"), "--concurrency must be >= 1", id="concurrency"),
        pytest.param(("--max-tasks", "0"), "--max-tasks must be >= 1", id="max-tasks"),
        pytest.param(("--poll-interval", "0"), "--poll-interval must be > 0", id="poll"),
        pytest.param(("--grace-period", "-1"), "--grace-period must be >= 0", id="grace"),
    ],
)
def test_bad_options_are_refused_before_anything_is_claimed(args, message, tmp_path):
    ti = TaskInstanceFactory(state=TaskInstanceState.SCHEDULED)

    with pytest.raises(CommandError, match=re.escape(message)):
        call_command("worker", *args, "--log-dir", str(tmp_path), stdout=StringIO())

    assert TaskInstance.objects.get(pk=ti.pk).state == TaskInstanceState.SCHEDULED
