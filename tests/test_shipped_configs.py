"""Every shipped config (config/*.yaml, tests/tiny.yaml) and every config example in the README dry-runs with the
real Snakefile in a temporary folder (``snakemake -n``: the pre-run check, the DAG, no job, nothing downloaded),
and each writes to its own results folder, so running the examples one after another never overwrites another's
outputs."""

import re
from pathlib import Path

import pytest
import yaml

from selfheal.experiments import config as whole_config
from selfheal.config.merge import merge
from conftest import missing_data_packages, skip_without_data_packages
from snakemake_helpers import run_many

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted((ROOT / "config").glob("*.yaml")) + [ROOT / "tests" / "tiny.yaml"]
README = (ROOT / "README.md").read_text()
README_YAML = re.findall(r"```yaml\n(.*?)```", README, flags=re.S)
pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory):
    runs = {}
    for path in SHIPPED:
        runs[path.name] = (str(path), str(tmp_path_factory.mktemp(path.stem)))
    for number, text in enumerate(README_YAML):
        workdir = tmp_path_factory.mktemp(f"readme{number}")
        (workdir / "example.yaml").write_text(text)
        runs[f"readme{number}"] = (str(workdir / "example.yaml"), str(workdir))
    return run_many(runs), runs


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_shipped_config_dry_runs(path, dry_runs):
    skip_without_data_packages(path)
    report, runs = dry_runs
    result = report[path.name]
    assert "error" not in result, result.get("error")
    assert result["jobs"] > 1 and "all" in result["rules"], result
    assert not (Path(runs[path.name][1]) / "results").exists()  # a dry run runs nothing


@pytest.mark.parametrize("number", range(len(README_YAML)))
def test_readme_yaml_example_dry_runs(number, dry_runs):
    result = dry_runs[0][f"readme{number}"]
    assert "error" not in result, (README_YAML[number], result.get("error"))
    assert result["jobs"] > 1


def test_readme_commands_name_shipped_configs():
    named = set(re.findall(r"--configfile (config/[\w.-]+\.yaml)", README))
    assert named, "the README names no example config"
    for path in named:
        assert (ROOT / path).is_file(), f"README runs {path}, which is not shipped"


def test_every_example_writes_to_a_results_folder_of_its_own():
    """The default writes to results/; every other shipped config, merged over it as Snakemake does, to
    results/<its name>/."""
    default = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    folders, unchecked = {}, {}
    for path in sorted((ROOT / "config").glob("*.yaml")):
        missing = missing_data_packages(path)  # its pre-run check needs them
        if missing:
            unchecked[path.name] = missing
            continue
        raw = yaml.safe_load(path.read_text())
        merged = raw if path.name == "config.yaml" else merge(default, raw)
        folders[path] = whole_config.resolve_whole(merged)["results_dir"].rstrip("/")
    assert folders[ROOT / "config" / "config.yaml"] == "results"
    for path, folder in folders.items():
        if path.name != "config.yaml":
            assert folder == f"results/{path.stem}", (path.name, folder)
    assert len(set(folders.values())) == len(folders), folders
    if unchecked:
        pytest.skip(f"the others checked; not checked, their data packages are not installed here: {unchecked}")
