"""Per-session settings rows expire (``app.ui.session.touch``, ``Workspace.expire_sessions``): a session
not seen for the configured days loses every row, a recent one and the shared settings keep theirs, the
session asking is never expired, and rows written before sessions were stamped get a grace period."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from app.store import Workspace
from app.ui import session
from app.ui.session import SessionSettings

NOW = datetime(2026, 12, 1, 12, 0, 0)
OLD, RECENT, ME, LEGACY = "old-session-1", "recent-session", "current-session", "legacy-session"


def _sessions(ws: Workspace) -> dict[str, set[str]]:
    rows = ws.con.execute("select key from settings where starts_with(key, 'session/')").fetchall()
    out: dict[str, set[str]] = {}
    for (k,) in rows:
        _, sid, name = k.split("/", 2)
        out.setdefault(sid, set()).add(name)
    return out


@pytest.fixture
def ws() -> Workspace:
    w = Workspace(":memory:")
    w.set_setting("path_labels", ["model_name"])  # shared: never a session's
    for sid, seen_days_ago in ((OLD, 40), (RECENT, 3), (ME, 400)):
        mine = SessionSettings(w, sid)
        mine.set_setting("window_s", 60)
        mine.set_setting("promises", {"chat": {"ttft_s": 0.5}})
        w.set_setting(session.key(sid, session.SEEN), (NOW - timedelta(days=seen_days_ago)).isoformat())
    SessionSettings(w, LEGACY).set_setting("window_s", 900)  # written before the stamps existed
    yield w
    w.close()


def test_stale_sessions_expire_and_the_current_one_never(ws: Workspace) -> None:
    deleted = session.touch(ws, ME, now=NOW, age=timedelta(days=30))
    assert deleted == 3  # OLD's window, promises and stamp
    kept = _sessions(ws)
    assert set(kept) == {RECENT, ME, LEGACY}
    assert kept[ME] == {"window_s", "promises", "_seen"}
    assert ws.get_setting(session.key(ME, session.SEEN)) == NOW.isoformat()  # 400 days old, but it is asking
    assert ws.get_setting(session.key(LEGACY, session.SEEN)) == NOW.isoformat()  # stamped, not deleted
    assert SessionSettings(ws, LEGACY).get_setting("window_s") == 900
    assert ws.get_setting("path_labels") == ["model_name"]
    # 30 days on, the legacy session's grace is over; the others were seen since
    later = NOW + timedelta(days=31)
    session.touch(ws, RECENT, now=later, age=timedelta(days=30))
    assert set(_sessions(ws)) == {RECENT}


def test_the_stamp_is_written_at_most_once_an_hour(ws: Workspace) -> None:
    session.touch(ws, ME, now=NOW, age=timedelta(days=30))
    assert session.touch(ws, ME, now=NOW + timedelta(minutes=59), age=timedelta(days=30)) == 0
    assert ws.get_setting(session.key(ME, session.SEEN)) == NOW.isoformat()
    session.touch(ws, ME, now=NOW + timedelta(minutes=61), age=timedelta(days=30))
    assert ws.get_setting(session.key(ME, session.SEEN)) == (NOW + timedelta(minutes=61)).isoformat()


def test_the_age_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, ws: Workspace) -> None:
    monkeypatch.setenv(session.DAYS_ENV, "0")
    assert session.max_age() is None
    assert session.touch(ws, ME, now=NOW) == 0 and OLD in _sessions(ws)  # 0: never expire
    monkeypatch.setenv(session.DAYS_ENV, "2.5")
    assert session.max_age() == timedelta(days=2.5)
    monkeypatch.delenv(session.DAYS_ENV)
    assert session.max_age() == timedelta(days=30)
    monkeypatch.setenv(session.DAYS_ENV, "a month")
    with pytest.raises(ValueError, match="HEADROOM_SESSION_DAYS='a month' is not a number of days"):
        session.max_age()
