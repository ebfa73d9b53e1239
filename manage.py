#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    if sys.argv[1:2] == ["celery_worker"]:
        # the Celery worker needs no Django, database nor secret: run it before settings are
        # read (runtime/celery_worker.py; `manage.py help celery_worker` still describes it)
        from runtime.celery_worker import main as celery_worker

        sys.exit(celery_worker(sys.argv[2:]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
