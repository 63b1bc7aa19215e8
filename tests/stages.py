"""The suite's CI stages, in the order of the snakemake-workflows template: format and lint (tests marked ``lint``:
snakefmt, ``snakemake --lint``, ruff), the fast tests (everything unmarked), then the end-to-end runs (``e2e`` and
``slurm``). One pytest run (the README's test command) runs them in that order; a stage runs only if the stages
before it passed (as the template's test job needs its lint jobs), unless ``--all-stages``. The end of the run
prints each stage's tests and wall time, and names the stage of every failure. With ``SELFHEAL_STAGE_FILE`` set,
each stage as it starts and the first failure are appended to that file (``.ci/run`` reads it to say where a run
stopped)."""

from __future__ import annotations

import os
import time

import pytest

STAGES = ("lint", "fast", "e2e")
TITLES = {"lint": "format and lint", "fast": "fast tests", "e2e": "end-to-end"}


def stage_of(item: pytest.Item) -> str:
    if item.get_closest_marker("lint"):
        return "lint"
    if item.get_closest_marker("e2e") or item.get_closest_marker("slurm"):
        return "e2e"
    return "fast"


class Stages:
    def __init__(self, gate: bool):
        self.gate = gate
        self.outcomes = {s: {"passed": 0, "failed": 0, "skipped": 0} for s in STAGES}
        self.failures = {s: [] for s in STAGES}
        self.gated = {s: 0 for s in STAGES}
        self.start, self.end = {}, {}
        self.stage_file = os.environ.get("SELFHEAL_STAGE_FILE")

    def pytest_collection_modifyitems(self, items):
        items.sort(key=lambda item: STAGES.index(stage_of(item)))  # stable: file order kept within a stage

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        stage = stage_of(item)
        if stage not in self.start:
            self.start[stage] = time.monotonic()
            self._note(f"running stage {stage} ({TITLES[stage]})")
        failed = [s for s in STAGES[: STAGES.index(stage)] if self.failures[s]]
        if self.gate and failed:
            self.gated[stage] += 1
            pytest.skip(
                f"stage {failed[0]} ({TITLES[failed[0]]}) failed: later stages do not run (--all-stages runs them)"
            )

    def _note(self, line: str) -> None:
        if self.stage_file:
            with open(self.stage_file, "a") as f:
                f.write(line + "\n")

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        stage = stage_of(item)
        if report.failed:
            report.sections.append(("stage", f"this test belongs to stage {stage} ({TITLES[stage]})"))
        return report

    def pytest_runtest_logreport(self, report):
        stage = stage_of_report(report)
        if stage is None:
            return
        self.end[stage] = time.monotonic()
        if report.failed:
            if report.nodeid not in self.failures[stage]:
                if not any(self.failures.values()):
                    self._note(f"failed in stage {stage} ({TITLES[stage]}): {report.nodeid}")
                self.failures[stage].append(report.nodeid)
                self.outcomes[stage]["failed"] += 1
        elif report.when == "call" and report.passed:
            self.outcomes[stage]["passed"] += 1
        elif report.skipped and report.when in ("setup", "call"):
            self.outcomes[stage]["skipped"] += 1

    def pytest_terminal_summary(self, terminalreporter):
        tr = terminalreporter
        tr.section("stages")
        for stage in STAGES:
            if stage not in self.start:
                tr.write_line(f"stage {stage} ({TITLES[stage]}): no tests")
                continue
            counts = ", ".join(f"{n} {k}" for k, n in self.outcomes[stage].items() if n)
            wall = self.end.get(stage, self.start[stage]) - self.start[stage]
            verdict = "FAILED" if self.failures[stage] else "ok"
            if self.gated[stage]:
                verdict = "not run, an earlier stage failed"
            tr.write_line(f"stage {stage} ({TITLES[stage]}): {verdict}, {counts or 'nothing ran'} in {wall:.1f} s")
        for stage in STAGES:
            for nodeid in self.failures[stage]:
                tr.write_line(f"FAILED in stage {stage} ({TITLES[stage]}): {nodeid}", red=True)


_STAGE_BY_NODEID: dict[str, str] = {}


def stage_of_report(report) -> str | None:
    return _STAGE_BY_NODEID.get(report.nodeid)


def pytest_addoption(parser):
    parser.addoption(
        "--all-stages",
        action="store_true",
        help="run every stage even after an earlier one failed (selfheal's CI stages)",
    )


def pytest_configure(config):
    config.pluginmanager.register(Stages(gate=not config.getoption("--all-stages")), "selfheal-stages")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    for item in items:
        _STAGE_BY_NODEID[item.nodeid] = stage_of(item)
