"""Model selection while training: which evaluation picks best/, and when to stop early.

With a validation split (`config.data.val_videos` or `val_fraction`;
`jaxsvr.inputs.validation`), every evaluation scores the validation split and the test
split, and best/ is the state with the best *validation* `config.checkpoint.best_metric`
(ties keep the earlier state). The test metrics of that evaluation are saved with it
(best/'s metrics file, `test/<key>`), so a resumed run still reports them. The run's
metrics.json then holds:

- the final state's test metrics (top level, as without a validation split),
- `val`: the final state's validation metrics,
- `selected`: {"step", "val_<metric>", "test": the selected state's test metrics},
- `early_stop_step` when training stopped early.

`config.train.early_stop_evals` = N > 0 stops training at the first evaluation N
evaluations after the best one (needs a validation split: stopping on the test split
would select on it). The stop is a pure function of the step and best/'s step, so a rerun
of a stopped run resumes into the same stop instead of training on.

Without a validation split, best/ is picked on the test split's metric (logged so): use
it to look at a run, never to report a model chosen on test.
"""

from __future__ import annotations

import logging
from typing import Any

from jaxsvr.checkpoints.manager import Checkpointer


class Selection:
    """Args:
    ckpt: the run's checkpointer (after its restore: best/'s step and record).
    metric: `config.checkpoint.best_metric`, which picks best/.
    early_stop_evals: `config.train.early_stop_evals` (0: never stop early).
    eval_every: steps between evaluations.
    has_val: whether the run has a validation split.
    """

    def __init__(
        self,
        ckpt: Checkpointer,
        *,
        metric: str,
        early_stop_evals: int,
        eval_every: int,
        has_val: bool,
    ):
        self.ckpt, self.has_val = ckpt, has_val
        self.metric = metric
        self.patience = early_stop_evals
        self.eval_every = eval_every
        self.stop_step: int | None = None
        self.final_val: dict | None = None
        if self.metric and not has_val:
            logging.info(
                "checkpoint: best/ is picked by the test split's %s (no validation split: "
                "config.data.val_fraction or val_videos carves one for model selection)",
                self.metric,
            )

    def see(self, step: int, state: Any, test: dict, val: dict | None) -> None:
        """One evaluation's metrics: best/ is saved if they beat the best so far."""
        if val is None:
            self.ckpt.save_best(step, state, test)
            return
        self.final_val = val
        extra = {f"test/{k}": v for k, v in test.items() if k != "step"}
        self.ckpt.save_best(step, state, val, extra=extra)

    def seen_again(self, val: dict | None) -> None:
        """The validation metrics of a finished run's final state, evaluated again on a
        rerun: reported as `val`; best/ was decided when that state was first evaluated."""
        self.final_val = val

    def stopped(self, step: int) -> bool:
        """Whether training stops at `step`: an evaluation `patience` evaluations after
        the best one."""
        best = self.ckpt.best_step
        if not self.patience or best is None or step % self.eval_every:
            return False
        if (step - best) // self.eval_every < self.patience:
            return False
        if self.stop_step is None:
            logging.info(
                "early stop at step %d: validation %s has not improved for %d evaluations "
                "(best at step %d)",
                step,
                self.metric,
                self.patience,
                best,
            )
        self.stop_step = step
        return True

    def report(self) -> dict:
        """The metrics.json entries of the selection (module docstring)."""
        out: dict[str, Any] = {}
        if self.final_val is not None:
            out["val"] = {k: v for k, v in self.final_val.items() if k != "step"}
        record = self.ckpt.best_record
        if self.has_val and self.ckpt.best_step is not None and self.metric in record:
            test = {k.removeprefix("test/"): v for k, v in record.items() if k.startswith("test/")}
            out["selected"] = {
                "step": self.ckpt.best_step,
                f"val_{self.metric}": record[self.metric],
                "test": test,
            }
            logging.info(
                "selected: step %d by validation %s %.4f; its test nDCG %s, mAP %s",
                self.ckpt.best_step,
                self.metric,
                record[self.metric],
                _fmt(test.get("ndcg_avg")),
                _fmt(test.get("map_avg")),
            )
        if self.stop_step is not None:
            out["early_stop_step"] = self.stop_step
        return out


def _fmt(value) -> str:
    return "n/a" if value is None else f"{value:.4f}"
