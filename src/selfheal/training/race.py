"""Racing learning rates: the pure rules of a race (no training here; ``heal.retrain`` runs the copies of a cell).

A race trains copies of one start state, one per learning rate, one after another, on the same data order, each
with its own optimizer; each copy is a run that stops by its own rules (every level crossed, stalled, the budget,
divergence) or by the race's dropping rule. A copy's crossing of a level (a threshold eps of the recovery) is the
interval (lo, hi] its run located (``Crossing``); the copy that *wins* a level crossed it with the smallest hi
(ties: the smaller lr), and the race's cost at that level is the winner's crossing.

**The dropping rule** (``can_stop``): at a regular evaluation at x examples, a copy stops when every level is either
crossed by it already or crossed by a copy raced before it at hi <= x.

**Exactness**: the race's winner and crossing at every level are those of the fastest of independent runs, one per
lr, each to its own stops. A copy starts from the same state, data order and random state as its independent run;
its own stops read only its own curve, and the rule only cuts it short, so up to where it stops it *is* that run,
the crossings it has located included. Take a level and the lr whose independent run crosses it first, at hi*. Its
copy misses that crossing only if the rule stops it at a regular evaluation x before it has crossed the level. Its
crossing then lies after x (every evaluation up to x is above the level): hi* > x. The rule needs, for that level,
another copy's crossing at hi <= x < hi*, a crossing that copy's independent run makes too: a faster run than the
fastest, a contradiction. So the copy reaches its crossing, and so does every copy tied at hi* (hi <= x < hi* again).
The race's crossings are real ones, so none beats hi*: the race's minimum is the independent runs' minimum, and its
winner (the smaller lr on a tie) theirs. A level no copy crosses makes the rule fail everywhere, so every copy runs to
its own stops, as its independent run does.

**The edges** (``beyond``, ``next_lr``): where some level's only winner is the highest lr raced (the lowest), the race
goes on with that lr x ``FACTOR`` (÷ ``FACTOR``) against the same crossings, at most ``cap`` times per side, and not
past a copy that diverged (it bounds its side). Pretraining's race extends by the same rule, its one winner the copy
with the lowest validation loss. A level whose only winner is still at an edge is flagged (``at_edge``): the
cap was hit or the edge diverged, and a faster lr may lie beyond it.

Which copy runs first decides how much the rule cuts (the others stop at the first one's crossings): ``order``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

FACTOR = 3.0  # the grid's step, and the step of each extension beyond an edge
ORDERS = ("descending", "ascending", "middle_out")
# the order a race's grid runs in (``order``): the middle first. Measured by benchmarks/race.py on real cells, it
# trains about as few examples as the largest first where the budget is short and fewer where it is long (the
# largest lr, run first, can take the whole budget without reaching eps_min); the smallest first trains the most
ORDER = "middle_out"
STOPS = ("met", "dropped", "stalled", "budget", "diverged")  # why a copy stopped (race.parquet's ``stop``)


@dataclass(frozen=True)
class Crossing:
    """Where a copy first reached a level: in (lo, hi] examples (lo = hi = 0 when already there at the start)."""

    lo: int
    hi: int


@dataclass(frozen=True)
class Copy:
    """One copy of a race as its rules read it: its lr, its crossing of each level it reached, whether it diverged
    and its final validation loss."""

    lr: float
    crossings: Mapping[float, Crossing] = field(default_factory=dict)
    diverged: bool = False
    final_loss: float = math.nan


def bounds(copies: Iterable[Copy]) -> dict[float, int]:
    """Per level crossed by any of ``copies``, the smallest upper bound hi of its crossings."""
    out: dict[float, int] = {}
    for c in copies:
        for level, x in c.crossings.items():
            out[level] = min(out.get(level, x.hi), x.hi)
    return out


def can_stop(examples: int, crossed: Iterable[float], known: Mapping[float, int], levels: Sequence[float]) -> bool:
    """The dropping rule at a regular evaluation at ``examples``: every one of ``levels`` is ``crossed`` by this copy
    already, or crossed by a copy raced before it at an upper bound (``known``, from ``bounds``) <= ``examples``."""
    crossed = set(crossed)
    return all(level in crossed or known.get(level, math.inf) <= examples for level in levels)


def tied(copies: Sequence[Copy], level: float) -> list[Copy]:
    """The copies that crossed ``level`` at its smallest upper bound, by lr."""
    best = bounds(copies).get(level)
    return sorted((c for c in copies if level in c.crossings and c.crossings[level].hi == best), key=lambda c: c.lr)


def winner(copies: Sequence[Copy], level: float) -> Copy | None:
    """The copy that crossed ``level`` first (the smallest hi; ties: the smaller lr), None when no copy did."""
    best = tied(copies, level)
    return best[0] if best else None


def winners(copies: Sequence[Copy], levels: Sequence[float]) -> dict[float, Copy | None]:
    return {level: winner(copies, level) for level in levels}


def _sole_winner(copies: Sequence[Copy], level: float) -> Copy | None:
    best = tied(copies, level)
    return best[0] if len(best) == 1 else None


def at_edge(copies: Sequence[Copy], levels: Sequence[float]) -> dict[float, bool | None]:
    """Per level: True where its only winner is the lowest or the highest lr raced, False where it has another
    winner, None where no copy crossed it (and everywhere when a single lr ran: no race)."""
    lrs = [c.lr for c in copies]
    out: dict[float, bool | None] = {}
    if len(set(lrs)) < 2:
        return dict.fromkeys(levels)
    for level in levels:
        sole = _sole_winner(copies, level)
        out[level] = None if winner(copies, level) is None else sole is not None and sole.lr in (min(lrs), max(lrs))
    return out


def beyond(
    raced: Sequence[float], winning: Iterable[float], grid: Sequence[float], cap: int, bounded=()
) -> float | None:
    """The edge rule, for any race (pretraining's and healing's): where a ``winning`` lr is the highest of ``raced``
    (the grid and its extensions so far), that lr x FACTOR, while fewer than ``cap`` lrs of ``raced`` lie above
    ``grid`` and it is not ``bounded`` (a copy that diverged); else the same below (÷ FACTOR); else None."""
    winning, top, bottom = set(winning), max(raced), min(raced)
    for edge, step, spent in (
        (top, FACTOR, sum(lr > max(grid) for lr in raced)),
        (bottom, 1 / FACTOR, sum(lr < min(grid) for lr in raced)),
    ):
        if edge in winning and edge not in bounded and spent < cap:
            return float(f"{edge * step:.12g}")
    return None


def is_edge(raced: Sequence[float], lr: float) -> bool:
    """``lr`` is the lowest or the highest of the lrs ``raced``."""
    return lr in (min(raced), max(raced))


def next_lr(copies: Sequence[Copy], levels: Sequence[float], grid: Sequence[float], cap: int) -> float | None:
    """The next lr a healing race extends to (``beyond``): the levels' only winners at an edge of ``grid`` plus
    the extensions raced so far, a diverged edge copy bounding its side."""
    sole = {s.lr for s in (_sole_winner(copies, level) for level in levels) if s is not None}
    lrs = [c.lr for c in copies]
    return beyond(lrs, sole, grid, cap, bounded={c.lr for c in copies if c.diverged})


def primary(copies: Sequence[Copy], levels: Sequence[float]) -> Copy:
    """The copy a race reports as its own run: the winner of the smallest level any copy reached; where none did, the
    lowest final loss of the copies that did not diverge (all of them where every one did); ties: the smaller lr.
    It is the minimum of a key of each copy alone (``primary_key``), so adding a copy keeps it or makes it that copy.
    """
    return min(copies, key=lambda c: primary_key(c, levels))


def primary_key(c: Copy, levels: Sequence[float]) -> tuple:
    reached = sorted(level for level in levels if level in c.crossings)
    if reached:
        return (reached[0], 0, c.crossings[reached[0]].hi, c.lr)
    return (math.inf, int(c.diverged), c.final_loss if math.isfinite(c.final_loss) else math.inf, c.lr)


def simulate(
    evaluations: Mapping[float, Sequence[int]],
    crossings: Mapping[float, Mapping[float, Crossing]],
    levels: Sequence[float],
    run_order: Sequence[float],
) -> dict[float, int]:
    """Where each copy of a race in ``run_order`` stops, from the independent runs of its lrs: ``evaluations[lr]``
    the regular evaluations of that run (ascending, its last where it stopped on its own), ``crossings[lr]`` its
    crossings. A copy stops at its first evaluation where ``can_stop`` holds against the copies before it (their
    crossings up to where they stopped), crossed meaning hi <= that evaluation; else where its run stopped."""
    stopped: dict[float, int] = {}
    raced: list[Copy] = []
    for lr in run_order:
        known = bounds(raced)
        xs = evaluations[lr]
        at = next(
            (x for x in xs if can_stop(x, [k for k, c in crossings[lr].items() if c.hi <= x], known, levels)), xs[-1]
        )
        stopped[lr] = at
        raced.append(Copy(lr, {k: c for k, c in crossings[lr].items() if c.hi <= at}))
    return stopped


def order(lrs: Sequence[float], how: str = ORDER) -> list[float]:
    """The order a race runs its grid in: ``descending`` (the largest lr first), ``ascending``, or ``middle_out``
    (the upper middle first, then alternately the next below and above)."""
    grid = sorted(set(lrs))
    if how == "descending":
        return grid[::-1]
    if how == "ascending":
        return grid
    if how == "middle_out":
        mid = len(grid) // 2
        out = [grid[mid]]
        for k in range(1, len(grid)):
            for i in (mid - k, mid + k):
                if 0 <= i < len(grid):
                    out.append(grid[i])
        return out
    raise ValueError(f"unknown race order {how!r}; expected one of {ORDERS}")
