"""The experiments of Tamkin et al. 2020 as cells: which layers are re-initialised, in which order the pretrained
layers run, and the two variants (keep layer norm, a larger learning rate for re-initialised layers).

A *spec* says what is done to the pretrained model before finetuning; a *condition* is one point of an
experiment (``incremental``, k=3) and names the spec it uses. Different experiments often need the same spec
(incremental k=N-3 re-initialises the same layers as "preserve the first block of 3"), so each spec is finetuned
once and its scores are shared by every condition that names it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

EXPERIMENTS = ("incremental", "localized", "single", "permutation", "probing", "keep_layernorm", "reinit_lr")
# Experiments whose conditions are finetuning runs (probing trains a linear classifier on frozen features instead).
FINETUNED = tuple(e for e in EXPERIMENTS if e != "probing")


@dataclass(frozen=True)
class Spec:
    """What happens to the pretrained model before finetuning. Layer indices are 0-based."""

    reinit: tuple[int, ...] = ()  # layers re-initialised
    order: tuple[int, ...] | None = None  # layer i of the new model is pretrained layer order[i]; None = as trained
    keep_layernorm: bool = False  # re-initialised layers keep their pretrained layer-norm parameters
    reinit_lr_multiplier: float = 1.0  # learning rate of re-initialised tensors, relative to transfer.lr

    @property
    def id(self) -> str:
        """A file-name-safe id, unique per spec: 'reinit-3.4.5', 'original', 'order-2.0.1', '...-keepln', '...-lr5'."""
        parts = []
        if self.order is not None:
            parts.append("order-" + ".".join(map(str, self.order)))
        if self.reinit:
            parts.append("reinit-" + ".".join(map(str, self.reinit)))
        if not parts:
            parts.append("original")
        if self.keep_layernorm:
            parts.append("keepln")
        if self.reinit_lr_multiplier != 1.0:
            parts.append(f"lr{self.reinit_lr_multiplier:g}")
        return "-".join(parts)

    def as_dict(self) -> dict:
        return {
            "reinit": list(self.reinit),
            "order": None if self.order is None else list(self.order),
            "keep_layernorm": self.keep_layernorm,
            "reinit_lr_multiplier": self.reinit_lr_multiplier,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Spec":
        return cls(
            tuple(d["reinit"]),
            None if d["order"] is None else tuple(d["order"]),
            bool(d["keep_layernorm"]),
            float(d["reinit_lr_multiplier"]),
        )


@dataclass(frozen=True)
class Condition:
    """One point of one experiment. ``x`` is what its plot puts on the x axis (k, block start, layer, ...)."""

    experiment: str
    label: str
    x: int
    spec: Spec = field(default_factory=Spec)


def incremental(n: int) -> list[Condition]:
    """Re-initialise every layer from k on, k = 0 .. N (k = N re-initialises nothing: the original model)."""
    return [Condition("incremental", f"k={k}", k, Spec(tuple(range(k, n)))) for k in range(n + 1)]


def localized(n: int, block: int) -> list[Condition]:
    """Every block of ``block`` consecutive layers, either re-initialised alone, or preserved with every other
    layer re-initialised (sliding blocks: 0-2, 1-3, ...)."""
    out = []
    for start in range(n - block + 1):
        inside = tuple(range(start, start + block))
        outside = tuple(i for i in range(n) if i not in inside)
        label = f"{start}-{start + block - 1}"
        out.append(Condition("localized_reinit", label, start, Spec(inside)))
        out.append(Condition("localized_preserve", label, start, Spec(outside)))
    return out


def single(n: int) -> list[Condition]:
    return [Condition("single", f"L{i}", i, Spec((i,))) for i in range(n)]


def permutations(n: int, count: int, seed: int) -> list[Condition]:
    """``count`` distinct random orders of the pretrained layers, none the identity, with no re-initialisation;
    plus the original model and the fully re-initialised one for comparison (Figure 4)."""
    if n < 2:
        raise ValueError("permuting layers needs at least 2 layers")
    possible = 1
    for i in range(2, n + 1):
        possible *= i
    if count > possible - 1:
        raise ValueError(f"{count} distinct non-identity orders of {n} layers do not exist (at most {possible - 1})")
    rng = random.Random(seed)
    identity, orders = tuple(range(n)), []
    while len(orders) < count:
        order = tuple(rng.sample(range(n), n))
        if order != identity and order not in orders:
            orders.append(order)
    out = [Condition("permutation", f"order {i}", i + 1, Spec(order=o)) for i, o in enumerate(orders)]
    out.append(Condition("permutation", "original", 0, Spec()))
    out.append(Condition("permutation", "all re-initialised", -1, Spec(tuple(range(n)))))
    return out


def variants(n: int, kind: str, ks: list[int] | None, multiplier: float) -> list[Condition]:
    """The incremental experiment with a variant: keep each re-initialised layer's layer norm
    (``keep_layernorm``), or train re-initialised tensors at ``multiplier`` x the learning rate (``reinit_lr``).
    ``ks`` picks the values of k (default 0 .. N-1; k = N re-initialises nothing, so no variant differs there)."""
    ks = list(range(n)) if ks is None else ks
    if kind == "keep_layernorm":
        return [Condition(kind, f"k={k}", k, Spec(tuple(range(k, n)), keep_layernorm=True)) for k in ks]
    if kind == "reinit_lr":
        return [Condition(kind, f"k={k}", k, Spec(tuple(range(k, n)), reinit_lr_multiplier=multiplier)) for k in ks]
    raise ValueError(f"unknown variant {kind!r}")


def conditions(n: int, transfer_cfg: dict) -> list[Condition]:
    """Every finetuning condition the config asks for, in a stable order."""
    chosen = transfer_cfg["experiments"]
    ks = transfer_cfg["variant_ks"]
    out: list[Condition] = []
    if "incremental" in chosen:
        out += incremental(n)
    if "localized" in chosen:
        out += localized(n, transfer_cfg["block_size"])
    if "single" in chosen:
        out += single(n)
    if "permutation" in chosen:
        out += permutations(n, transfer_cfg["permutations"], transfer_cfg["permutation_seed"])
    for kind in ("keep_layernorm", "reinit_lr"):
        if kind in chosen:
            out += variants(n, kind, None if ks == "all" else ks, transfer_cfg["reinit_lr_multiplier"])
    return out


def specs(conds: list[Condition]) -> dict[str, Spec]:
    """The distinct specs of some conditions, by id (each is finetuned once per task, size and trial)."""
    return {c.spec.id: c.spec for c in conds}
