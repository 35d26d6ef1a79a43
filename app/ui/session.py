"""What is one person's and what is everyone's: a browser session's own choices, kept in the workspace
under the session's id (the ``?s=`` of its URL, so a reload of that tab finds them again).

Shared by everyone on a workspace: the datasets, the path mapping and the saved scenario sets (what is
saved to the workspace). Each session's own: the datasets in its analysis, the window, the promises and
the Economics inputs (prices, the grid, the engine facts) — ``SessionSettings``, which reads and writes
settings under ``session/<id>/<key>`` and never the shared key. A value a session has never set is read
from the workspace-wide setting of that name (what a workspace held before settings were per session,
or what the CLI keeps there), which no session writes.

A session's rows expire: each session stamps ``session/<id>/_seen`` when it opens a page (at most once
an hour), and a session not seen for ``$HEADROOM_SESSION_DAYS`` days (default 30; ``0``: never expire)
loses its rows; the session asking is never expired, whatever its stamp.
"""

from __future__ import annotations

import os
import re
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

SESSION_PARAM = "s"  # the URL query parameter holding a session's id
SEEN = "_seen"  # the setting holding when the session last opened a page (ISO-8601, UTC)
DAYS_ENV = "HEADROOM_SESSION_DAYS"
DEFAULT_DAYS = 30.0
STAMP_EVERY = timedelta(hours=1)  # a page run writes the stamp (and expires others) at most this often
_VALID = re.compile(r"[A-Za-z0-9_-]{8,64}")


class Settings(Protocol):
    def get_setting(self, key: str, default: Any = None) -> Any: ...

    def set_setting(self, key: str, value: Any) -> None: ...


class Expiring(Settings, Protocol):
    def expire_sessions(self, now: datetime, cutoff: datetime, keep: str) -> int: ...


def max_age() -> timedelta | None:
    """How long a session's rows outlive its last visit (``$HEADROOM_SESSION_DAYS``; None: forever)."""
    text = os.environ.get(DAYS_ENV, "").strip()
    try:
        days = float(text) if text else DEFAULT_DAYS
    except ValueError:
        raise ValueError(f"${DAYS_ENV}={text!r} is not a number of days") from None
    return timedelta(days=days) if days > 0 else None


def touch(ws: Expiring, session_id: str, now: datetime | None = None, age: timedelta | None = None) -> int:
    """Stamp ``session_id`` as seen ``now`` (naive UTC) unless it was within ``STAMP_EVERY``, and then
    expire the sessions not seen for ``age`` (default ``max_age()``); returns the rows deleted."""
    now = now or datetime.now(UTC).replace(tzinfo=None)
    try:
        seen = datetime.fromisoformat(ws.get_setting(key(session_id, SEEN)))
    except (TypeError, ValueError):  # never stamped (or not a time): stamp it now
        seen = None
    if seen is not None and timedelta(0) <= now - seen < STAMP_EVERY:
        return 0
    ws.set_setting(key(session_id, SEEN), now.isoformat(timespec="seconds"))
    age = max_age() if age is None else age
    return ws.expire_sessions(now, now - age, keep=session_id) if age else 0


def new_id() -> str:
    """A fresh session id: 16 random URL-safe characters (96 bits; not guessable from another's)."""
    return secrets.token_urlsafe(12)


def valid_id(text: str | None) -> bool:
    return bool(text) and _VALID.fullmatch(text) is not None


def key(session_id: str, name: str) -> str:
    """The workspace settings key of a session's value ``name``."""
    return f"session/{session_id}/{name}"


class SessionSettings:
    """A session's settings, with the ``Workspace`` settings interface (``get_setting``/``set_setting``)
    so view functions take either."""

    def __init__(self, ws: Settings, session_id: str):
        if not valid_id(session_id):
            raise ValueError(f"session id {session_id!r}: 8 to 64 letters, digits, '-' or '_'")
        self.ws, self.session_id = ws, session_id

    def get_setting(self, name: str, default: Any = None) -> Any:
        value = self.ws.get_setting(key(self.session_id, name))
        if value is None:
            value = self.ws.get_setting(name)
        return default if value is None else value

    def own(self, name: str) -> Any:
        """The session's own value of ``name`` (None: never set by this session)."""
        return self.ws.get_setting(key(self.session_id, name))

    def set_setting(self, name: str, value: Any) -> None:
        self.ws.set_setting(key(self.session_id, name), value)
