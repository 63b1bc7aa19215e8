"""Every command the user documentation shows runs, or dry-runs: the commands of fenced `bash` blocks and the
inline code spans that start with a command (`.venv/bin/...`, `snakemake`, `bash`) in README.md and docs/*.md.

- `snakemake ...`: run as written with `-n` (a dry run) in an empty temporary folder (`--directory`); `my.yaml`
  is the README's example config; the SLURM profile is used without its conda deployment (no conda here).
- `.venv/bin/python benchmarks/<script> ...` and `.venv/bin/python -m selfheal...`: the script or module exists
  and answers `--help`; a `-c` program compiles; `pytest -m` names registered markers.
- `bash setup.sh`: the file exists (not run).

Commands that need a finished run's results are only dry-run or `--help`'d. The dry runs run side by side."""

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from conftest import missing_data_packages
from snakemake_helpers import documented_example, documented_model, pythonpath

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
STARTS = (".venv/bin/", "snakemake ", "bash ")
ENV = {**os.environ, "PYTHONPATH": pythonpath(), "HF_HUB_OFFLINE": "1", "SLURM_CONF": "/dev/null"}


def documented_commands() -> list[tuple[str, str]]:
    """(where, command) of every documented command: each `&&`-joined part separately, comments dropped."""
    found = []
    for doc in DOCS:
        text = doc.read_text()
        lines = []
        for block in re.findall(r"^```(?:bash|sh|shell)\n(.*?)^```", text, re.M | re.S):
            lines += [line.split(" #")[0].strip() for line in block.splitlines()]
        prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
        lines += [span.strip() for span in re.findall(r"`([^`\n]+)`", prose) if span.startswith(STARTS)]
        for line in lines:
            for part in (p.strip() for p in line.split("&&")):
                if part.startswith(STARTS) and (doc.name, part) not in found:
                    found.append((doc.name, part))
    return found


COMMANDS = documented_commands()


def _readme_example(tmp: Path) -> Path:
    """The README's own example config (its first yaml block), as `my.yaml`."""
    block = re.search(r"^```yaml\n(.*?)^```", (ROOT / "README.md").read_text(), re.M | re.S).group(1)
    yaml.safe_load(block)
    path = tmp / "my.yaml"
    path.write_text(block)
    return path


def _slurm_profile(tmp: Path) -> Path:
    """profiles/slurm without its conda deployment (a dry run checks that conda exists)."""
    config = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())
    config.pop("software-deployment-method", None)
    profile = tmp / "slurm_profile"
    profile.mkdir()
    (profile / "config.yaml").write_text(yaml.safe_dump(config))
    return profile


def _snakemake_args(command: str) -> tuple[str, ...]:
    """A snakemake command's own arguments, less what a dry run sets itself: `--cores` (N: any number), `-n`, and
    `--report` (it reads a finished run; its option is checked to exist)."""
    args, out = shlex.split(command)[1:], []
    while args:
        arg = args.pop(0)
        if arg in ("--cores", "-c") or (arg == "--report" and args and not args[0].startswith("-")):
            args.pop(0)
        elif arg not in ("-n", "--dry-run", "--report"):
            out.append(arg)
    return tuple(out)


def _dry_run_argv(args: tuple[str, ...], tmp: Path) -> list[str]:
    args = list(args)
    for i, arg in enumerate(args):
        if arg == "--configfile" and args[i + 1] == "my.yaml":
            args[i + 1] = str(_readme_example(tmp))
        if arg == "--configfile" and args[i + 1] == "my_texts.yaml":  # docs/configuration.md's, on BBC News texts
            (tmp / "work").mkdir(parents=True, exist_ok=True)
            args[i + 1] = str(documented_example(tmp / "work", topics=("tech",)))
        if arg == "--configfile" and args[i + 1] == "my_model.yaml":  # docs/configuration.md's, on a saved GPT-2
            (tmp / "work").mkdir(parents=True, exist_ok=True)
            args[i + 1] = str(documented_model(tmp / "work"))
        if arg == "--profile" and args[i + 1] == "profiles/slurm":
            args[i + 1] = str(_slurm_profile(tmp))
    return [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(ROOT / "Snakefile"),
        *args,
        "--cores",
        "2",
        "-n",
        "--quiet",
        "--directory",
        str(tmp / "work"),
    ]


def test_commands_are_found():
    commands = [c for _, c in COMMANDS]
    assert "bash setup.sh" in commands
    assert any(c.startswith(".venv/bin/snakemake --cores 2") for c in commands)
    assert any("benchmarks/" in c for c in commands) and any(c.startswith("snakemake --profile") for c in commands)


def test_snakemake_commands_dry_run(tmp_path):
    """Each distinct snakemake command (documented anywhere) dry-runs in its own empty folder (one that reads a study's
    finished part is refused there: nothing has finished)."""
    distinct: dict[tuple[str, ...], str] = {}
    for doc, command in COMMANDS:
        if re.match(r"(\.venv/bin/)?snakemake ", command):
            distinct.setdefault(_snakemake_args(command), f"{doc}: {command}")
    assert len(distinct) >= 5, distinct
    runs, unchecked = {}, {}
    for number, (args, name) in enumerate(distinct.items()):
        configs = [
            args[i + 1]
            for i, a in enumerate(args[:-1])
            if a == "--configfile" and args[i + 1] not in ("my.yaml", "my_texts.yaml", "my_model.yaml")
        ]
        missing = [m for c in configs for m in missing_data_packages(ROOT / c)]
        if "profiles/slurm" in args and importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
            missing.append("snakemake-executor-plugin-slurm (the slurm extra)")
        if missing:
            unchecked[name] = missing
            continue
        (tmp_path / str(number)).mkdir()
        runs[name] = _dry_run_argv(args, tmp_path / str(number))

    def dry_run(argv):
        return subprocess.run(argv, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)

    with ThreadPoolExecutor(4) as pool:
        done = dict(zip(runs, pool.map(dry_run, runs.values())))
    # a readout of a study's finished part (partial: true or networks) in an empty folder: refused, naming the key
    refused = {name: p for name, p in done.items() if "partial=True" in name or "partial=networks" in name}
    for name, p in refused.items():
        assert p.returncode and "config key 'partial'" in p.stdout + p.stderr, (
            name,
            p.stdout[-1500:],
            p.stderr[-1500:],
        )
    failed = {name: (p.stderr or p.stdout)[-1500:] for name, p in done.items() if p.returncode and name not in refused}
    assert not failed, failed
    if unchecked:
        pytest.skip(f"the others dry-run; not run, what they need is not installed here (setup.sh): {unchecked}")


def test_report_option_exists():
    if any("--report" in c for _, c in COMMANDS):
        out = subprocess.run([sys.executable, "-m", "snakemake", "--help"], env=ENV, capture_output=True, text=True)
        assert "--report" in out.stdout


def _python_target(command: str) -> str | None:
    """What a `.venv/bin/python ...` command runs (a script's path or a module) for the --help check; None when it
    is checked here already (a `-c` program compiles, `pytest -m` names registered markers)."""
    argv = shlex.split(command)
    assert argv[0] == ".venv/bin/python", command
    if argv[1] == "-c":
        compile(argv[2], command, "exec")
        return None
    if argv[1:3] == ["-m", "pytest"]:
        markers = re.findall(r"^\s*\"(\w+):", (ROOT / "pyproject.toml").read_text(), re.M)
        if "-m" in argv[3:]:
            expression = argv[argv.index("-m", 3) + 1]
            used = set(re.findall(r"\w+", expression)) - {"not", "and", "or"}
            assert used <= set(markers), (command, markers)
        return None
    if argv[1] == "-m":
        return argv[2]
    script = ROOT / argv[1]
    assert script.is_file(), f"{command}: no {argv[1]}"
    return str(script)


HELP_DRIVER = """
import json, runpy, sys, io, contextlib
report = {}
for target in json.loads(sys.argv[1]):
    sys.argv = [target, "--help"]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            if target.endswith(".py"):
                sys.path.insert(0, target.rsplit("/", 1)[0])
                runpy.run_path(target, run_name="__main__")
            else:
                runpy.run_module(target, run_name="__main__", alter_sys=True)
        report[target] = "no SystemExit from --help"
    except SystemExit as e:
        report[target] = "" if e.code in (0, None) and "usage" in out.getvalue().lower() else f"exit {e.code}"
    except BaseException as e:
        report[target] = repr(e)[-800:]
print("REPORT " + json.dumps(report))
"""


def test_python_commands_answer_help():
    """Every documented script and module answers --help (all in one process: torch is imported once)."""
    targets: dict[str, str] = {}
    for doc, command in COMMANDS:
        if command.startswith(".venv/bin/python"):
            target = _python_target(command)
            if target:
                targets.setdefault(target, f"{doc}: {command}")
    assert targets
    proc = subprocess.run(
        [sys.executable, "-c", HELP_DRIVER, json.dumps(list(targets))],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("REPORT ")]
    assert lines, proc.stderr[-3000:]
    report = json.loads(lines[-1].removeprefix("REPORT "))
    failed = {targets[t]: why for t, why in report.items() if why}
    assert not failed, failed


@pytest.mark.parametrize("command", [c for _, c in COMMANDS if c.startswith("bash ")])
def test_bash_commands_name_files_that_exist(command):
    assert (ROOT / shlex.split(command)[1]).is_file(), command
