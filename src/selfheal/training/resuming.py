"""Resuming a run (``loop.run``) from a saved state of the same settings, with the numbers of an uninterrupted run.

One way in (``Saved.resume``: the first saved state that matches, read by ``checkpoints.restore``) from the two
files a run writes: the *checkpoint* of a killed job (``s.checkpoint_path``, every ``s.checkpoint_every_steps``
steps; at evaluations only when the run locates crossings, where no kept weights are held), and the *extension
point* (``s.extension_path``: the state of its last regular evaluation, written at its end, for a run with a larger
budget to continue from; not under a cosine schedule, whose horizon is the budget). Both are needed: a killed job
resumes mid-interval and under a cosine schedule (pretraining), where no extension point applies; a raised budget
continues a finished cell, whose checkpoint is gone.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from selfheal.training import checkpoints

log = logging.getLogger("selfheal")


class Saved:
    """The saved states of one ``loop._Run`` (``run``): reading them at its start, writing them as it goes.
    ``at_evaluations_only``: checkpoints only at evaluations (a run that locates crossings)."""

    def __init__(self, run, at_evaluations_only: bool):
        s = run.s
        self.run, self.at_evaluations_only = run, at_evaluations_only
        self.extending = bool(s.extension_path) and run.optimizer is not None and not s.cosine
        self.extension_point = None  # the state of the last regular evaluation (``checkpoints.state``), on the CPU
        self.saved_at = 0  # the step of the last checkpoint
        self.extra = run.cache.depth if run.cache is not None else None  # an extension point is of this prefix cache

    def _restore(self, path, any_budget: bool) -> bool:
        run = self.run
        return checkpoints.restore(
            run.s,
            run.model,
            run.optimizer,
            run.batch_generator,
            run.pos,
            run.result,
            path=path,
            any_budget=any_budget,
            extra=self.extra if any_budget else None,
            keeper=run.keeper,
        )

    def resume(self) -> bool:
        """Load the run's checkpoint, or else its extension point, whichever matches first; True when resumed."""
        run, s = self.run, self.run.s
        sources = [(s.checkpoint_path, False)] if run.optimizer is not None else []
        sources += [(s.extension_path, True)] if self.extending else []
        path, any_budget = next(((p, a) for p, a in sources if p and self._restore(p, a)), (None, False))
        if path is not None:
            if any_budget:
                log.info(
                    "%s continues a run with a smaller budget from its last regular evaluation (%d examples)",
                    run.label,
                    run.pos.examples,
                )
                self.at_regular_evaluation(False)
            run.t0 -= run.result.resumed_elapsed  # the wall clock continues where the earlier run left it
            log.info("%s resumed from %s at step %d (%d examples)", run.label, path, run.pos.steps, run.pos.examples)
        self.saved_at = run.pos.steps
        return path is not None

    def at_regular_evaluation(self, stopped: bool) -> None:
        """After an evaluation that a run with a larger budget makes too, the next one planned: when extending and
        not stopped, the state a longer run continues from (the same as that run's state here)."""
        run = self.run
        if self.extending and not stopped:
            self.extension_point = checkpoints.state(
                run.s,
                run.model,
                run.optimizer,
                run.batch_generator,
                run.pos,
                run.result,
                time.perf_counter() - run.t0,
                any_budget=True,
                extra=self.extra,
                keeper=run.keeper,
            )

    def after_step(self, at_evaluation: bool) -> None:
        """Write the checkpoint when due (``checkpoint_every_steps`` since the last one)."""
        run, s = self.run, self.run.s
        due = (
            s.checkpoint_every_steps
            and run.pos.steps - self.saved_at >= s.checkpoint_every_steps
            and (at_evaluation or not self.at_evaluations_only)
        )
        if s.checkpoint_path and due:
            checkpoints.save(
                s,
                run.model,
                run.optimizer,
                run.batch_generator,
                run.pos,
                run.result,
                time.perf_counter() - run.t0,
                keeper=run.keeper,
            )
            self.saved_at = run.pos.steps

    def at_end(self) -> None:
        """The extension point written to ``s.extension_path`` (removed once the run settled; one left by an earlier
        run of the same settings stays where this run has none, e.g. resumed after its last regular evaluation: it
        is a valid, earlier point of the same run)."""
        if not self.extending:
            return
        path = Path(self.run.s.extension_path)
        if self.run.result.settled_at is not None:
            path.unlink(missing_ok=True)
        elif self.extension_point is not None:
            checkpoints.write(self.extension_point, path)
