"""``app.ingest.jsonscan`` against ``json``: the members it finds in any JSON object (strings full of
quotes, backslashes and brackets, any nesting, any chunk boundary) are the ones ``json.loads`` reads,
``slim`` copies them exactly, and a truncated object is an error, never a wrong member."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.ingest import jsonscan

TEXT = st.text(alphabet=st.sampled_from('ab"\\{}[]:, \n\u00e9'), max_size=8)
VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
                      lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                      max_leaves=20)


@settings(max_examples=100, deadline=None)
@given(doc=st.dictionaries(TEXT, VALUES, min_size=1, max_size=6), chunk=st.sampled_from([1, 2, 3, 5, 64, 1 << 20]),
       indent=st.sampled_from([None, 1]), ascii_only=st.booleans())
def test_members_are_what_json_reads(doc: dict, chunk: int, indent: int | None, ascii_only: bool,
                                     tmp_path_factory: pytest.TempPathFactory) -> None:
    tmp = tmp_path_factory.mktemp("scan")
    path = tmp / "doc.json"
    raw = json.dumps(doc, indent=indent, ensure_ascii=ascii_only).encode()
    path.write_bytes(raw)
    jsonscan.CHUNK, old = chunk, jsonscan.CHUNK
    try:
        found = jsonscan.members(path)
        assert {m.key: json.loads(raw[m.value_start:m.value_end]) for m in found} == doc
        keys = set(list(doc)[::2])
        assert jsonscan.slim(path, keys, tmp / "slim.json") == keys
        assert json.loads((tmp / "slim.json").read_bytes()) == {k: v for k, v in doc.items() if k in keys}
        for cut in {len(raw) - 1, len(raw) // 2}:
            path.write_bytes(raw[:cut])
            with pytest.raises(jsonscan.JsonScanError):
                jsonscan.members(path)
    finally:
        jsonscan.CHUNK = old


@pytest.mark.parametrize(("text", "message"), [
    ('{"a": [1, 2', "the JSON ends at byte 11, with 2 bracket(s) still open: the file is truncated"),
    ('{"a": "x', "the JSON ends at byte 8, inside a string: the file is truncated"),
    ('[1, 2]', "not a JSON object"),
    ('{"a": 1}}', "more data after the JSON object ends at byte 7"),
    ('{"a": 1} {"b": 2}', "more data after the JSON object ends at byte 7"),
])
def test_what_is_not_one_object(text: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(jsonscan.JsonScanError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[")):
        jsonscan.members(path)


def test_an_object_of_endless_members_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonscan, "MAX_MEMBERS", 100)
    path = tmp_path / "wide.json"
    path.write_text(json.dumps({f"k{i}": i for i in range(101)}))
    with pytest.raises(jsonscan.JsonScanError, match="more than 100 members in the objects at depth 1"):
        jsonscan.members(path)
    path.write_text(json.dumps({f"k{i}": i for i in range(100)}))
    assert len(jsonscan.members(path)) == 100


def _members_at(value: object, depth: int, level: int = 1) -> list[tuple[str, object]]:
    """The oracle: (key, value) of every member of the objects at ``depth``, in document order."""
    out: list[tuple[str, object]] = []
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    if isinstance(value, dict) and level == depth:
        out += list(value.items())
    for _, child in children:
        if isinstance(child, dict | list):
            out += _members_at(child, depth, level + (isinstance(child, dict | list)))
    return out


def _dropped(value: object, depth: int, drop: set[str], level: int = 1) -> object:
    if isinstance(value, dict):
        return {k: None if level == depth and k in drop else _dropped(v, depth, drop, level + 1)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_dropped(v, depth, drop, level + 1) for v in value]
    return value


@settings(max_examples=80, deadline=None)
@given(doc=st.dictionaries(TEXT, VALUES, min_size=1, max_size=5), depth=st.integers(1, 4),
       chunk=st.sampled_from([1, 3, 7, 1 << 20]))
def test_members_at_any_depth_and_dropping_them(doc: dict, depth: int, chunk: int,
                                                tmp_path_factory: pytest.TempPathFactory) -> None:
    tmp = tmp_path_factory.mktemp("deep")
    path = tmp / "doc.json"
    raw = json.dumps(doc).encode()
    path.write_bytes(raw)
    jsonscan.CHUNK, old = chunk, jsonscan.CHUNK
    try:
        found = [(m.key, json.loads(raw[m.value_start:m.value_end])) for m in jsonscan.members(path, depth)]
        assert found == _members_at(doc, depth)
        drop = {k for k, _ in found[::2]}
        n = jsonscan.without(path, depth, drop, tmp / "without.json")
        assert n == sum(1 for k, _ in found if k in drop)
        assert json.loads((tmp / "without.json").read_bytes()) == _dropped(doc, depth, drop)
    finally:
        jsonscan.CHUNK = old
