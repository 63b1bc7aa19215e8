"""Resumable training state: trainable weights, optimizer, RNG states, data position and the curve so far.

Written atomically (temporary file + rename), so a job killed at any moment leaves either the previous checkpoint
or the new one, never half of one. Read back with ``torch.load(weights_only=True)``: tensors and plain Python
values only, nothing is unpickled. A checkpoint records what it belongs to (settings and trainable tensors); one
that does not match the run is ignored, never applied.

An *extension point* (``state`` with ``any_budget``, kept by the loop at its last regular evaluation) is the same
state under a fingerprint that leaves out the run's length (``max_examples``): a run with a larger budget and
otherwise the same settings continues from it (``restore`` with ``any_budget``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import asdict, fields
from pathlib import Path

import torch

from selfheal.training.state import CurvePoint

log = logging.getLogger("selfheal")


# Settings that do not change the numbers of a run up to a given example: left out of an extension point's
# fingerprint (with the checkpoint path and hardware, left out of every fingerprint).
RUN_LENGTH = ("max_examples", "checkpoint_every_steps", "extension_path")


def _fingerprint(s, model, any_budget: bool = False, extra=None) -> str:
    return fingerprint(s, sorted(n for n, p in model.named_parameters() if p.requires_grad), any_budget, extra)


def fingerprint(s, trainable: list[str], any_budget: bool = False, extra=None) -> str:
    """What a run's saved state belongs to: its settings (less its length where ``any_budget``), its trainable
    tensors (sorted names) and ``extra``."""
    skip = ("checkpoint_path", "hardware", *(RUN_LENGTH if any_budget else ()))
    settings = {f.name: getattr(s, f.name) for f in fields(s) if f.name not in skip}
    blob = json.dumps(
        {"settings": settings, "trainable": trainable, **({"extra": extra} if any_budget else {})},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def _on_cpu(value):
    """A copy of a state dict's tensors on the CPU (nested dicts and lists), detached from the live ones."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {k: _on_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_on_cpu(v) for v in value)
    return value


def state(
    s, model, optimizer, batch_generator, pos, result, elapsed: float, any_budget: bool = False, extra=None, keeper=None
) -> dict:
    """The full training state as a checkpoint (a copy on the CPU: training may go on); ``any_budget``: as an
    extension point, whose fingerprint leaves out the run's length and adds ``extra`` (e.g. a prefix cache's depth).
    ``keeper``: the run's ``patience.Keeper``, whose state (the best checkpoint's weights) is kept too."""
    return {
        "keeper": keeper.checkpoint() if keeper is not None else None,
        "fingerprint": _fingerprint(s, model, any_budget, extra),
        "params": {n: p.detach().cpu().clone() for n, p in model.named_parameters() if p.requires_grad},
        "optimizer": _on_cpu(optimizer.state_dict()),
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "batch_rng": batch_generator.get_state(),
        "position": asdict(pos),
        "curve": [asdict(p) for p in result.curve],
        "eval_s": result.eval_s,
        "elapsed": elapsed,
    }


def write(state_: dict, path) -> None:
    """Write a ``state`` atomically (temporary file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(state_, tmp)
    os.replace(tmp, path)


def save(s, model, optimizer, batch_generator, pos, result, elapsed: float, keeper=None) -> None:
    write(state(s, model, optimizer, batch_generator, pos, result, elapsed, keeper=keeper), s.checkpoint_path)


def restore(
    s, model, optimizer, batch_generator, pos, result, path=None, any_budget: bool = False, extra=None, keeper=None
) -> bool:
    """Load a matching checkpoint (``s.checkpoint_path``, or ``path``) into the run's objects; False when there is
    none (or it does not match). ``any_budget``: an extension point (``state``), applied only where it lies within
    this run's budget. ``keeper``: the run's ``patience.Keeper``; a checkpoint without its state (or with another
    rule's) does not match."""
    path = path or s.checkpoint_path
    if not path or not Path(path).is_file():
        return False
    try:
        state = torch.load(path, weights_only=True)
    except Exception as err:  # a truncated or foreign file: start over rather than fail
        log.warning("ignoring unreadable checkpoint %s: %s", path, err)
        return False
    if state.get("fingerprint") != _fingerprint(s, model, any_budget, extra):
        log.warning("ignoring checkpoint %s: it belongs to other settings", path)
        return False
    if any_budget and state["position"]["examples"] > s.max_examples:
        log.info("not continuing from %s: it lies beyond this run's budget", path)
        return False
    if (keeper is not None) != (state.get("keeper") is not None) or (keeper and not keeper.matches(state["keeper"])):
        log.warning("ignoring checkpoint %s: it belongs to another stopping rule", path)
        return False
    if keeper is not None:
        keeper.restore(state["keeper"])
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, value in state["params"].items():
            params[name].copy_(value)
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["torch_rng"])
    if state["cuda_rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    batch_generator.set_state(state["batch_rng"])
    for key, value in state["position"].items():
        setattr(pos, key, value)
    known = {f.name for f in fields(CurvePoint)}  # a checkpoint of older code may carry retired fields
    result.curve = [CurvePoint(**{k: v for k, v in p.items() if k in known}) for p in state["curve"]]
    result.eval_s = state["eval_s"]
    result.resumed_elapsed = state["elapsed"]
    return True


def remove(s) -> None:
    """Drop the checkpoint once the job's outputs are written."""
    if s.checkpoint_path and Path(s.checkpoint_path).exists():
        Path(s.checkpoint_path).unlink()
