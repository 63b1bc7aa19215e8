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
    for smk in (ROOT / "workflow").rglob("*.smk"):  # the core's rules and the experiments module's
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


# Per-stage environments: the stages that train run in envs/training.yaml, the statistics and figures in
# envs/analysis.yaml. Checked on the jobs of real DAGs (the default config at 2 and 8 cores: network jobs, then a
# network's and each cell's; tests/tiny.yaml: model jobs and the frozen-random report; a downloaded model; the
# transfer experiments).
TRAINING_RULES = {
    "corpus",
    "tokenizer",
    "tokenize",
    "import_pretrained",
    "model",
    "network",
    "make_network",
    "cell",
    "transfer_model",
    "transfer_split",
    "transfer_finetune",
    "transfer_probe",
    "frozen_random_pretrain",
}
ANALYSIS_RULES = {
    "aggregate",
    "plots",
    "answer",
    "frozen_random_table",
    "frozen_random_plot",
    "transfer_aggregate",
    "transfer_plots",
}


@pytest.mark.parametrize(
    "cores, configfile",
    [(2, None), (8, None), (2, "tests/tiny.yaml"), (2, "config/tamkin_cpu.yaml"), (2, "config/pretrained.yaml")],
)
def test_each_stage_runs_in_its_env(tmp_path, cores, configfile):
    from conftest import skip_without_data_packages
    from snakemake_helpers import dag_jobs

    if configfile:
        skip_without_data_packages(ROOT / configfile)

    jobs = dag_jobs(tmp_path, cores, configfiles=(ROOT / configfile,) if configfile else ())
    rules = {job["rule"]: job["conda"] for job in jobs if job["rule"] != "all"}
    assert rules
    for rule, env in rules.items():
        assert rule in TRAINING_RULES | ANALYSIS_RULES, f"rule {rule}: which stage is it?"
        want = "training.yaml" if rule in TRAINING_RULES else "analysis.yaml"
        # (as its rule file spells it, relative to that file: the experiments module's rules lie a level deeper)
        assert env in (f"../../envs/{want}", f"../../../envs/{want}"), f"rule {rule} runs in {env}, not envs/{want}"


def _conda() -> str | None:
    """conda or mamba, where it can reach conda-forge."""
    import shutil
    import subprocess

    exe = shutil.which("mamba") or shutil.which("conda")
    if exe is None:
        return None
    probe = subprocess.run(
        [exe, "search", "--override-channels", "-c", "conda-forge", "python=3.11", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return exe if probe.returncode == 0 else None


def test_conda_envs_are_created_by_snakemake(tmp_path):
    """`snakemake --use-conda --conda-create-envs-only` on the default config (a dry run: it resolves the envs'
    specs without running a job)."""
    import subprocess
    import sys

    if _conda() is None:
        pytest.skip("no conda or mamba here, or it cannot reach conda-forge: the envs cannot be created")
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(ROOT / "Snakefile"),
        "--directory",
        str(tmp_path),
        "--cores",
        "1",
        "--use-conda",
        "--conda-create-envs-only",
        "-n",
        "--conda-prefix",
        str(tmp_path / "envs"),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
