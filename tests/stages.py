"""The suite's CI stages, in the order of the snakemake-workflows template: format and lint (tests marked ``lint``:
snakefmt, ``snakemake --lint``, ruff), the fast tests (everything unmarked), then the end-to-end runs (``e2e`` and
``slurm``). One pytest run (the README's test command) runs them in that order; a stage runs only if the stages
before it passed (as the template's test job needs its lint jobs), unless ``--all-stages``. The end of the run
prints each stage's tests and wall time, and names the stage of every failure. With ``SELFHEAL_STAGE_FILE`` set,
each stage as it starts and the first failure are appended to that file (``.ci/run`` reads it to say where a run
stopped)."""

from __future__ import annotations

import os
import tempfile
import time

import pytest

STAGES = ("lint", "fast", "e2e")
TITLES = {"lint": "format and lint", "fast": "fast tests", "e2e": "end-to-end"}


FAILURES_ENV = "SELFHEAL_STAGE_FAILURES"


def stage_of_marks(names) -> str:
    """The stage of a test with these marker names (an item's, or a report's keywords)."""
    if "lint" in names:
        return "lint"
    if "e2e" in names or "slurm" in names:
        return "e2e"
    return "fast"


def stage_of(item: pytest.Item) -> str:
    return stage_of_marks({m.name for m in item.iter_markers()})


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")


class Stages:
    def __init__(self, gate: bool, failures_file: str | None = None, worker: bool = False):
        self.gate = gate
        self.worker = worker  # an xdist worker: runs tests, the controller counts them
        self.failures_file = failures_file  # shared with the xdist workers: the failed stages, one per line
        self.outcomes = {s: {"passed": 0, "failed": 0, "skipped": 0} for s in STAGES}
        self.failures = {s: [] for s in STAGES}
        self.gated = {s: 0 for s in STAGES}
        self.seen, self.first, self.last = set(), {}, {}  # stages reported; first start, last stop
        self.stage_file = os.environ.get("SELFHEAL_STAGE_FILE")

    def pytest_collection_modifyitems(self, items):
        items.sort(key=lambda item: STAGES.index(stage_of(item)))  # stable: file order kept within a stage

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        stage = stage_of(item)
        failed = [s for s in STAGES[: STAGES.index(stage)] if self.failures[s] or s in self._failed_elsewhere()]
        if self.gate and failed:
            pytest.skip(
                f"stage {failed[0]} ({TITLES[failed[0]]}) failed: later stages do not run (--all-stages runs them)"
            )

    def _failed_elsewhere(self) -> set[str]:
        """The stages that failed on any xdist worker (the controller's file), else none."""
        if not self.failures_file or not os.path.exists(self.failures_file):
            return set()
        with open(self.failures_file) as f:
            return set(f.read().split())

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
        if self.worker:  # the controller counts (it sees every worker's reports)
            return
        stage = stage_of_marks(report.keywords)
        if stage not in self.seen:
            self.seen.add(stage)
            self.first[stage] = getattr(report, "start", None) or time.time()
            self._note(f"running stage {stage} ({TITLES[stage]})")
        self.last[stage] = getattr(report, "stop", None) or time.time()
        if report.failed:
            if report.nodeid not in self.failures[stage]:
                if not any(self.failures.values()):
                    self._note(f"failed in stage {stage} ({TITLES[stage]}): {report.nodeid}")
                self.failures[stage].append(report.nodeid)
                self.outcomes[stage]["failed"] += 1
                if self.failures_file:
                    with open(self.failures_file, "a") as f:
                        f.write(stage + "\n")
        elif report.when == "call" and report.passed:
            self.outcomes[stage]["passed"] += 1
        elif report.skipped and report.when in ("setup", "call"):
            self.outcomes[stage]["skipped"] += 1
            if "later stages do not run" in str(report.longrepr):
                self.gated[stage] += 1

    def pytest_terminal_summary(self, terminalreporter):
        tr = terminalreporter
        tr.section("stages")
        for stage in STAGES:
            if stage not in self.seen:
                tr.write_line(f"stage {stage} ({TITLES[stage]}): no tests")
                continue
            counts = ", ".join(f"{n} {k}" for k, n in self.outcomes[stage].items() if n)
            wall = self.last[stage] - self.first[stage]
            verdict = "FAILED" if self.failures[stage] else "ok"
            if self.gated[stage]:
                verdict = "not run, an earlier stage failed"
            tr.write_line(f"stage {stage} ({TITLES[stage]}): {verdict}, {counts or 'nothing ran'} in {wall:.1f} s")
        for stage in STAGES:
            for nodeid in self.failures[stage]:
                tr.write_line(f"FAILED in stage {stage} ({TITLES[stage]}): {nodeid}", red=True)


def pytest_addoption(parser):
    parser.addoption(
        "--all-stages",
        action="store_true",
        help="run every stage even after an earlier one failed (selfheal's CI stages)",
    )


def pytest_configure(config):
    failures_file = os.environ.get(FAILURES_ENV)
    if not _is_worker(config) and not failures_file:
        # the controller (or a run without workers): a file the workers inherit through the environment
        fd, failures_file = tempfile.mkstemp(prefix="selfheal-stage-failures-")
        os.close(fd)
        os.environ[FAILURES_ENV] = failures_file

        def cleanup():
            os.environ.pop(FAILURES_ENV, None)
            if os.path.exists(failures_file):
                os.remove(failures_file)

        config.add_cleanup(cleanup)
    gate = not config.getoption("--all-stages")
    config.pluginmanager.register(Stages(gate, failures_file, _is_worker(config)), "selfheal-stages")
