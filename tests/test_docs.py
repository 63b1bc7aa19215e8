"""The user documentation holds together: relative links resolve (files and GitHub-style heading anchors), no
document names a temporary folder or reads like a lab notebook, every config key of the schema is in the key
reference, and the README stays short with its regenerated headline block. Fast: reads files only."""

import re
import subprocess
import unicodedata
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
KEY_REFERENCE = ROOT / "docs" / "configuration.md"
LINKED = [
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    ROOT / "CHANGELOG.md",
    ROOT / "benchmarks" / "README.md",
    ROOT / "config" / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
]


def _documents() -> list[Path]:
    """Every Markdown file of the repository: tracked ones and new ones not ignored by git."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        paths = {ROOT / p for p in listed}
    except (OSError, subprocess.CalledProcessError):
        paths = set()
    paths |= set(LINKED)
    return sorted(p for p in paths if p.is_file() and ".venv" not in p.parts)


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code spans (links are never inside them)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: inline markup dropped, lower case, punctuation removed, spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.lower()
    kept = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S)
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", text, flags=re.M):
        base = slug(heading)
        n = seen.get(base, 0)
        found.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return found


def test_slug_follows_github():
    assert slug("Frozen random components (Bogoychev 2021)") == "frozen-random-components-bogoychev-2021"
    assert slug("Published experiments: Tamkin et al. 2020") == "published-experiments-tamkin-et-al-2020"
    assert slug("`results_dir`") == "results_dir"
    assert slug("Per cell, not grid level") == "per-cell-not-grid-level"


@pytest.mark.parametrize("doc", [p for p in LINKED if p.is_file()], ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc):
    broken = []
    for target in re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", _prose(doc.read_text())):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (doc.parent / file_part).resolve() if file_part else doc
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with anchor #{anchor}")
    assert not broken, broken


def test_no_document_names_a_temporary_folder_or_a_session():
    offending = []
    for doc in _documents():
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            if "/tmp/" in line or re.search(r"\bsession\b", line, flags=re.I):
                offending.append(f"{doc.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not offending, offending


def _schema_keys(node, prefix, defs, out, depth=0):
    """Every property name of the schema, with its dotted path, following $ref, items and oneOf/anyOf/allOf."""
    if not isinstance(node, dict) or depth > 20:
        return
    if "$ref" in node:
        _schema_keys(defs.get(node["$ref"].split("/")[-1], {}), prefix, defs, out, depth + 1)
    for name, sub in node.get("properties", {}).items():
        path = f"{prefix}.{name}" if prefix else name
        out.add(path)
        _schema_keys(sub, path, defs, out, depth + 1)
    if isinstance(node.get("items"), dict):
        _schema_keys(node["items"], prefix, defs, out, depth + 1)
    for combinator in ("oneOf", "anyOf", "allOf"):
        for sub in node.get(combinator, []):
            _schema_keys(sub, prefix, defs, out, depth + 1)


def _documented_keys(text: str) -> set[str]:
    """The keys the reference documents: code spans in a heading or in the first cell of a table row, with
    ``[]`` dropped (``tasks[].name`` documents ``tasks.name``)."""
    names = set()
    for line in text.splitlines():
        if line.startswith("#"):
            names.update(re.findall(r"`([^`]+)`", line))
        elif line.startswith("| `"):
            names.update(re.findall(r"`([^`]+)`", line.split(" | ")[0]))
    return {name.replace("[]", "") for name in names}


def test_every_schema_key_is_in_the_key_reference():
    """Every property of src/selfheal/config/schema.yaml is a row (or heading) of the reference, spelled as a dotted
    suffix of its path: `lr` under `retrain`, `hf.name` for `corpus.hf.name`, `tasks[].path` for
    `transfer.tasks.path`.
    The published experiments' keys (src/selfheal/experiments/schema.yaml) are rows of docs/experiments.md."""
    for schema_path, reference, sections in (
        (
            ROOT / "src" / "selfheal" / "config" / "schema.yaml",
            KEY_REFERENCE,
            {"models", "pretrain", "retrain", "recipe", "grid"},
        ),
        (ROOT / "src" / "selfheal" / "experiments" / "schema.yaml", ROOT / "docs" / "experiments.md", {"transfer"}),
    ):
        schema = yaml.safe_load(schema_path.read_text())
        keys: set[str] = set()
        _schema_keys(schema, "", schema.get("$defs", {}), keys)
        assert sections <= keys, sorted(keys)
        documented = _documented_keys(reference.read_text())

        def found(key):  # a dotted suffix is a row, or a mapping whose own keys are rows (`hf.name` for `corpus.hf`)
            suffixes = {".".join(key.split(".")[i:]) for i in range(len(key.split(".")))}
            return any(s in documented or any(d.startswith(s + ".") for d in documented) for s in suffixes)

        missing = sorted(key for key in keys if not found(key))
        assert not missing, f"not documented in {reference.relative_to(ROOT)}: {missing}"


def _default_cells(text: str) -> dict[str, str]:
    """The default column of the reference's key tables (header ``| key | default | meaning |``), by dotted key:
    the section heading's key (``## `recipe` `` -> ``recipe.lrs``; ``models`` -> ``models[].context``) before the
    row's, each of a row's keys (``d_model``, ``n_head``) given the same cell."""
    cells, section, in_table = {}, None, False
    for line in text.splitlines():
        if line.startswith("## "):
            heading = re.findall(r"`([^`]+)`", line)
            section = (heading[0] + ("[]" if heading[0] == "models" else "")) if heading else None
        if line.startswith("| key | default |"):
            in_table = True
        elif not line.startswith("|"):
            in_table = False
        elif in_table and line.startswith("| `") and section:
            first, default = (cell.strip() for cell in line.split(" | ")[:2])
            for key in re.findall(r"`([^`]+)`", first):
                cells[key if key == section else f"{section}.{key}"] = default
    return cells


def test_the_key_reference_gives_each_default_the_schema_gives():
    """Each default of the key tables is the schema's ``default:`` (read as YAML: `3.0e-3` is 0.003), and a key the
    schema gives no default to has none there (``—``): a default written twice cannot drift apart."""
    from selfheal.config import schema

    def flat(values, prefix=""):
        for key, value in values.items():
            path = f"{prefix}.{key}" if prefix else key
            if isinstance(value, dict) and value:
                yield from flat(value, path)
            else:
                yield path, value

    given = dict(flat(schema.defaults())) | {f"models[].{k}": v for k, v in schema.defaults("models").items()}
    cells = _default_cells(KEY_REFERENCE.read_text())
    assert {"recipe.lrs", "models[].context", "corpus.hf.config", "threads"} <= set(cells), sorted(cells)
    wrong = []
    for key, cell in sorted(cells.items()):
        if key in given:
            spans = re.fullmatch(r"`([^`]+)`", cell)
            if not spans or yaml.safe_load(spans.group(1)) != given[key]:
                wrong.append(f"{key}: {cell} (schema: {given[key]!r})")
        elif cell != "—":
            wrong.append(f"{key}: {cell} (schema: no default)")
    core = {k for k in given if not k.startswith(("job_unit", "partial"))}
    assert not wrong and core <= set(cells), (wrong, sorted(core - set(cells)))


def test_config_readme_points_to_the_key_reference():
    text = (ROOT / "config" / "README.md").read_text()
    assert "../docs/configuration.md" in text and len(text.splitlines()) <= 5


def test_readme_is_short_and_keeps_the_headline_markers():
    """Each shipped page's headline block sits after the line naming that page, opened and closed once."""
    from selfheal.analysis import answer

    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 290
    pages = ("reference/default/answer.md", "reference/fully_trained/answer.md", "reference/study/answer.md")
    assert text.count("<!-- answer:headline -->") == text.count("<!-- /answer:headline -->") == len(pages)
    for page in pages:
        after = text.index(answer.source_marker(page))
        start = text.index("<!-- answer:headline -->", after)
        assert start < text.index("<!-- /answer:headline -->", start)
        assert text.find("<!-- headline of ", after + 1) == -1 or text.find("<!-- headline of ", after + 1) > start


def test_default_grid_figures_have_their_place():
    text = (ROOT / "docs" / "performance.md").read_text()
    assert "<!-- default-grid: begin -->" in text and "<!-- default-grid: end -->" in text


def _resolved(name: str) -> dict:
    from selfheal.experiments import config  # the whole config: the core's keys and the experiments'

    return config.resolve_whole(yaml.safe_load((ROOT / "config" / name).read_text()))


def test_documented_counts_of_the_shipped_configs_are_computed():
    """The numbers the documents state about shipped configs are what the grid makes of them: cells per network of
    the default config (docs/configuration.md), network jobs of config/full.yaml (README, docs/cluster.md)."""
    from collections import Counter

    from selfheal import grid
    from selfheal.experiments import frozen_random

    default = _resolved("config.yaml")
    per_network = Counter((c.model, c.pretrain_seed) for c in grid.cells(default))
    per_model = {model: n for (model, _), n in per_network.items()}
    text = " ".join((ROOT / "docs" / "configuration.md").read_text().split())
    said = re.search(
        r"The default config has (\d+) cells per network of `(\S+)` and (\d+) per network of `(\S+)`\.", text
    )
    assert said, "docs/configuration.md no longer states the default's cells per network"
    assert {said.group(2): int(said.group(1)), said.group(4): int(said.group(3))} == {
        m: per_model[m] for m in (said.group(2), said.group(4))
    }
    full = _resolved("full.yaml")
    frozen, models = len(frozen_random.variants(full)), len(full["models"])
    readme = " ".join((ROOT / "README.md").read_text().split())
    networks = len(grid.networks(full, full["models"]))
    # the experiments module pretrains each variant and each base model's reference, one job per model
    pretrains = frozen + len({v["base_model"] for v in frozen_random.variants(full)})
    assert (
        f"and {frozen} frozen-random variants of its GPT-2 and BART models: {networks} network jobs and {pretrains} "
        "frozen-random pretraining jobs" in readme
    )
    assert f"({models} models) {networks} network jobs, and the experiments module's {pretrains} pretraining jobs" in (
        " ".join((ROOT / "docs" / "cluster.md").read_text().split())
    )
    cluster = " ".join((ROOT / "docs" / "cluster.md").read_text().split())
    assert (
        f"plus {frozen} frozen-random pretrains" in cluster and f"({models} models) {networks} network jobs" in cluster
    )
    assert {m["arch"] for m in full["models"]} == {"gpt2", "bart", "bert"}
    assert "a BART and a BERT" in readme
