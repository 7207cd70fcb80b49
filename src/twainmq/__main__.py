"""``python -m twainmq``: the same as the ``twainmq`` command."""

import sys

from twainmq.cli import main

sys.exit(main())
