"""Saving and loading models: safetensors only (a pickled checkpoint is refused), never ``trust_remote_code``."""

from __future__ import annotations

from pathlib import Path

from selfheal.models import families
from selfheal.models.families.base import nn

# The transformers Auto class that reloads a saved model of each objective.
AUTO_CLASSES = {
    "causal_lm": "AutoModelForCausalLM",
    "masked_lm": "AutoModelForMaskedLM",
    "denoising": "AutoModelForSeq2SeqLM",
}


def save(model: nn.Module, out_dir: str | Path) -> None:
    model.save_pretrained(str(out_dir))


def has_safetensors(model_dir: str | Path) -> bool:
    model_dir = Path(model_dir)
    return (model_dir / "model.safetensors").is_file() or any(model_dir.glob("model-*.safetensors"))


def check_safetensors(model_dir: str | Path) -> None:
    """Refuse, with a clear error, weights that are missing, pickled, not safetensors, or truncated."""
    from safetensors import safe_open

    model_dir = Path(model_dir)
    if not has_safetensors(model_dir):
        raise FileNotFoundError(f"{model_dir}: no safetensors weights (pickled checkpoints are refused)")
    for path in sorted(model_dir.glob("model*.safetensors")):
        try:
            with safe_open(str(path), "pt"):  # opening validates the header against the file's length
                pass
        except Exception as err:
            raise ValueError(f"{path}: not a readable safetensors file (truncated or corrupt?): {err}") from err


def load(model_dir: str | Path, objective: str | None = None) -> nn.Module:
    """Load a saved model; only safetensors weights are accepted (a pickled checkpoint is refused)."""
    import transformers

    model_dir = Path(model_dir)
    check_safetensors(model_dir)
    if objective is None:
        objective = families.for_model_type(_model_type(model_dir)).objective
    auto = getattr(transformers, AUTO_CLASSES[objective])
    model = auto.from_pretrained(str(model_dir), use_safetensors=True, trust_remote_code=False)
    return model.eval()


def _model_type(model_dir: Path) -> str:
    import json

    return json.loads((model_dir / "config.json").read_text())["model_type"]
