"""The units of work pytest-xdist hands to its workers (``-n``, on in pyproject.toml): the tests of one stage
(tests/stages.py) in one test file, so a module's fixtures (a workflow run several tests read) are made once per
stage, and every test that reads the shared tiny run (``tiny_run``, tests/conftest.py) in one unit, so that run is
made once and its readers run in file order (tests/test_workflow.py's editing test changes it for the tests after
it). Units are handed out in collection order, which tests/stages.py sorts by stage.

The controller schedules by test id only; the workers, which collect the tests, write each test's unit to a file the
controller names (``SELFHEAL_TEST_UNITS``), and the scheduler reads it (pytest-xdist's own ``xdist_group`` marker is
not used: its rewrite of the test ids has no effect under pytest 9)."""

from __future__ import annotations

import glob
import json
import os
import tempfile

import pytest
from stages import stage_of

UNITS_ENV = "SELFHEAL_TEST_UNITS"


def unit_of(item: pytest.Item) -> str:
    group = "tiny_run" if "tiny_run" in item.fixturenames else item.nodeid.split("::")[0]
    return f"{stage_of(item)} {group}"


def pytest_configure(config):
    if hasattr(config, "workerinput") or os.environ.get(UNITS_ENV):
        return
    fd, path = tempfile.mkstemp(prefix="selfheal-test-units-")
    os.close(fd)
    os.environ[UNITS_ENV] = path

    def cleanup():
        os.environ.pop(UNITS_ENV, None)
        for name in glob.glob(path + "*"):
            os.remove(name)

    config.add_cleanup(cleanup)


@pytest.hookimpl(trylast=True)  # after tests/stages.py's sort and the deselection: the ids the controller gets
def pytest_collection_modifyitems(config, items):
    worker = getattr(config, "workerinput", {}).get("workerid")
    path = os.environ.get(UNITS_ENV)
    if worker is None or not path:
        return
    target = f"{path}.{worker.removeprefix('gw')}"
    with open(target + ".tmp", "w") as f:
        json.dump({item.nodeid: unit_of(item) for item in items}, f)
    os.replace(target + ".tmp", target)  # whole or absent


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class Units(LoadScopeScheduling):
        units: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.units is None:
                path = os.environ[UNITS_ENV]
                found = sorted(
                    p for p in os.listdir(os.path.dirname(path)) if p.startswith(os.path.basename(path) + ".")
                )
                found = [p for p in found if not p.endswith(".tmp")]
                with open(os.path.join(os.path.dirname(path), found[0])) as f:
                    self.units = json.load(f)
            return self.units.get(nodeid) or nodeid.split("::")[0]

    return Units(config, log)
