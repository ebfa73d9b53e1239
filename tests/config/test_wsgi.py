"""``config/wsgi.py`` loads the whole application and freezes it (``config.startup``): the
garbage collector's full collections then skip the objects that live as long as the process.
Checked in a fresh interpreter, as gunicorn imports the module."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.live_server import REPO

pytestmark = pytest.mark.slow  # a fresh interpreter

PROBE = """
import gc, json, sys
import config.wsgi
print(json.dumps({
    "frozen": gc.get_freeze_count(),
    "tracked": len(gc.get_objects()),
    "views_loaded": "executionapi.views" in sys.modules and "operatorapi.views" in sys.modules,
}))
"""


def test_the_wsgi_module_loads_the_urlconf_and_freezes_what_is_alive():
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="config.settings.test")
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    probe = json.loads(out.stdout.strip().splitlines()[-1])
    assert probe["views_loaded"]  # loaded before the freeze, not at the first request
    assert probe["frozen"] > 50_000
    # what a full collection still walks: the few objects created after the freeze
    assert probe["tracked"] < probe["frozen"] / 20
