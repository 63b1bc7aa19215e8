"""Print the first-party import graph of src/selfheal (module -> modules it imports) and its cycles.

    .venv/bin/python benchmarks/import_graph.py

Reads the source with ``ast`` (nothing is imported). An edge counts every ``import selfheal.x`` and
``from selfheal.x import y`` (``y`` a submodule counts as ``selfheal.x.y``), at module level or inside a function;
imports inside functions are listed separately. tests/test_layout.py asserts there are no cycles.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / "selfheal").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def graph() -> tuple[dict[str, set[str]], list[tuple[str, str]]]:
    """(edges, imports inside functions as (module, imported))."""
    known = modules()
    edges: dict[str, set[str]] = {m: set() for m in known}
    nested: list[tuple[str, str]] = []
    for name, path in known.items():
        tree = ast.parse(path.read_text())
        top = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module for a in node.names
                ]
            for target in targets:
                if target.startswith("selfheal") and target in known and target != name:
                    edges[name].add(target)
            if targets and id(node) not in top:
                nested += [(name, t) for t in targets if t.startswith("selfheal")]
    return edges, nested


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main() -> int:
    edges, nested = graph()
    for module in sorted(edges):
        print(f"{module} -> {', '.join(sorted(edges[module])) or '-'}")
    found = cycles(edges)
    print(f"\n{len(edges)} modules, {sum(map(len, edges.values()))} first-party imports, {len(found)} cycles")
    for c in found:
        print("cycle:", " <-> ".join(c))
    print(f"{len(nested)} first-party imports inside functions" + "".join(f"\n  {m}: {t}" for m, t in nested))
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
