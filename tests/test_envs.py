"""The per-stage conda envs parse and pin exactly what pyproject.toml pins (conda itself cannot run here)."""

import re
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
# conda-forge names that differ from PyPI names
CONDA_NAMES = {"pytorch": "torch"}


def _pyproject_pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + [d for extra in project["optional-dependencies"].values() for d in extra]
    pins = {}
    for dep in deps:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==([^;\s]+)", dep)
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins


def _env_pins(path: Path) -> dict[str, str]:
    env = yaml.safe_load(path.read_text())
    assert env["channels"][0] == "conda-forge"
    pins = {}
    for dep in env["dependencies"]:
        if isinstance(dep, str) and "=" in dep:
            name, version = dep.split("=", 1)
            pins[CONDA_NAMES.get(name, name).lower()] = version
    return pins


ENVS = sorted((ROOT / "envs").glob("*.yaml"))


@pytest.mark.parametrize("env", ENVS, ids=[e.stem for e in ENVS])
def test_env_pins_match_pyproject(env):
    pyproject = _pyproject_pins()
    pins = _env_pins(env)
    assert pins, f"{env.name} pins nothing"
    for name, version in pins.items():
        if name == "python":
            continue
        assert name in pyproject, f"{env.name} pins {name}, which pyproject.toml does not"
        assert version == pyproject[name], f"{env.name}: {name}={version}, pyproject.toml has {pyproject[name]}"


def test_every_rule_has_a_conda_env_and_a_log():
    for smk in (ROOT / "workflow" / "rules").glob("*.smk"):
        text = smk.read_text()
        for rule in re.split(r"\nrule ", "\n" + text)[1:]:
            name = rule.split(":")[0]
            assert "    log:" in rule, f"rule {name} has no log:"
            assert "    conda:" in rule, f"rule {name} has no conda:"
            env = re.search(r'conda:\s*\n\s*"([^"]+)"', rule).group(1)
            assert (smk.parent / env).resolve().is_file(), f"rule {name}: {env} missing"


def test_training_env_has_the_training_stack():
    pins = _env_pins(ROOT / "envs" / "training.yaml")
    assert {"torch", "transformers", "tokenizers", "datasets", "safetensors"} <= set(pins)
    analysis = _env_pins(ROOT / "envs" / "analysis.yaml")
    assert {"pandas", "pyarrow", "altair", "vl-convert-python"} <= set(analysis)
