"""The house: no import cycles and no first-party imports hidden inside functions (benchmarks/import_graph.py)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("import_graph", ROOT / "benchmarks" / "import_graph.py")
import_graph = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(import_graph)


def test_no_import_cycles_and_no_hidden_imports():
    edges, nested = import_graph.graph()
    assert "selfheal.grid" in edges and "selfheal.heal.reset" in edges["selfheal.heal.retrain"]
    assert import_graph.cycles(edges) == []
    assert nested == []


def test_cycle_finder_finds_a_cycle():
    assert import_graph.cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
