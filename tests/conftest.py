import os
import struct
import sys
import zlib
from pathlib import Path

import pytest
import torch

pytest_plugins = ["stages", "units"]  # the CI stages (tests/stages.py), the xdist workers' units (tests/units.py)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Every Snakemake start (any executor) imports snakemake-executor-plugin-slurm, which runs `scontrol show config`
# while defining its settings. Where SLURM's client is installed but no controller answers (CI installs it for
# tests/test_slurm.py, which starts the controller only for itself), that call blocks about 10 s: without a
# slurm.conf scontrol retries until the plugin's 10 s timeout, with one whose controller is down it gives up after
# 9 s. Pointed at an empty configuration it fails at once, and Snakemake starts as it does without SLURM. The
# Snakemake runs the tests start inherit this; tests/test_slurm.py removes it for the cluster and its submissions.
os.environ.setdefault("SLURM_CONF", "/dev/null")

from selfheal import models
from selfheal.models import families
from selfheal.training import objectives  # noqa: E402

# The device of every test that compares numbers bit for bit: the CPU, also on a machine with a GPU (where the default
# `auto` would take CUDA with TF32 and the test would measure CUDA's determinism rather than the code's).
CPU = {"device": "cpu"}
TINY_MODEL = {"name": "t", "arch": "gpt2", "n_layer": 3, "d_model": 16, "n_head": 2, "context": 16, "dropout": 0.0}
SPECIAL = {"vocab_size": 64, "eos": 0, "pad": 1, "mask": 2}


def missing_data_packages(configfile) -> list[str]:
    """The data packages (setup.sh installs them with --no-deps) that a config names and this environment lacks:
    its ``package:<module>`` models and the packaged tasks it trains on. A test that runs such a config skips with
    them as its reason where they are missing (on a GPU machine set up without them), as the corpus tests do."""
    import yaml

    from selfheal import packages
    from selfheal.experiments.transfer import tasks

    needed: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            if node.get("name") in tasks.PACKAGES:
                needed.add(tasks.PACKAGES[node["name"]])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, str):
            if node.startswith(packages.PREFIX):
                needed.add(node.removeprefix(packages.PREFIX).partition("/")[0])
            elif node in tasks.PACKAGES:
                needed.add(tasks.PACKAGES[node])

    walk(yaml.safe_load(Path(configfile).read_text()))
    return sorted(m for m in needed if packages.package_dir(m) is None)


def skip_without_data_packages(configfile) -> None:
    missing = missing_data_packages(configfile)
    if missing:
        pytest.skip(f"{Path(configfile).name} needs data packages not installed here: {', '.join(missing)} (setup.sh)")


def trained_like(model: torch.nn.Module, seed: int = 1) -> torch.nn.Module:
    """Perturb every tensor (LN included) so it differs from any init, as a trained model would."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    return model


def write_trained_and_tokens(folder) -> None:
    """A trained-like tiny model (``folder/trained``) and a token file of random ids (``folder/tokens.safetensors``:
    3,200 train tokens, the first 640 again as validation): the inputs of a heal unit outside the workflow."""
    from safetensors.torch import save_file

    model = trained_like(models.build(TINY_MODEL, SPECIAL, seed=0))
    models.save(model, folder / "trained")
    g = torch.Generator().manual_seed(0)
    stream = torch.randint(3, 64, (16 * 200,), generator=g, dtype=torch.int32)
    save_file(
        {"train": stream, "val": stream[: 16 * 40].clone()},
        str(folder / "tokens.safetensors"),
        metadata={k: str(v) for k, v in SPECIAL.items()},
    )


def assert_drawn_png(path) -> None:
    """``path`` is a PNG of some size with more than a blank page in it: its decoded rows hold more than a few
    distinct byte values (a blank image has about 2), read with the standard library."""
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    pos, idat = 8, b""
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos : pos + 4]), data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    distinct = len(set(zlib.decompress(idat)))
    assert width >= 200 and height >= 100 and distinct > 8, (path, width, height, distinct)


@pytest.fixture
def tiny_model():
    torch.manual_seed(0)
    return models.build(TINY_MODEL, SPECIAL, seed=0)


@pytest.fixture
def tiny_model_theta0(tiny_model):
    """The step-0 weights of tiny_model (taken before any fixture perturbs it)."""
    return {n: p.detach().clone() for n, p in tiny_model.named_parameters()}


@pytest.fixture
def trained_model(tiny_model, tiny_model_theta0):
    return trained_like(tiny_model)


@pytest.fixture
def adapter():
    return families.GPT2()


@pytest.fixture
def sequences():
    """(train sequences, validation batches) for the causal-LM tiny model."""
    g = torch.Generator().manual_seed(0)
    train = torch.randint(0, 64, (96, 16), generator=g)
    val = torch.randint(0, 64, (16, 16), generator=g)
    return train, objectives.CausalLM(SPECIAL).val_batches(val, 16)


@pytest.fixture(scope="session")
def corpus_seed(tmp_path_factory):
    """Seeds a workflow folder with the data stages of tests/tiny.yaml (Shakespeare, the 300-token BPE): the real
    Snakemake runs them once per session (corpus, tokenizer, tokenize: about 20 s of CPU), and every end-to-end run
    on that corpus and tokenizer starts from them instead of re-running them. Call it with the folder to seed."""
    from snakemake_helpers import TINY_TOKENS, seed_corpus, snakemake

    source = tmp_path_factory.mktemp("corpus")
    configfile = source / "config.yaml"
    configfile.write_text((ROOT / "tests" / "tiny.yaml").read_text())
    proc = snakemake(source, configfile, TINY_TOKENS)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return lambda workdir: seed_corpus(source, Path(workdir))


# The shared end-to-end run: tests/tiny.yaml's two GPT-2 models first (tinyA with two frozen-random variants, tinyB),
# then the other families and a model the user brings (tests/test_workflow_families.py).
GPT2_MODELS = ["tinyA", "tinyB"]
FAMILY_MODELS = ["tinyBert", "tinyBart", "tinyBart16", "myLlama", "asIs"]  # tinyBart16: a swap donor, no cells
# myLlama's own pretraining tokens as its config states them (the model key pretraining_tokens; a made-up count,
# as a model card would give it); asIs gives none.
MY_LLAMA_PRETRAINING_TOKENS = 3_000_000


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory, corpus_seed):
    """One finished run of the whole real workflow, shared by tests/test_workflow.py and
    tests/test_workflow_families.py (one Snakemake run, one aggregate/plots/answer/frozen-random report instead of
    two): tests/tiny.yaml, plus an encoder-only (BERT, masked LM) and an encoder-decoder (BART, denoising) with the
    cross-attention wipe, the encoder swaps (a fresh encoder, and the trained one of a narrower BART pretrained only
    as its donor) and two frozen-random variants, and a model the user brings from a local folder (adapted first,
    and as downloaded). Each model's cells are its own, and the grid's cross_attn policy and
    encoder swap make cells only for the encoder-decoder, so tinyA's and tinyB's cells are exactly tests/tiny.yaml's.
    Returns (folder, config file). tests/test_workflow.py's editing test changes tinyB's retrain settings in that
    config and re-runs tinyB's cells up to the summary: tests that read the run later see its tables with tinyB's
    cells new, its figures and answer page as the first run made them."""
    import yaml
    from snakemake_helpers import snakemake
    from test_pretrained import LLAMA, save_local_model

    workdir = tmp_path_factory.mktemp("run")
    save_local_model(workdir / "my-llama", LLAMA)
    config = yaml.safe_load((ROOT / "tests" / "tiny.yaml").read_text())
    assert [m["name"] for m in config["models"]] == GPT2_MODELS
    config["models"] += [
        {"name": "tinyBert", "arch": "bert", "n_layer": 2, "d_model": 32, "n_head": 2, "context": 32},
        {
            "name": "tinyBart",
            "arch": "bart",
            "n_layer": 1,
            "n_dec_layer": 1,
            "d_model": 32,
            "n_head": 2,
            "context": 32,
            "frozen_random": [["attention"], ["embeddings", "ffn"]],
        },
        {  # an encoder swap's donor: pretrained only, its trained encoder swapped into tinyBart
            "name": "tinyBart16",
            "arch": "bart",
            "n_layer": 1,
            "n_dec_layer": 1,
            "d_model": 16,
            "n_head": 2,
            "context": 32,
            "heal": False,
        },
        {
            "name": "myLlama",
            "source": "pretrained",
            "name_or_path": str(workdir / "my-llama"),
            "arch": "llama",
            "n_layer": 2,
            "context": 16,
            "pretraining_tokens": MY_LLAMA_PRETRAINING_TOKENS,
        },
        {
            "name": "asIs",
            "source": "pretrained",
            "name_or_path": str(workdir / "my-llama"),
            "arch": "llama",
            "n_layer": 2,
            "context": 16,
            "adapt": False,
        },
    ]
    config["grid"].update({"policies": ["full", "cross_attn"], "targets": ["all"], "encoder_swap": [16, "tinyBart16"]})
    # every race's copies in one pass, as on a GPU (training.lockstep): GPT-2, BERT, BART (its cross-attention and
    # swaps vmapped whole) and Llama; the race one copy after another runs in tests/test_race.py and the other e2e runs
    config["hardware"] = {**config.get("hardware", {}), "copies_per_pass": 4}
    configfile = workdir / "config.yaml"
    configfile.write_text(yaml.safe_dump(config))
    corpus_seed(workdir)  # the data stages of tests/tiny.yaml (myLlama's and asIs's own tokenizer still tokenize)
    proc = snakemake(workdir, configfile)
    assert proc.returncode == 0, proc.stderr[-5000:]
    return workdir, configfile
