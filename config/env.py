"""The one place that reads the environment (and an optional ``.env`` file)."""

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
# OS variables win over the file.
env.read_env(str(BASE_DIR / ".env"), overwrite=False)
