"""``python -m app`` is ``headroom``."""

from app.cli import main

raise SystemExit(main())
