"""The README's first two commands are the setup+run and setup+test commands, and CI runs the second; the table
schemas live in docs/outputs.md."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```(?:bash|sh)?\n(.*?)```", text, re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_first_two_commands():
    run, test = _commands()[:2]
    assert run.startswith("bash setup.sh && ") and "snakemake --cores" in run
    assert test.startswith("bash setup.sh && ") and "pytest" in test


def test_ci_runs_the_readme_test_command():
    test = _commands()[1]
    assert test in (ROOT / ".ci" / "run").read_text()


def test_outputs_doc_documents_every_table_column():
    """docs/outputs.md holds the schemas: every column of every table is a row of one of its tables."""
    from selfheal.analysis.tables import CURVE_COLUMNS, NETWORK_COLUMNS, SUMMARY_COLUMNS
    from selfheal.experiments.frozen_random import COLUMNS as FROZEN_RANDOM_COLUMNS
    from selfheal.experiments.transfer.tables import SCORE_COLUMNS, TRANSFER_SUMMARY_COLUMNS

    def documented(text):
        table_cells = set(re.findall(r"^\| ([a-z_, ]+) \|", text, re.M))
        return {name.strip() for cell in table_cells for name in cell.split(",")}

    text = (ROOT / "docs" / "outputs.md").read_text()
    columns = (
        set(SUMMARY_COLUMNS)
        | set(CURVE_COLUMNS)
        | set(NETWORK_COLUMNS)
        | set(SCORE_COLUMNS)
        | set(TRANSFER_SUMMARY_COLUMNS)
    )
    assert columns <= documented(text), columns - documented(text)
    # the frozen-random table's own columns, in its own section
    section = re.search(r"^## Frozen random components.*?(?=^## )", text, re.M | re.S).group(0)
    assert set(FROZEN_RANDOM_COLUMNS) <= documented(section), set(FROZEN_RANDOM_COLUMNS) - documented(section)


def test_every_answer_table_column_is_named_in_its_paragraph():
    """docs/outputs.md's paragraph of each answer table with a fixed column list names every one of its columns (a
    column added to the table and not to the schema fails here)."""
    from selfheal.analysis import answer_tables as t

    text = (ROOT / "docs" / "outputs.md").read_text()
    tables = {
        "network_costs": t.NETWORK_COST_COLUMNS,
        "validation_error": t.VALIDATION_ERROR_COLUMNS,
        "cka": t.CKA_COLUMNS,
        "pretrain_reference": t.REFERENCE_COLUMNS,
        "networks_flags": t.FLAG_COLUMNS,
        "control_drift": t.CONTROL_DRIFT_COLUMNS,
        "size_ordering": t.SIZE_ORDERING_COLUMNS,
        "damage_cells": t.DAMAGE_CELL_COLUMNS,
        "encoder_decoder": t.ENCODER_DECODER_COLUMNS,
    }
    missing = {}
    for name, columns in tables.items():
        start = text.index(f"`results/answer/{name}.parquet`:")
        paragraph = text[start : text.find("\n`results/", start + 1) if "\n`results/" in text[start + 1 :] else None]
        paragraph = paragraph.split("\n\n")[0]
        absent = [c for c in columns if not re.search(rf"\b{c}\b", paragraph)]
        if absent:
            missing[name] = absent
    assert not missing, f"not in docs/outputs.md: {missing}"
