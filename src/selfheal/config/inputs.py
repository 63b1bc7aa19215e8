"""The pre-run check of what a config's files can supply: the corpus (usable text, large enough for the sizes
asked of it) and the folder of a model a user brings (there, with weights selfheal reads, of the configured
family and depth). Cheap: files are read once, nothing is tokenized or downloaded. Errors name the key.

Token counts are not known before the tokenize job, so the corpus sizes are checked against a bound that no
tokenizer exceeds: a token covers at least one byte of text (byte-level BPE, and byte-fallback or character
vocabularies), plus a few tokens per work (the EOS that joins works, a leading word marker).
"""

from __future__ import annotations

import re
from pathlib import Path

from selfheal import grid, packages
from selfheal.config.defaults import MODEL_DEFAULTS
from selfheal.config.errors import ConfigError
from selfheal.data import corpus
from selfheal.lazy import Module
from selfheal.models import families, storage

transformers = Module("transformers")  # only for a model folder a config names

DEFAULT_CONTEXT = MODEL_DEFAULTS["context"]  # the sequence length a count is judged at when a context is the fault

TOKENS_PER_WORK = 3  # at most, beyond one per byte: the joining EOS and a start-of-text word marker
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
PICKLED = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl", "*.pickle")
GGUF_MAGIC = b"GGUF"


def check_corpus_sizes(config: dict, raw: dict) -> None:
    """Refuse a local corpus whose files are unusable (empty, binary, not UTF-8; the file is named), or too small
    for a model's context, its S training sequences or the validation set (the key and the available number are
    named). A hub corpus (source: hf) is not checked here: its size is known only once it is downloaded."""
    if config["corpus"]["source"] == "hf":
        return
    try:
        sizes = corpus.split_sizes(config["corpus"])
    except corpus.CorpusError as err:
        raise ConfigError(err.key, str(err)) from None
    bounds = {split: n_bytes + TOKENS_PER_WORK * works for split, (works, n_bytes) in sizes.items()}  # most tokens
    what = {
        split: f"the {name} split ({sizes[split][0]} works, {sizes[split][1]:,} bytes of text)"
        for split, name in (("train", "train"), ("val", "validation"))
    }
    val_count = config["eval"]["val_sequences"]
    # the two splits' sizes are set by the share of works held out: a count too large for one may be that share's fault
    split_key = ("corpus.val_fraction",)
    for i, model in enumerate(config["models"]):
        raw_model = raw["models"][i]
        context = model["context"]
        for split in ("train", "val"):
            if bounds[split] // context == 0:
                raise ConfigError(
                    f"models[{i}].context",
                    f"{context} tokens per sequence is more than {what[split]} "
                    f"can hold (at most {bounds[split]:,} tokens)",
                    split_key,
                )
        own = "train_sequences" in raw_model.get("pretrain", {})
        train_key = f"models[{i}].pretrain.train_sequences" if own else "pretrain.train_sequences"
        for split, count, key in (
            ("train", model["pretrain"]["train_sequences"], train_key),
            ("val", val_count, "eval.val_sequences"),
        ):
            available = bounds[split] // context
            if count is not None and count > available:
                raise ConfigError(
                    # a count that fits at the default context but not at this model's: the context is too long
                    f"models[{i}].context" if count <= bounds[split] // DEFAULT_CONTEXT else key,
                    f"{count} sequences of {context} tokens (model {model['name']!r}) asked, but "
                    f"{what[split]} gives at most {available:,}: ask for at most that many, a shorter context, "
                    f"or give the corpus at least {count * context:,} bytes of {split} text",
                    split_key,
                )


def _path_like(spec: str) -> bool:
    """A name_or_path that can only be a folder (absolute, relative with ./ or ../, ~, or deeper than org/name)."""
    return spec.startswith(("/", ".", "~")) or "\\" in spec or spec.endswith("/") or spec.count("/") > 1


def check_model_source(model: dict, key: str) -> None:
    """A model a user brings: a package that is installed, a folder that exists and holds weights selfheal reads
    (safetensors, or the GGUF file named by gguf_file; pickled weights are refused), whose config.json is of the
    configured arch and depth. A hub id is left to the import job (it needs the network)."""
    spec = model["name_or_path"]
    try:
        folder = packages.local_folder(spec)
    except packages.PackageNotFound as err:
        raise ConfigError(f"{key}.name_or_path", str(err)) from None
    if folder is None:
        if _path_like(spec):
            raise ConfigError(f"{key}.name_or_path", f"folder {spec} does not exist")
        if not HUB_ID.fullmatch(spec):
            raise ConfigError(
                f"{key}.name_or_path", f"{spec!r} is neither an existing folder nor a hub id (organisation/name)"
            )
        return
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"{key}.name_or_path", f"{folder} is a file; give the folder that holds the model")
    if model.get("gguf_file"):
        path = folder / model["gguf_file"]
        if not path.is_file():
            raise ConfigError(f"{key}.gguf_file", f"{path} does not exist")
        with open(path, "rb") as f:
            if f.read(4) != GGUF_MAGIC:
                raise ConfigError(f"{key}.gguf_file", f"{path} is not a GGUF file (it does not start with 'GGUF')")
        return
    if not storage.has_safetensors(folder):
        pickled = sorted(p.name for pattern in PICKLED for p in folder.glob(pattern))
        if pickled:
            raise ConfigError(
                f"{key}.name_or_path",
                f"{folder} holds pickled weights only ({', '.join(pickled)}); "
                "selfheal never unpickles a checkpoint: save it as safetensors "
                "(save_pretrained(..., safe_serialization=True))",
            )
        raise ConfigError(
            f"{key}.name_or_path",
            f"{folder} has no weights (no model.safetensors or model-*.safetensors; a GGUF checkpoint needs gguf_file)",
        )
    try:
        storage.check_safetensors(folder)
    except (OSError, ValueError) as err:
        raise ConfigError(f"{key}.name_or_path", str(err)) from None
    if not (folder / "config.json").is_file():
        raise ConfigError(f"{key}.name_or_path", f"{folder} has no config.json (not a transformers model folder)")
    try:
        model_config = transformers.AutoConfig.from_pretrained(str(folder), trust_remote_code=False)
    except (OSError, ValueError, KeyError) as err:
        raise ConfigError(f"{key}.name_or_path", f"{folder}/config.json: {err}") from None
    try:
        family = families.for_model_type(model_config.model_type)
    except ValueError:
        known = ", ".join(sorted(f.model_type for f in families.FAMILIES.values()))
        raise ConfigError(
            f"{key}.name_or_path",
            f"{folder} holds a {model_config.model_type!r} model, whose layers selfheal cannot reset one by one "
            f"(it knows the anatomy of {known})",
        ) from None
    if family.arch != model["arch"]:
        raise ConfigError(
            f"{key}.arch", f"{model['arch']!r}, but {folder} holds a {model_config.model_type!r} model ({family.arch})"
        )
    have = [model_config.num_hidden_layers]
    want = [model["n_layer"]]
    if family.stacks == grid.STACKS:
        have.append(model_config.decoder_layers)
        want.append(len(grid.layer_ids(model)) - model["n_layer"])
    if have != want:
        raise ConfigError(
            f"{key}.n_layer" if have[0] != want[0] else f"{key}.n_dec_layer",
            f"{want[0] if have[0] != want[0] else want[1]}, but {folder} has "
            f"{have[0] if have[0] != want[0] else have[1]} layers",
        )
    check_tokenizer(folder, model_config.vocab_size, key)


TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model")


def check_tokenizer(folder: Path, embedding_rows: int, key: str) -> None:
    """A brought model's folder holds its tokenizer (selfheal tokenizes the corpus with it), whose vocabulary fits
    the model's embedding rows."""
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise ConfigError(
            f"{key}.name_or_path",
            f"{folder} has no tokenizer (none of {', '.join(TOKENIZER_FILES)}); the corpus is tokenized with the "
            "model's own tokenizer: save it beside the model (tokenizer.save_pretrained(folder))",
        )
    try:
        size = len(transformers.AutoTokenizer.from_pretrained(str(folder)))
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"{key}.name_or_path", f"{folder}: its tokenizer does not load: {err}") from None
    if size > embedding_rows:
        raise ConfigError(
            f"{key}.name_or_path",
            f"{folder}: its tokenizer has {size:,} tokens but the model embeds only {embedding_rows:,} "
            "(config.json vocab_size): a token id beyond the embedding would fail; save the tokenizer the model "
            "was trained with, or resize the embeddings (model.resize_token_embeddings(len(tokenizer)))",
        )
