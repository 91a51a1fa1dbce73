"""`train_and_evaluate(config, workdir)`: the trainer every jaxsvr model uses.

1. Mesh (`jaxsvr.runtime.parallel`): every device on one `data` axis by default; the train state is
   replicated, batches are split over `data`. The first log lines say what runs, on which
   devices, and where the outputs go.
2. The stages up to the loop (`jaxsvr.train.pipeline.build`): annotations, relevance, the
   model's inputs of both splits, the model and its objective. Their log lines say where
   everything comes from.
3. State: params from `model.init` (word table optionally from a word-vector file), the optax
   optimiser (`jaxsvr.train.optim`), the step. Init is jitted with replicated out_shardings.
4. Restore (`jaxsvr.checkpoints.manager`): the newest usable checkpoint in WORKDIR/checkpoints if
   any (so rerunning a command resumes it; damaged ones are moved aside with a warning),
   else scratch.
5. Loop: host-side batches of the objective (`jaxsvr.objectives`: offline triplets or
   batch losses; a pure function of (seed, epoch, step): row indices plus margins or
   relevance matrices) are built by a background thread and handed over as sharded global
   arrays. With `train.gather = "device"` (default) the train features and text inputs
   live on the devices and the step gathers the rows; with "host" the thread gathers them
   (feature stores too large for device memory; `jaxsvr.inputs.model_inputs`). The
   train step (embeddings, every loss term, gradients, optimizer update) is one jitted
   program with the state donated.
   Metrics stay on device until a log step. Every `eval.every_epochs` epochs and at the
   end: test nDCG/mAP/R@K. Checkpoints every `checkpoint.every_steps` and at the
   end, plus the best by `checkpoint.best_metric`. On SIGTERM the step reached is
   checked, saved, and the run raises `preemption.Preempted` (`jaxsvr.train.preemption`:
   every process of a multi-process run stops at the same step).
6. Outputs (process 0, holding the lock `WORKDIR/.lock` from the restore on; everything
   before it is checks that write nothing): `config.json`, `vocab.json`, `metrics.jsonl` +
   TensorBoard events (`jaxsvr.train.metric_writers`), `metrics.json` with the final test
   metrics, and with `eval.export_similarity` the final `test_similarity.npy` and
   `test_relevance.npy`.
   Rerunning a finished run re-evaluates it and leaves metrics.jsonl and the training
   summary in metrics.json as they were.

Every program of the main thread (init, step, evaluation) is traced under
`config.matmul_precision` (`jaxsvr.runtime.precision`: JAX's own setting, TensorFloat-32 on recent
GPUs; "highest" for float32 everywhere; "bfloat16" for mixed precision, also on CPUs). The
prefetch thread multiplies nothing.

A non-finite loss, or a non-finite parameter or optimizer state after an update (the step
computes one on-device flag, `checkpoint.all_finite`, as the loss is computed before the
update and cannot vouch for it), stops the run with `TrainingDiverged` naming the step and
the last good checkpoint. Every log, evaluation and checkpoint step first checks the steps
since the last check, so no non-finite state is evaluated or saved, and a rerun with a saner
optimiser resumes from that checkpoint. A gradient that stays exactly zero while the loss
does not (a learning rate so large that every unit saturates, or a dead model) draws one
warning after `monitor.ZERO_GRAD_STEPS` such steps: such a run would otherwise end
quietly having learnt nothing.
"""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path
from typing import Any

import flax
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from jaxsvr.checkpoints.manager import Checkpointer, all_finite
from jaxsvr.errors import InputError
from jaxsvr.files import json_text
from jaxsvr.inputs import text
from jaxsvr.inputs.model_inputs import gather_device
from jaxsvr.runtime import parallel, precision
from jaxsvr.runtime.workdir import Workdir, write_text
from jaxsvr.train import batches, checks, optim, pipeline, preemption, warm_start
from jaxsvr.train import evaluation as train_evaluation
from jaxsvr.train.evaluation import evaluate_splits, write_export
from jaxsvr.train.metric_writers import MetricWriter
from jaxsvr.train.monitor import Timer, VanishedGradients
from jaxsvr.train.selection import Selection


class TrainingDiverged(RuntimeError):
    """The loss, or the train state after an update, became non-finite."""


@flax.struct.dataclass
class TrainState:
    step: jax.Array
    params: Any
    opt_state: Any


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str | Path) -> dict:
    """Trains `config.model` as `config` says and returns the final test metrics.

    Every config value and the workdir are checked before data is loaded, the data before
    anything is written: a run that fails a check (InputError) leaves the workdir as it
    found it. Process 0 then locks the workdir for the rest of the run (`jaxsvr.runtime.workdir`).
    """
    checks.check_train(config)
    with precision.scope(config.matmul_precision):
        with Workdir(workdir, lead=jax.process_index() == 0) as run_dir:
            return _train_and_evaluate(config, run_dir)


def _train_and_evaluate(config: ml_collections.ConfigDict, run_dir: Workdir) -> dict:
    lead = jax.process_index() == 0
    workdir = run_dir.path
    mesh = parallel.make_mesh(config.mesh.data)
    logging.info(
        "devices: %d %s (%s), %d on this process; process %d of %d; outputs in %s",
        mesh.size,
        jax.devices()[0].platform,
        jax.devices()[0].device_kind,
        jax.local_device_count(),
        jax.process_index(),
        jax.process_count(),
        workdir,
    )
    batch_size = config.train.batch_size
    parallel.check_batch_size(batch_size, mesh)

    run = pipeline.build(config)
    splits, model, objective = run.splits, run.model, run.objective
    steps_per_epoch = objective.steps_per_epoch(batch_size)
    total_steps = config.train.max_steps or config.train.num_epochs * steps_per_epoch
    tx = optim.build(config.optimizer, total_steps)
    logging.info(
        "model %s, loss %s on %d device(s) %s; %d steps (%.4g epochs of %d), batch %d anchors "
        "x %d rows",
        config.model.name,
        config.loss.name,
        mesh.size,
        jax.devices()[0].platform,
        total_steps,
        total_steps / steps_per_epoch,
        steps_per_epoch,
        batch_size,
        objective.rows_per_anchor,
    )

    rep = parallel.replicated(mesh)
    state = init_state(config, model, tx, run, rep)
    init_from = config.train.init_from
    start_params = warm_start.load(init_from, state.params) if init_from else None
    state_sharding = jax.tree.map(lambda _: rep, state)
    # Every check passed: the run starts, under the workdir's lock. The restore comes
    # before config.json so that a checkpoint of another model (InputError) leaves it as is.
    run_dir.open()
    ckpt = Checkpointer(
        workdir,
        keep=config.checkpoint.keep,
        metric=config.checkpoint.best_metric,
    )
    restored = ckpt.restore(state)  # None: no usable checkpoint, scratch
    if lead:
        write_text(workdir / "config.json", config.to_json_best_effort(indent=1) + "\n")
        write_text(workdir / "vocab.json", splits.vocab.to_json() + "\n")
    resumed = restored is not None
    if resumed:
        state = restored
    elif start_params is not None:  # another run's parameters, a fresh optimizer state
        params = jax.device_put(start_params, rep)
        state = TrainState(state.step, params, jax.jit(tx.init, out_shardings=rep)(params))
    start_step = int(jax.device_get(state.step))
    writer = MetricWriter(workdir, enabled=lead, resume_step=start_step if resumed else None)
    evaluator = train_evaluation.evaluator(config, model, splits.test, mesh)
    val_evaluator = (
        None
        if splits.val is None
        else train_evaluation.evaluator(config, model, splits.val, mesh, "val")
    )
    eval_every = config.eval.every_epochs * steps_per_epoch
    selection = Selection(
        ckpt,
        metric=config.checkpoint.best_metric,
        early_stop_evals=config.train.early_stop_evals,
        eval_every=eval_every,
        has_val=val_evaluator is not None,
    )
    train_evaluation.check_best_metric(  # on the split best/ and early stopping follow
        config.checkpoint.best_metric,
        val_evaluator or evaluator,
        "test" if val_evaluator is None else "val",
    )
    gather = config.train.gather
    source = batches.BatchSource(objective, run.train_inputs, batch_size, steps_per_epoch, gather)
    tables = run.train_inputs.device_tables(rep) if gather == "device" else {}
    batch_sharding = {k: parallel.batch_sharded(mesh) for k in source.keys()}
    step_program = jax.jit(
        functools.partial(train_step, model=model, tx=tx, objective=objective, seed=config.seed),
        in_shardings=(state_sharding, jax.tree.map(lambda _: rep, tables), batch_sharding),
        out_shardings=(state_sharding, rep),
        donate_argnums=0,
    )
    export = workdir if lead and config.eval.export_similarity else None
    log_every = config.train.log_every_steps
    save_every = config.checkpoint.every_steps
    # (step, metrics on device) since the last _drain; after a stop on SIGTERM, those of
    # the steps the stopped run had not logged (`preemption.save_window`)
    pending: list[tuple[int, dict]] = []
    if resumed:
        pending += preemption.load_window(workdir, start_step)
    elif lead:
        preemption.discard_window(workdir)  # an earlier run's, in a reused workdir
    last_saved = start_step if resumed else None
    vanished = VanishedGradients()
    final = None
    timer = Timer(start_step, total_steps)
    prefetch = batches.Prefetch(source, mesh, start_step, total_steps, depth=config.train.prefetch)
    last_step = total_steps
    preempted = None  # the step training stopped at on SIGTERM
    # a run stopped early stays stopped (a finished run was never stopped: the last step
    # ends training anyway)
    if resumed and start_step < total_steps and selection.stopped(start_step):
        last_step = start_step
    stopper = preemption.Stop(start_step).install()
    try:
        # Each action that reads `state` (log, evaluate, save) first drains the pending
        # metrics, which vouches for it (`_drain`): no non-finite state is logged as
        # trained, evaluated or saved.
        for step in range(start_step + 1, last_step + 1):
            batch = prefetch.next(timer)
            state, metrics = step_program(state, tables, batch)
            pending.append((step, metrics))
            if itstime(step, log_every, total_steps):
                scalars = _drain(pending, last_saved, vanished)
                scalars.update(timer.rates(step))
                writer.write_scalars(step, {f"train/{k}": v for k, v in scalars.items()})
                writer.flush()
                timer.log(step, steps_per_epoch, scalars)
            stop = False
            if itstime(step, eval_every, total_steps):
                _drain(pending, last_saved, vanished)
                final, val = evaluate_splits(
                    evaluator,
                    val_evaluator,
                    state,
                    step,
                    writer,
                    export=export if step == total_steps else None,
                )
                selection.see(step, state, final, val)
                if step < total_steps:  # early stopping: the last step ends training anyway
                    stop = selection.stopped(step)
                if stop and export is not None:  # the state training ends with
                    write_export(evaluator, evaluator.similarity(state.params), export)
            if itstime(step, save_every, total_steps) or stop:
                _drain(pending, last_saved, vanished)
                ckpt.save(step, state)
                last_saved = step
            if stop:
                break
            if step < last_step and stopper.requested(step):  # SIGTERM: save, then stop
                if last_saved != step:
                    window = _checked(pending, last_saved, vanished)
                    if lead and window:  # for the resumed run's next log line
                        preemption.save_window(workdir, step, window)
                    ckpt.save(step, state)
                    last_saved = step
                preempted = step
                break
    finally:
        prefetch.close()
        try:
            ckpt.close()  # waits for the last save (a stop's too: SIGTERM stays handled)
        finally:
            stopper.restore()
    if preempted is not None:
        writer.close()
        raise preemption.Preempted(preempted)
    if final is None:  # resumed a finished run: evaluate its final state again
        final, val = evaluate_splits(evaluator, val_evaluator, state, start_step, writer, export)
        final.update(_previous_summary(workdir / "metrics.json") or timer.summary())
        selection.seen_again(val)
    else:
        final.update(timer.summary())
    final.update(selection.report())
    writer.close()
    if lead:
        write_text(workdir / "metrics.json", json_text.dumps(final, indent=1) + "\n")
        logging.info("wrote %s", workdir / "metrics.json")
    return final


def init_state(config, model, tx, run, rep) -> TrainState:
    dummy = run.train_inputs.init_batch()  # one row, or one window of 2m + 1 rows

    @functools.partial(jax.jit, out_shardings=rep)
    def init(rng):
        params = model.init(rng, dummy)
        return TrainState(jnp.zeros((), jnp.int32), params, tx.init(params))

    state = init(jax.random.key(config.seed))
    if config.data.word_vectors:
        if "words" not in state.params["params"]:
            raise InputError(
                f"model {config.model.name!r} has no word table for config.data.word_vectors: "
                "unset it"
            )
        table, found = text.load_word_vectors(
            config.data.word_vectors, run.splits.vocab, model.word_dim, seed=config.seed
        )
        logging.info(
            "text: word vectors for %d of %d words from %s",
            found,
            len(run.splits.vocab),
            config.data.word_vectors,
        )
        params = flax.core.unfreeze(state.params)
        params["params"]["words"]["table"]["embedding"] = jax.device_put(table, rep)
        state = TrainState(state.step, params, jax.jit(tx.init, out_shardings=rep)(params))
    count = sum(x.size for x in jax.tree.leaves(state.params))
    logging.info("model: %d parameters", count)
    return state


def train_step(state: TrainState, tables: dict, batch: dict, *, model, tx, objective, seed):
    """One optimisation step; returns the new state and the step's loss terms.

    `tables` holds the device-resident inputs and context windows ({} when the host
    gathers): then the batch has row indices (`objective.gathers`) and the inputs are
    gathered here, through a window ([rows, W, ...]) where the model has context for that
    input; else the batch carries the gathered inputs. Either way the model sees them
    flattened to [rows, ...].
    """
    rng = jax.random.fold_in(jax.random.key(seed), state.step)
    inputs = gather_device(tables, objective.gathers, batch)

    def loss_fn(params):
        return objective.loss(model, params, inputs, batch, rng)

    (loss, terms), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics = {"loss": loss, "grad_norm": optim.gradient_norm(grads), **terms}
    metrics["state_finite"] = all_finite((params, opt_state))
    return TrainState(state.step + 1, params, opt_state), metrics


def itstime(step: int, every: int, last: int) -> bool:
    """Whether an action done every `every` steps and at the `last` step is due at `step`
    (big_vision's `u.itstime`)."""
    return step % every == 0 or step == last


def _drain(pending: list, last_saved: int | None, vanished: VanishedGradients) -> dict:
    """Means of the pending step metrics (pulled to the host); {} when none are pending.

    Raises TrainingDiverged at the first step whose loss is non-finite or whose update left
    a non-finite state. `last_saved` names the newest checkpoint: each save follows a drain
    that vouched for the saved state, so it is finite.
    """
    host = _checked(pending, last_saved, vanished)
    if not host:  # drained already at this step
        return {}
    return {k: float(np.mean([m[k] for _, m in host])) for k in host[0][1]}


def _checked(pending: list, last_saved: int | None, vanished: VanishedGradients) -> list:
    """The pending (step, metrics) pulled to the host and checked (`_drain`), without
    `state_finite` (absent from a stopped run's window, checked before it was kept);
    `pending` is emptied."""
    host = jax.device_get(pending)
    pending.clear()
    for step, m in host:
        loss, finite = m["loss"], m.pop("state_finite", True)
        if not np.isfinite(loss) or not finite:
            if not np.isfinite(loss):
                what = f"non-finite loss ({loss}) at step {step}"
            else:
                what = f"non-finite parameters or optimizer state after the update of step {step}"
            where = (
                f"step {last_saved} (a rerun resumes from it)"
                if last_saved is not None
                else "none yet"
            )
            raise TrainingDiverged(
                f"{what}; last good checkpoint: {where}. Lower config.optimizer.lr (or a "
                "non-zero momentum, keeping it above 0) or check the features; changes "
                "that reshape the optimizer state (grad_clip on or off, momentum to or from 0, "
                "another optimizer) need a new workdir"
            )
        vanished.see(step, float(loss), float(m["grad_norm"]))
    return host


def _previous_summary(path: Path) -> dict | None:
    """The training summary (`Timer.summary` keys) of a finished run's metrics.json, so
    that rerunning it keeps what the training measured; None if unreadable."""
    try:
        previous = json.loads(path.read_bytes())
        return {
            k: previous[k] for k in ("train_seconds", "train_steps", "steps_per_sec", "host_wait")
        }
    except (OSError, ValueError, TypeError, KeyError):
        return None
