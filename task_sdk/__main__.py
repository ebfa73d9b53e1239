import sys

from task_sdk.cli import main

sys.exit(main())
