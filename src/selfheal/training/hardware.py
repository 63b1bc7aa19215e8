"""Where and how training runs: device, bf16 autocast, optional torch.compile; on a GPU always TF32 matmuls, and
AdamW always fused (no config key turns them off).

Defaults suit both a CPU laptop and a GPU node: ``device: auto`` takes CUDA when present; ``precision: fp32``
keeps CPU runs bit-reproducible, ``bf16`` autocasts the training forward (weights and optimizer state stay fp32)
with attention kept in fp32 (``FP32_ATTENTION``: on a CPU the flash-SDPA backward in bf16 is several times slower
than in fp32, and attention's softmax is where bf16 loses most), and every evaluation runs in fp32
(``training.evaluation``). Attention uses PyTorch SDPA (the models are built and loaded with
``attn_implementation="sdpa"``).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import ctypes.util
import os
import sys
from dataclasses import dataclass

import torch
from torch import nn


class DeviceUnavailable(RuntimeError):
    """``hardware.device: cuda`` in a job that sees no GPU. Raised by the first job that needs the device, not at
    config time: the workflow is often planned on a login node without one."""


@dataclass(frozen=True)
class Hardware:
    device: str = "auto"  # auto | cpu | cuda
    precision: str = "fp32"  # fp32 | bf16
    compile: str | None = None  # a torch.compile backend for the trainable layers ("inductor", "eager"), or None
    # how many copies of an lr race train in one pass (``training.lockstep``): a number, or auto (one on a CPU,
    # as many as memory allows on a GPU)
    copies_per_pass: int | str = "auto"

    @classmethod
    def from_config(cls, cfg: dict | None) -> "Hardware":
        return cls(**(cfg or {}))

    def torch_device(self) -> torch.device:
        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        if self.device == "cuda" and not torch.cuda.is_available():
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            raise DeviceUnavailable(
                "config key 'hardware.device': 'cuda', but this job sees no CUDA device "
                f"(torch {torch.__version__}, built for CUDA {torch.version.cuda or 'none'}; CUDA_VISIBLE_DEVICES="
                f"{visible if visible is not None else 'unset'}). Run the training jobs on a GPU node (e.g. with "
                "--profile profiles/slurm), or set hardware.device: auto (CUDA when visible, else CPU) or cpu."
            )
        return torch.device(self.device)

    def prepare(self, model: nn.Module) -> torch.device:
        """Move the model to the device and set the matmul precision; returns the device."""
        device = self.torch_device()
        if device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = True  # TF32 tensor-core matmuls on Ampere+ GPUs
            torch.backends.cudnn.allow_tf32 = True
        model.to(device)
        self.fp32_attention(model)
        return device

    def fp32_attention(self, model: nn.Module) -> None:
        """Under bf16, the model's attention (a transformers model's) runs in fp32 inside the autocast region."""
        if self.precision == "bf16" and hasattr(model, "set_attn_implementation"):
            _register_fp32_attention()
            model.set_attn_implementation(FP32_ATTENTION)

    def autocast(self, device: torch.device):
        if self.precision == "bf16":
            return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def compile_modules(self, modules: list[nn.Module]) -> None:
        if self.compile:
            for module in modules:
                module.compile(backend=self.compile)

    def adamw(self, groups: list[dict], lr: float, betas=(0.9, 0.95), **defaults) -> torch.optim.Optimizer:
        """AdamW over ``groups``, fused; ``defaults`` (e.g. weight_decay) for groups without."""
        return torch.optim.AdamW(groups, lr=lr, betas=betas, **defaults, fused=True)


# glibc's mallopt parameters (malloc.h) and the values ``keep_freed_memory`` sets
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
HEAP_SETTINGS = {M_MMAP_THRESHOLD: 32 * 2**20, M_TRIM_THRESHOLD: 2**30, M_TOP_PAD: 64 * 2**20}


@functools.cache  # once per process: jobs seed every cell through setup.seed_everything
def keep_freed_memory() -> bool:
    """Let glibc's malloc keep freed memory for reuse instead of handing it back to the kernel after every step.

    A CPU training step allocates and frees tensors of several MB (the logits, their softmax and its gradient), which
    glibc by default serves with a fresh mmap or trims once freed, so every step pays new page faults. Blocks up to
    32 MB now come from the heap, trimmed only beyond 1 GB free (docs/performance.md gives the gain). Numbers are
    unchanged (it only moves where memory comes from); the price is a resident size that stays at its peak. A no-op
    (False) off glibc."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and other C libraries have no mallopt
        return False
    applied = [mallopt(param, value) == 1 for param, value in HEAP_SETTINGS.items()]  # every one, even after a refusal
    return all(applied)


def to_device(batch: dict, device: torch.device) -> dict:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


FP32_ATTENTION = "sdpa_fp32"  # transformers' SDPA attention with its inputs in fp32 and autocast off inside it


@functools.cache
def _register_fp32_attention() -> None:
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    def sdpa_fp32(module, query, key, value, attention_mask, **kwargs):
        with torch.autocast(device_type=query.device.type, enabled=False):
            mask = (
                attention_mask
                if attention_mask is None or attention_mask.dtype == torch.bool
                else attention_mask.float()
            )
            return sdpa_attention_forward(module, query.float(), key.float(), value.float(), mask, **kwargs)

    AttentionInterface.register(FP32_ATTENTION, sdpa_fp32)
