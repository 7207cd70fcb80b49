"""``python -m mq_bridge``: the same as the ``mq-bridge`` command."""

import sys

from mq_bridge.cli import main

sys.exit(main())
