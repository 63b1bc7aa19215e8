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


def test_rules_use_public_snakemake_and_the_schema_s_vocabulary():
    """No private Snakemake attribute in the rules; the policy, init and regime wildcards are the schema's values
    (and the controls', and the donor swaps' stitch), generated, never spelled out again."""
    from selfheal import grid
    from selfheal.config import schema

    rules = "".join(p.read_text() for p in (ROOT / "workflow").rglob("*.smk")) + (ROOT / "Snakefile").read_text()
    assert "workflow._" not in rules
    assert '"full|attn' not in rules and '"fresh|original' not in rules and '"frozen|layer' not in rules
    loaded = schema.load_schema()
    wildcards = grid.wildcard_constraints(loaded)
    for key, plural in (("policy", "policies"), ("init", "inits"), ("regime", "regimes")):
        values = loaded["properties"]["grid"]["properties"][plural]["items"]["enum"]
        extra = {"policy": {"none", "stitch"}, "init": {"none", "trained"}, "regime": set()}[key]
        assert set(wildcards[key].split("|")) == set(values) | extra


def test_a_snakemake_start_imports_no_model_or_figure_library():
    """The Snakefile imports the config checks, the grid, the lr check's cells, the plan and the figure names at
    every start (a dry run included); none of them may import torch, transformers, altair, scipy.stats or lifelines
    (selfheal.lazy defers them to first use: benchmarks/parse_time.py of commit a557299 measured the difference)."""
    import re
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    smk = "\n".join(p.read_text() for p in sorted((root / "workflow").rglob("*.smk")))  # the module's rules too
    modules = sorted(set(re.findall(r"^import (selfheal[\w.]*)", smk, re.M)))
    assert "selfheal.config" in modules and "selfheal.analysis.plots" in modules, modules
    heavy = ["torch", "transformers", "altair", "scipy.stats", "lifelines"]
    code = f"import sys; import {', '.join(modules)}; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True)
    assert out.stdout.strip() == "[]", out.stdout
