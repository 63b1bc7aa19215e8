"""Resumable training state: trainable weights, optimizer, RNG states, data position and the curve so far.

Written atomically (temporary file + rename), so a job killed at any moment leaves either the previous checkpoint
or the new one, never half of one. Read back with ``torch.load(weights_only=True)``: tensors and plain Python
values only, nothing is unpickled. A checkpoint records what it belongs to (settings and trainable tensors); one
that does not match the run is ignored, never applied.
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


def _fingerprint(s, model) -> str:
    trainable = sorted(n for n, p in model.named_parameters() if p.requires_grad)
    settings = {f.name: getattr(s, f.name) for f in fields(s) if f.name not in ("checkpoint_path", "hardware")}
    blob = json.dumps({"settings": settings, "trainable": trainable}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def save(s, model, optimizer, batch_generator, pos, result, elapsed: float) -> None:
    state = {
        "fingerprint": _fingerprint(s, model),
        "params": {n: p.detach().cpu().clone() for n, p in model.named_parameters() if p.requires_grad},
        "optimizer": optimizer.state_dict(),
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "batch_rng": batch_generator.get_state(),
        "position": asdict(pos),
        "curve": [asdict(p) for p in result.curve],
        "eval_s": result.eval_s,
        "elapsed": elapsed,
    }
    path = Path(s.checkpoint_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def restore(s, model, optimizer, batch_generator, pos, result) -> bool:
    """Load a matching checkpoint into the run's objects; False when there is none (or it does not match)."""
    if not s.checkpoint_path or not Path(s.checkpoint_path).is_file():
        return False
    try:
        state = torch.load(s.checkpoint_path, weights_only=True)
    except Exception as err:  # a truncated or foreign file: start over rather than fail
        log.warning("ignoring unreadable checkpoint %s: %s", s.checkpoint_path, err)
        return False
    if state.get("fingerprint") != _fingerprint(s, model):
        log.warning("ignoring checkpoint %s: it belongs to other settings", s.checkpoint_path)
        return False
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
