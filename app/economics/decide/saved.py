"""Saved scenario sets: named, kept in the workspace, compared side by side, exported and imported as JSON.

A saved set holds the inputs that produced it (datasets, promises, prices, grid, assumptions) and the
scenarios document itself, so it can be compared later without re-running any replay.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from app.jsonable import dumps
from app.store import Workspace

SETTING = "scenario_sets"
FORMAT = "headroom-scenario-sets/1"


def _all(ws: Workspace) -> dict[str, Any]:
    return dict(ws.get_setting(SETTING, {}))


def save(ws: Workspace, name: str, inputs: dict[str, Any], document: dict[str, Any]) -> None:
    if not name.strip():
        raise ValueError("a saved scenario set needs a name")
    sets = _all(ws)
    sets[name] = {"saved_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"), "inputs": inputs,
                  "document": document}
    ws.set_setting(SETTING, sets)


def names(ws: Workspace) -> list[str]:
    return sorted(_all(ws))


def get(ws: Workspace, name: str) -> dict[str, Any]:
    sets = _all(ws)
    if name not in sets:
        raise ValueError(f"no saved scenario set {name!r}; saved: {', '.join(sorted(sets)) or 'none'}")
    return sets[name]


def delete(ws: Workspace, name: str) -> None:
    sets = _all(ws)
    get(ws, name)
    del sets[name]
    ws.set_setting(SETTING, sets)


def export_json(ws: Workspace, which: list[str] | None = None) -> str:
    chosen = {n: get(ws, n) for n in (which or names(ws))}
    return dumps({"format": FORMAT, "sets": chosen})


def import_json(ws: Workspace, text: str) -> list[str]:
    """Add the sets of an export to the workspace (same name: replaced). Returns the names imported."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not a scenario-set export: invalid JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("sets"), dict):
        raise ValueError(f"not a scenario-set export: expected {{\"format\": \"{FORMAT}\", \"sets\": {{...}}}}")
    sets = _all(ws)
    for name, body in doc["sets"].items():
        if not isinstance(body, dict) or "document" not in body or "scenarios" not in body["document"]:
            raise ValueError(f"scenario set {name!r}: it holds no scenarios document")
        sets[name] = body
    ws.set_setting(SETTING, sets)
    return sorted(doc["sets"])


def compare(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Side by side: per (replicas, traffic, context) of either set, the fleet totals of both."""
    fa = {(t["replicas"], t["traffic"], t["context"]): t for t in a["document"]["fleet"]}
    fb = {(t["replicas"], t["traffic"], t["context"]): t for t in b["document"]["fleet"]}
    rows = []
    for key in sorted(set(fa) | set(fb), key=lambda k: (k[1], k[2], k[0])):
        ta, tb = fa.get(key), fb.get(key)
        rows.append({
            "replicas": key[0], "traffic": key[1], "context": key[2],
            "total_cost_a": ta and ta["total_cost"], "total_cost_b": tb and tb["total_cost"],
            "breach_cost_a": ta and ta["breach_cost"], "breach_cost_b": tb and tb["breach_cost"],
            "headroom_cost_a": ta and ta["headroom_cost"], "headroom_cost_b": tb and tb["headroom_cost"],
            "difference": (tb["total_cost"] - ta["total_cost"]) if ta and tb else None,
        })
    return rows
