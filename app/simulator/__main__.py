"""``python -m app.simulator``: see :mod:`app.simulator.cli`."""

import sys

from app.simulator.cli import main

sys.exit(main())
