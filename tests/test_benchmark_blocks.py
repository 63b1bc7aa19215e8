"""Measured figures are written by their benchmarks: every `<!-- name: begin -->` ... `<!-- name: end -->` block in
the documentation is named by a script in benchmarks/ (which writes it through `common.write_block`), and
`write_block` replaces a block and nothing else. Reads files only; no training."""

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BEGIN = re.compile(r"<!-- ([a-z0-9-]+): begin -->")


@pytest.fixture(scope="module")
def common():
    spec = importlib.util.spec_from_file_location("benchmarks_common", ROOT / "benchmarks" / "common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _blocks() -> list[tuple[Path, str]]:
    return [(doc, name) for doc in DOCS for name in BEGIN.findall(doc.read_text())]


def test_the_figures_have_blocks():
    names = {name for _, name in _blocks()}
    assert {"default-grid", "test-suite", "step-costs", "probe-rules", "grid-vs-peer", "retrain-vs-trainer",
            "throughput", "dag-dry-run", "pretrain-sweep"} <= names, names


@pytest.mark.parametrize("doc,name", _blocks(), ids=lambda x: x if isinstance(x, str) else x.name)
def test_every_block_is_closed_once_and_written_by_a_benchmark(doc, name):
    text = doc.read_text()
    begin, end = f"<!-- {name}: begin -->", f"<!-- {name}: end -->"
    assert text.count(begin) == 1 and text.count(end) == 1 and text.index(begin) < text.index(end)
    writers = [p.name for p in sorted((ROOT / "benchmarks").glob("*.py"))
               if p.name != "common.py" and f'"{name}"' in p.read_text()]
    assert writers, f"no script in benchmarks/ names block {name!r} of {doc.relative_to(ROOT)}"
    page = "docs/method.md" if doc.name == "method.md" else None
    if page:  # a block outside docs/performance.md: its writer passes that page
        assert any("method.md" in (ROOT / "benchmarks" / w).read_text() for w in writers)


def test_write_block_replaces_the_block_and_nothing_else(common, tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Page\n\nbefore\n\n<!-- fig: begin -->\n\nold 1.0 s\n\n<!-- fig: end -->\n\nafter\n")
    common.write_block("fig", "new **2.0 s**\n", page)
    assert page.read_text() == "# Page\n\nbefore\n\n<!-- fig: begin -->\n\nnew **2.0 s**\n\n<!-- fig: end -->\n\nafter\n"
    assert common.read_block("fig", page) == "new **2.0 s**"
    common.write_block("fig", common.read_block("fig", page), page)  # round trip: unchanged
    assert common.read_block("fig", page) == "new **2.0 s**"


def test_write_block_refuses_a_page_without_its_markers(common, tmp_path):
    page = tmp_path / "page.md"
    for text in ("<!-- fig: begin -->\nno end\n", "<!-- fig: end -->\n<!-- fig: begin -->\n",
                 "<!-- fig: begin -->\n<!-- fig: end -->\n<!-- fig: begin -->\n<!-- fig: end -->\n"):
        page.write_text(text)
        for marker in ("fig", "other"):
            with pytest.raises(ValueError):
                common.write_block(marker, "x", page)
            assert page.read_text() == text  # a refused write leaves the page as it was


def test_the_documented_pages_round_trip(common, tmp_path):
    """Writing each documented block's own text back leaves the page byte for byte as it is."""
    for doc, name in _blocks():
        copy = tmp_path / doc.name
        copy.write_text(doc.read_text())
        common.write_block(name, common.read_block(name, copy), copy)
        assert copy.read_text() == doc.read_text(), f"{doc.name}: block {name} is not in write_block's form"


def test_the_test_suite_block_has_each_stage_and_the_slowest_tests(common):
    """docs/performance.md's test-suite block is benchmarks/suite_time.py's: the suite's time, each CI stage's wall
    time, and the ten slowest tests."""
    text = common.read_block("test-suite")
    assert "**" in text and "benchmarks/suite_time.py" in text
    for stage in ("lint (format and lint)", "fast (fast tests)", "e2e (end-to-end)"):
        assert re.search(rf"^\| {re.escape(stage)} \| ok, [0-9]+ passed.* \| [0-9]+ min [0-9]+ s \|$", text, re.M), stage
    slow = re.findall(r"^\| ([0-9.]+) \| (?:setup|call|teardown) \| `tests/", text, re.M)
    assert len(slow) == 10 and [float(s) for s in slow] == sorted((float(s) for s in slow), reverse=True)


def test_publish_writes_only_when_asked(common, tmp_path, capsys):
    page = tmp_path / "page.md"
    page.write_text("<!-- fig: begin -->\n\nold\n\n<!-- fig: end -->\n")
    common.publish("fig", "new", write=False, page=page)
    common.publish("fig", "new", write=True, page=page, why_not="options differ")
    assert common.read_block("fig", page) == "old"
    common.publish("fig", "new", write=True, page=page)
    assert common.read_block("fig", page) == "new"
    assert "not written" in capsys.readouterr().out
