"""What is one person's and what is everyone's: a browser session's own choices, kept in the workspace
under the session's id (the ``?s=`` of its URL, so a reload of that tab finds them again).

Shared by everyone on a workspace: the datasets, the path mapping and the saved scenario sets (what is
saved to the workspace). Each session's own: the datasets in its analysis, the window, the promises and
the Economics inputs (prices, the grid, the engine facts) — ``SessionSettings``, which reads and writes
settings under ``session/<id>/<key>`` and never the shared key. A value a session has never set is read
from the workspace-wide setting of that name (what a workspace held before settings were per session,
or what the CLI keeps there), which no session writes.
"""

from __future__ import annotations

import re
import secrets
from typing import Any, Protocol

SESSION_PARAM = "s"  # the URL query parameter holding a session's id
_VALID = re.compile(r"[A-Za-z0-9_-]{8,64}")


class Settings(Protocol):
    def get_setting(self, key: str, default: Any = None) -> Any: ...

    def set_setting(self, key: str, value: Any) -> None: ...


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
