"""Models a user brings: loaded with ``from_pretrained`` (a hub id, a local folder, a package's folder, optionally a
GGUF file), checked against the config, and saved as a plain safetensors folder with its tokenizer.

S x E is unknown for such a model, so its summary leaves them empty and the tables leave fraction_of_pretrain empty
rather than invent it. ``trust_remote_code`` is never enabled.
"""

from __future__ import annotations

import logging
from pathlib import Path

from selfheal import grid, models, packages, records
from selfheal.models import families
from selfheal.records import PretrainSummary

log = logging.getLogger("selfheal")


class ModelUnavailable(OSError):
    """A hub id that could not be downloaded (no network, no such repository, or gated), said in one sentence."""


def load(model_cfg: dict):
    """(model, tokenizer) as the config names them."""
    import transformers

    family = families.for_arch(model_cfg["arch"])
    source = packages.resolve(model_cfg["name_or_path"])
    kwargs = {"trust_remote_code": False}
    if model_cfg.get("gguf_file"):
        kwargs["gguf_file"] = model_cfg["gguf_file"]
    else:
        if Path(source).is_dir() and not models.has_safetensors(source):
            raise FileNotFoundError(f"{source}: no safetensors weights (pickled checkpoints are refused)")
        kwargs["use_safetensors"] = True
    auto = getattr(transformers, models.AUTO_CLASSES[family.objective])
    try:
        model = auto.from_pretrained(source, **kwargs)
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            source, **{k: v for k, v in kwargs.items() if k != "use_safetensors"}
        )
    except OSError as err:
        if Path(source).exists():
            raise
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelUnavailable(
            f"config key 'name_or_path' of model {model_cfg['name']!r}: {source!r} is not a local folder, and "
            f"loading it as a Hugging Face hub id failed: {reason} On a machine without network access, download "
            f"it where there is one (huggingface-cli download {source} --local-dir <folder>), copy the folder here "
            "and set name_or_path to it."
        ) from None
    if getattr(model.config, "quantization_config", None) is not None or getattr(model, "hf_quantizer", None):
        model = _dequantized_copy(model)
    return model, tokenizer


def _dequantized_copy(model):
    """A plain float model with the same weights. A GGUF checkpoint loads dequantized, but keeps a quantizer
    config that makes it unsavable; dropping that config and rebuilding gives an ordinary model."""
    config_dict = model.config.to_dict()
    config_dict.pop("quantization_config", None)
    config = type(model.config).from_dict(config_dict)
    plain = type(model)(config)
    missing, unexpected = plain.load_state_dict(model.state_dict(), strict=False)
    missing = [k for k in missing if k not in getattr(plain, "_tied_weights_keys", {}) and "lm_head" not in k]
    if missing or unexpected:
        raise RuntimeError(f"rebuilding the dequantized model: missing {missing[:5]}, unexpected {unexpected[:5]}")
    return plain


def import_model(model_cfg: dict, trained_dir: str, summary_path: str) -> PretrainSummary:
    """The import job: load, check against the config, save. A hub id that cannot be downloaded ends the job
    with its one-sentence reason (SystemExit, so the job's log shows the message, not a traceback)."""
    try:
        model, tokenizer = load(model_cfg)
    except ModelUnavailable as err:
        log.error("%s", err)
        raise SystemExit(str(err)) from None
    family = families.for_model(model)
    if family.arch != model_cfg["arch"]:
        raise ValueError(
            f"model {model_cfg['name']!r}: config says arch {model_cfg['arch']!r} but "
            f"{model_cfg['name_or_path']} is a {model.config.model_type!r} model"
        )
    have = [l.id for l in family.layers(model)]
    if have != grid.layer_ids(model_cfg):
        raise ValueError(
            f"model {model_cfg['name']!r}: config says {len(grid.layer_ids(model_cfg))} layers, "
            f"the checkpoint has {len(have)} ({have[0]} .. {have[-1]}); fix n_layer/n_dec_layer"
        )
    models.save(model, trained_dir)
    tokenizer.save_pretrained(trained_dir)
    summary = PretrainSummary(
        model=model_cfg["name"],
        arch=family.arch,
        source="pretrained",
        name_or_path=model_cfg["name_or_path"],
        n_layer=family.n_layers(model),
        d_model=models.width(model),
        params=models.parameter_count(model),
    )
    records.write(summary_path, summary)
    log.info("imported %s: %s, %d layers, %d params", model_cfg["name"], family.arch, summary.n_layer, summary.params)
    return summary
