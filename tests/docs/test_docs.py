"""The docs site (``docs/``, MkDocs Material) builds strictly, covers every command and dashboard page,
and no page, comment or query names a file or an anchor that does not exist. The generated pages (CLI
reference, benchmarks, accuracy) equal what their generator writes from the committed input, so they
cannot drift from the parser or from the JSON that says where and when their figures were measured."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import yaml

from app.docgen import __main__ as docgen_cli
from app.docgen import accuracy, bench, cli_reference, real_engine
from app.docgen.tables import pct
from tests.conftest import IN_CI
from tests.support.paths import ROOT

DOCS = ROOT / "docs"
README = ROOT / "README.md"


def _nav_files(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [f for item in node for f in _nav_files(item)]
    if isinstance(node, dict):
        return [f for value in node.values() for f in _nav_files(value)]
    return []


NAV = _nav_files(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])


# -- the build -----------------------------------------------------------------------------------------
def test_mkdocs_build_strict(tmp_path: Path) -> None:
    """A broken link, a missing anchor or image, or a page left out of the nav fails the build."""
    mkdocs = Path(sys.executable).with_name("mkdocs")
    if not mkdocs.exists():
        found = shutil.which("mkdocs")
        if found is None:
            message = "mkdocs is missing: pip install -e '.[docs]'"
            if IN_CI:
                pytest.fail(message)
            pytest.skip(message)
        mkdocs = Path(found)
    done = subprocess.run([str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "methods" / "index.html").exists()


def test_every_page_is_in_the_nav_and_every_nav_entry_exists() -> None:
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(NAV) == pages


# -- coverage --------------------------------------------------------------------------------------------
def test_every_cli_command_has_its_page() -> None:
    for name in cli_reference.subcommands():
        assert f"cli/{name}.md" in NAV, f"headroom {name} has no page in the docs"
        text = (DOCS / "cli" / f"{name}.md").read_text()
        assert text.startswith(f"# headroom {name}\n")
        assert f"reference/cli.md#headroom-{name}" in text
        assert f"## headroom {name}\n" in (DOCS / "reference" / "cli.md").read_text()


def _dashboard_pages() -> list[str]:
    """The titles of the router's ``st.Page(..., title=...)`` calls."""
    tree = ast.parse((ROOT / "app" / "streamlit_app.py").read_text())
    return [kw.value.value for node in ast.walk(tree) if isinstance(node, ast.Call)
            and getattr(node.func, "attr", None) == "Page" for kw in node.keywords if kw.arg == "title"]


def test_every_dashboard_page_has_its_page_and_its_screenshot() -> None:
    titles = _dashboard_pages()
    assert len(titles) == 6
    for title in titles:
        slug = re.sub(r"\W+", "-", title.lower()).strip("-")
        assert f"dashboard/{slug}.md" in NAV, f"the dashboard's {title} page has no docs page"
        text = (DOCS / "dashboard" / f"{slug}.md").read_text()
        assert text.startswith(f"# {title}\n")
        pictures = re.findall(r"!\[[^\]]*\]\(\.\./img/dashboard/([\w.-]+)\)", text)
        assert pictures, f"docs/dashboard/{slug}.md shows no screenshot"
        for picture in pictures:  # written by a browser test: the journey, or one on data the sample lacks
            assert any(picture in test.read_text() for test in (ROOT / "tests" / "browser").glob("test_*.py")), picture
            assert (DOCS / "img" / "dashboard" / picture).exists()


# -- references --------------------------------------------------------------------------------------------
def _tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.split()
    return [ROOT / f for f in out if (ROOT / f).is_file()]


TEXT = (".py", ".sql", ".md", ".yml", ".yaml", ".csv", ".json")
TRACKED = _tracked()
SCANNED = [p for p in TRACKED if (p.suffix in TEXT or p.name == "run")
           and not str(p.relative_to(ROOT)).startswith(("tests/fixtures/", "docs/data/", "data/sample/"))
           and p.name != "test_docs.py"]
# a path in the repository: app/..., tests/..., queries/..., data/..., docs/..., .ci/... (not inside a URL
# or another project's path such as vllm:docs/...); the character after it tells a prefix in an f-string
REPO_PATH = re.compile(r"(?<![\w./:~$-])((?:app|tests|queries|data|docs|\.ci)/[\w./-]*\w)(.?)")
# a bare Markdown file name, not a string literal (a download's name) nor a call (escape.md(...))
BARE_MD = re.compile(r"(?<![\w./:~$'\"-])([\w-]+\.md)\b(?!\()")
# a code file named in backticks in a Markdown page: `policy_fleet.py`, `records__from_genai_perf.sql`
BARE_CODE = re.compile(r"`([a-z]\w*\.(?:py|sql))`")
NAMES = {p.name for p in TRACKED}
NAMES_OUTSIDE_DOCS = {p.name for p in TRACKED if p.relative_to(ROOT).parts[0] != "docs"}
AT_ROOT = {p.name for p in TRACKED if p.parent == ROOT}
PATHS = [str(p.relative_to(ROOT)) for p in TRACKED]


def _problems(path: Path, rel: Path | None = None) -> list[str]:
    """The references of ``path`` (at ``rel`` in the repository) to files that do not exist."""
    text = path.read_text(errors="replace")
    rel = rel or path.relative_to(ROOT)
    out = []
    for ref, after in REPO_PATH.findall(text):
        if (ROOT / ref).exists() or (ROOT / f"{ref}.py").exists():
            continue
        if after in "{*<" and after and any(p.startswith(ref) for p in PATHS):  # f"queries/ingest/ingest__{name}.sql"
            continue
        out.append(f"{rel}: {ref}")
    for ref in BARE_MD.findall(text):
        if ref.startswith("FILE"):  # a placeholder in a usage line
            continue
        if rel.parts[0] == "docs":  # a page's link, relative to the page, or a file at the root named
            ok = (path.parent / ref).exists() or ref in AT_ROOT
        elif str(rel) == "mkdocs.yml" or rel.parts[:2] == ("app", "docgen"):  # docs pages by their docs path
            ok = (DOCS / ref).exists()
        else:  # a file of the repository, not a docs page: those are cited as docs/PAGE.md
            ok = ref in NAMES_OUTSIDE_DOCS
        if not ok:
            out.append(f"{rel}: {ref}")
    for ref in BARE_CODE.findall(text) if path.suffix == ".md" else ():
        if ref not in NAMES:
            out.append(f"{rel}: {ref}")
    return out


def test_no_reference_to_a_file_that_is_not_in_the_repository() -> None:
    problems = [p for path in SCANNED for p in _problems(path)]
    assert problems == []


def test_the_reference_finder_finds_a_missing_file(tmp_path: Path) -> None:
    probe = tmp_path / "notes.md"
    probe.write_text("see methods.md and app/nothing_here.py and queries/promise/promise__shares.sql, `gone.py`\n")
    assert _problems(probe, Path("notes.md")) == ["notes.md: app/nothing_here.py", "notes.md: methods.md",
                                                  "notes.md: gone.py"]


def slugify(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a heading without an explicit ``{#id}``."""
    text = re.sub(r"`|\*\*|\[|\]\([^)]*\)", "", heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    out = set()
    for line in page.read_text().splitlines():
        match = re.match(r"^#{1,6} (.*?)(?:\s*\{#([\w-]+)\})?\s*$", line)
        if match:
            out.add(match.group(2) or slugify(match.group(1)))
    return out


def test_every_docs_anchor_the_code_cites_exists() -> None:
    """``docs/methods.md#joint-resets`` in a comment, a query header or a page is a heading of that page."""
    cited = re.compile(r"docs/([\w/-]+\.md)#([\w-]+)")
    missing, seen = [], 0
    for path in SCANNED:
        for page, anchor in cited.findall(path.read_text(errors="replace")):
            seen += 1
            if anchor not in anchors(DOCS / page):
                missing.append(f"{path.relative_to(ROOT)}: docs/{page}#{anchor}")
    assert missing == []
    assert seen >= 30  # every former methods.md reference points here


# -- generated pages ---------------------------------------------------------------------------------------
def test_the_cli_reference_is_the_parsers() -> None:
    assert (DOCS / "reference" / "cli.md").read_text() == cli_reference.page()


def test_the_benchmark_page_is_what_its_command_makes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The page pools several runs of each commit: the command that names them (``bench.COMMAND``, in the
    page's header) is run as written."""
    monkeypatch.chdir(ROOT)  # its files are named from the repository's root
    args = docgen_cli._parser().parse_args(shlex.split(bench.COMMAND)[len(["python", "-m", "app.docgen"]):])
    assert (DOCS / "benchmarks.md").read_text() == docgen_cli.render(args)


@pytest.mark.parametrize(("page", "source", "render"), [
    ("accuracy.md", "accuracy.json", lambda doc: accuracy.page(
        doc, also=[json.loads((DOCS / "data" / "accuracy-prefix.json").read_text())])),
    ("accuracy-policies.md", "accuracy-policies.json", accuracy.page),
    ("accuracy-real-engine.md", "real-engine.json", real_engine.page),
    ("accuracy-prefix-cache.md", "real-engine-prefix.json", lambda doc: real_engine.prefix_page(
        doc, also=[json.loads((DOCS / "data" / "real-engine-prefix-xeon.json").read_text())])),
])
def test_a_results_page_is_its_json_rendered(page: str, source: str, render: object) -> None:
    doc = json.loads((DOCS / "data" / source).read_text())
    text = (DOCS / page).read_text()
    assert text == render(doc)  # type: ignore[operator]
    prov = doc["provenance"]
    assert prov["commit"] and prov["date"] and prov["machine"]["cpu"] and prov["machine"]["cores"]
    assert f"at commit `{prov['commit'][:10]}`" in text and prov["date"] in text and prov["machine"]["cpu"] in text


def test_the_accuracy_page_shows_the_prefix_familys_cached_shares_and_routing() -> None:
    """Rows of a prefix fleet (``cached_*``, the truth behind prefix-aware routing) get their own
    section; a document without them renders as before (the committed page, above)."""
    doc = json.loads((DOCS / "data" / "accuracy.json").read_text())
    row = {**doc["rows"][0], "fleet": "f7-turns-3x", "path": "c4", "cached_read": 0.462, "cached_true": 0.421,
           "routing_router": "prefix_aware", "cached_true_routed": 0.908, "ttft_true_routed": 0.0, "joint_true_routed": 0.0}
    plain = accuracy.page(doc)
    assert "## The prefix cache" not in plain
    text = accuracy.page({**doc, "rows": [*doc["rows"], row]})
    assert text.index("## The prefix cache") > text.index("## Every scenario")
    section = text[text.index("## The prefix cache"):]
    assert "**f7-turns-3x, " in section and "| c4 | 46.20 % | 42.10 % |" in section and "| 90.80 % | 0.00 % | 0.00 % |" in section


def test_the_accuracy_page_shows_each_prefix_fleets_routing_row() -> None:
    """The prefix fleets' run of their own (docs/data/accuracy-prefix.json) joins the family's page with its
    provenance; each prefix fleet gets a routing row section: per export the row at its N' (the JSON's
    figures), the replicas the promise needs under each routing, predicted and true."""
    family = json.loads((DOCS / "data" / "accuracy.json").read_text())
    prefix = json.loads((DOCS / "data" / "accuracy-prefix.json").read_text())
    text = (DOCS / "accuracy.md").read_text()
    assert f"at commit `{prefix['provenance']['commit'][:10]}`" in text and prefix["provenance"]["command"] in text
    assert text.index("## The routing row") > text.index("## The prefix cache") > text.index("## Every scenario")
    section = text[text.index("## The routing row"):]
    fleets = [r["fleet"] for r in prefix["routing"]]
    assert set(fleets) == {"f7-turns-3x", "f8-tools-4x"} and not {f["fleet"] for f in family["fleets"]} & set(fleets)
    for row in prefix["routing"]:
        part = section[section.index(f"### {row['fleet']}"):]
        assert (f"**{row['export']} export**: the row at N'={row['replicas']}, traffic x1 (N' chosen as "
                f"{row['replicas_chosen']})") in part
        for r in row["rows"]:
            assert (f"| {r['routing']} | {r['path']} | {pct(r['joint_predicted'])} [{100 * r['joint_low']:.2f}, "
                    f"{100 * r['joint_high']:.2f}] | {pct(r['joint_true'])} |") in part
        for f in row["routings"]:
            for n in f["replicas_needed"]:
                cells = " | ".join("none replayed" if x is None else str(x) for x in (n["predicted"], n["if_high"], n["true"]))
                assert f"| {100 * n['target']:g} % | {cells} |" in part
    with pytest.raises(ValueError, match="in two documents"):
        accuracy.page(prefix, also=[prefix])


def test_a_routing_row_renders_as_its_record() -> None:
    """A hand-made routing row: the row's line, its cells as written, "none replayed" for a size never
    reached; one not priced says why."""
    point = {"routing": "prefix-aware", "replicas": 3, "path": "c4", "joint_predicted": 0.007, "joint_low": 0.0037,
             "joint_high": 0.0113, "joint_true": 0.0053, "ttft_predicted": 0.006, "ttft_low": 0.0037,
             "ttft_high": 0.0086, "ttft_true": 0.0051, "cached_predicted": 0.776, "cached_true": 0.858,
             "flagged": False, "meets_goal": True}
    row = {"fleet": "f7-turns-3x", "export": "minimal", "available": True, "replicas": 3, "replicas_chosen": "given",
           "traffic": 1.0, "rows": [point], "curve": [point], "split": {},
           "routings": [{"routing": "load-based", "router": "least_outstanding", "true_router": "least_outstanding",
                         "replicas_needed": [{"target": 0.99, "predicted": None, "if_high": None, "true": None}]}]}
    out = "\n".join(accuracy.routing_section([row, {**row, "export": "full", "available": False, "reason": "why"}]))
    assert "### f7-turns-3x" in out and "**minimal export**: the row at N'=3, traffic x1 (N' chosen as given); 1 of 1 rows" in out
    assert ("| prefix-aware | c4 | 0.70 % [0.37, 1.13] | 0.53 % | 0.60 % [0.37, 0.86] | 0.51 % | 77.60 % | 85.80 % "
            "|  | yes |") in out
    assert ("| load-based | `least_outstanding` | `least_outstanding` | 99 % | none replayed | none replayed | "
            "none replayed |") in out
    assert "| 3 | prefix-aware | c4 | 0.70 % [0.37, 1.13] |" in out  # the curve
    assert "**full export**: not priced: why." in out
    assert accuracy.routing_section([]) == []


def test_the_real_engine_prefix_page_keeps_the_routing_row() -> None:
    """The routing cases of the prefix family, computed once with every case: at 1 s / 50 ms the joint share
    predicted 69.84 % load-based and 32.65 % prefix-aware against 71.44 % and 35.11 % measured, the cached
    shares beside the engines' counters, and the split the row stands on beside the trace's own."""
    doc = json.loads((DOCS / "data" / "real-engine-prefix.json").read_text())
    text = (DOCS / "accuracy-prefix-cache.md").read_text()
    section = text[text.index("## The routing row"):text.index("## Where the goal is not met")]
    assert ("| TTFT 1 s / TPOT 50 ms | load-based | `least_outstanding` | `p-n2-x2.0` (least_outstanding) | 52.78 % "
            "(55.21 %) |") in section and "| 69.84 % [22.72, 100.00] (71.44 %) |" in section
    assert ("| TTFT 1 s / TPOT 50 ms | prefix-aware | `prefix_aware` | `p-n2-x2.0-sticky` (sticky) | 69.69 % "
            "(70.25 %) |") in section and "| 32.65 % [22.55, 43.37] (35.11 %) |" in section
    assert "57.62 % of the hits conversation history (assumed)" in section
    assert f"{pct(doc['trace_split']['conversation_share'])} was conversation history" in section
    assert {r["routing"] for r in doc["rows"] if r.get("routing")} == {"load-based", "prefix-aware"}


def test_a_document_without_provenance_is_refused() -> None:
    doc = json.loads((DOCS / "data" / "bench.json").read_text())
    doc.pop("provenance")
    with pytest.raises(ValueError, match="no provenance"):
        bench.page(doc)


def test_the_generator_writes_the_page_it_is_asked_for(tmp_path: Path) -> None:
    out = tmp_path / "accuracy.md"
    from app.docgen.__main__ import main

    assert main(["accuracy", "--from", str(DOCS / "data" / "accuracy.json"), "--out", str(out)]) == 0
    assert out.read_text().startswith("# Accuracy of the economics\n")
    both = f"{DOCS / 'data' / 'accuracy.json'},{DOCS / 'data' / 'accuracy-prefix.json'}"
    assert main(["accuracy", "--from", both, "--out", str(out)]) == 0
    assert "## The routing row" in out.read_text()
    two = f"{DOCS / 'data' / 'real-engine.json'},{DOCS / 'data' / 'real-engine.json'}"
    assert main(["accuracy-real-engine", "--from", two, "--out", str(out)]) == 1  # one document only


# -- the README --------------------------------------------------------------------------------------------
def test_the_readme_is_a_front_door() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    assert "<!-- test-command -->" in text and "<!-- /test-command -->" in text
    assert re.search(r"^!\[.*\]\(docs/img/dashboard/[\w.-]+\.png\)", text, re.M), "one screenshot"
    for command in ("headroom report", "headroom scenarios", "headroom tail"):
        assert command in text


def test_the_prefix_page_shows_the_family_run_again_elsewhere() -> None:
    """A second run of the family (here the committed document, its provenance and one case changed: the
    sticky run's engine 1.6 times slower) is its own section: where and when, its result with the
    disturbed run's rows set apart, and its runs with each engine's speed."""
    doc = json.loads((DOCS / "data" / "real-engine-prefix.json").read_text())
    other = json.loads(json.dumps(doc))
    other["provenance"] = {**doc["provenance"], "commit": "0123456789abcdef", "machine": {
        **doc["provenance"]["machine"], "cpu": "Intel(R) Xeon(R) Processor"}}
    for case in other["cases"]:
        case["engine_speed"], case["truth_disturbed"] = (1.6, True) if case["run"] == "p-n2-x2.0-sticky" else (1.0, False)
    for r in other["rows"]:
        r["truth_disturbed"] = r["run"] == "p-n2-x2.0-sticky"
    text = real_engine.prefix_page(doc, also=[other])
    assert text.startswith(real_engine.prefix_page(doc))
    section = text[text.index("## Also run: Intel(R) Xeon(R) Processor, commit `0123456789`"):]
    kept = [r for r in other["rows"] if r["run"] != "p-n2-x2.0-sticky"]
    assert (f"**Result**: {sum(r['meets_goal'] for r in kept)} of {len(kept)} rows meet the goal" in section
            and "; 9 more against a run whose engine stepped off" in section)
    assert "### Where the goal is not met" in section and "| x1.60 (disturbed: not a truth) |" in section
    assert "| x1.00 |" in section and "engine speed" not in text[:text.index("## Also run")]
