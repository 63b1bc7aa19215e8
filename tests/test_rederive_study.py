"""reference/study re-derives (tests/test_rederive.py does reference/fully_trained): its answer tables rebuilt from
its own cell tables by the package's builder are the shipped ones, and its survival estimates are the few-line
Turnbull estimate's from its summary.parquet. About 40 s of one core."""

from __future__ import annotations

from test_rederive import ROOT, assert_same_tables, assert_survival_re_derives, rebuilt_and_shipped

STUDY = ROOT / "reference" / "study"


def test_study_answer_tables_re_derive(tmp_path):
    assert_same_tables(*rebuilt_and_shipped(STUDY, tmp_path))


def test_study_survival_re_derives_by_turnbull():
    assert assert_survival_re_derives(STUDY) >= 100
