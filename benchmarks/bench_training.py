"""Training time per epoch (20 batches of 64, the paper's) per problem and method, with the project's trainer.

Each method runs ``hardlinear.train.trainer.train`` for a few epochs; an epoch clock (the trainer's logger
hook) stamps the end of every epoch. Timed epochs exclude the first epoch of each phase (warm-up: allocator,
first calls) and the last epoch of the run (the only one that validates: ``val_every`` is set past the end,
so the other epochs are optimisation steps only). Reported: the median epoch and the median batch (epoch /
batches). Methods: ``proposed`` (two phases: ``pretrain``, MSE of the network to the decision rule, and
``train``, the objective through the feasibility layer), ``penalty`` (objective + penalty through the bare
network), ``dc3`` (completion and 10 unrolled correction steps) and ``apm`` / ``eapm`` (the objective through
up to 300 unrolled (extrapolated) alternating projections, in float32), and on request the peer methods
``gauge``, ``hardnet_aff`` and ``projection_layer`` (one cvxpylayers QP solve and derivative per instance; a method that
does not apply is a ``not_applicable`` row with its reason). The learning rate is irrelevant here.
On a large grid the proposed method's equality projection in training is a sparse Cholesky of ``G G'`` (the
projector's ``train_solve="auto"``); ``--train-solves auto basis`` times it against the orthonormal basis in one
process (column ``projection``: the path actually taken). ``--default-allocator`` keeps glibc's default mmap
threshold for the whole process (the trainer otherwise keeps large freed blocks in the heap: ``allocator.py``).
APM and EAPM stop unrolling once every instance of a batch is within the tolerance, so their epochs get
cheaper as the network learns: the few epochs timed here, from an untrained network, are their worst case (a
whole paper run's training time is the ``train/time_s`` column of its results row).

Run: ``python benchmarks/bench_training.py --quick`` (``--full``, ``--device cuda``; ``--help``).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

from hardlinear.layers.equality import TRAIN_SOLVES
from hardlinear.methods.base import NotApplicable
from hardlinear.runtime.allocator import keeping_large_blocks
from hardlinear.train import trainer

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

NAME = "training"
QUICK = {"problems": ["dcopf_14", "portfolio"], "epochs": 3}
FULL = {"problems": ["dcopf_14", "dcopf_30", "dcopf_57", "dcopf_118", "dcopf_200", "portfolio"], "epochs": 5}
METHODS = ("proposed", "penalty", "dc3", "apm", "eapm")  # the default set
PEERS = ("gauge", "hardnet_aff", "projection_layer")  # on request: projection_layer takes ~1 minute an epoch
COLUMNS = [
    "problem", "case", "objective", "form", "n", "m_eq", "m_ineq", "k", "method", "phase", "epochs_timed",
    "batches_per_epoch", "batch_size", "epoch_ms", "epoch_ms_min", "epoch_ms_max", "batch_ms", "status", "note",
    "rule_source", "projection", "allocator", "device", "threads", "git_sha",
]  # fmt: skip


def parser():
    p = common.base_parser(__doc__.splitlines()[0])
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS + PEERS)
    p.add_argument("--epochs", type=int, default=None, help="timed epochs per phase (2 more are run and not timed)")
    p.add_argument("--batches-per-epoch", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--val-size", type=int, default=8, help="validation instances (solved once, cached)")
    p.add_argument("--train-solves", nargs="+", default=["auto"], choices=TRAIN_SOLVES,
                   help="the proposed method's projection in training (auto: Cholesky of G G' where it applies)")
    p.add_argument("--default-allocator", action="store_true",
                   help="do not keep large freed blocks in the heap (glibc's default; the whole process)")
    return p


class EpochClock:
    """A trainer logger that stamps the end of each epoch with its phase."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.stamps: list[tuple[int, str, float]] = []

    def log_epoch(self, epoch: int, record: dict) -> None:
        self.stamps.append((epoch, record["phase"], time.perf_counter()))

    def durations(self) -> dict[str, list[float]]:
        """Seconds of each epoch by phase, without each phase's first epoch and the run's last epoch."""
        out: dict[str, list[float]] = {}
        prev, seen = self.start, set()
        for i, (_, phase, t) in enumerate(self.stamps):
            first, last = phase not in seen, i == len(self.stamps) - 1
            seen.add(phase)
            if not (first or last):
                out.setdefault(phase, []).append(t - prev)
            prev = t
        return out


def projection_path(method, train_solve: str) -> str:
    """Set the method's training projection to ``train_solve``; the path its equality projector takes in training."""
    projector = getattr(getattr(method, "layer", None), "projector", None)
    if projector is None:
        return ""
    if train_solve == "basis":
        projector.normal_projection = None
    return "cholesky" if projector.normal_projection is not None else "basis"


def time_method(problem_cfg: str, name: str, problem, val, args, base: dict, train_solve: str = "auto") -> list[dict]:
    from hardlinear.train.trainer import TrainerConfig, train

    ctx = common.make_context(args)
    torch.manual_seed(args.seed)
    method, _, source = common.make_method(problem_cfg, name, problem, ctx)
    projection = projection_path(method, train_solve)
    with torch.no_grad():
        pretrains = getattr(method, "pretrain", False) and method.pretrain_target(problem.sample(2)) is not None
    E = args.epochs
    pre = E + 1 if pretrains else 0
    epochs = pre + E + 2
    cfg = TrainerConfig(
        epochs=epochs, pretrain_epochs=pre, batches_per_epoch=args.batches_per_epoch, batch_size=args.batch_size,
        lr=1e-4, val_every=epochs + 1, progress=False,
    )  # fmt: skip
    clock = EpochClock()
    train(method, problem, val, cfg, ctx, loggers=clock)
    rows = []
    for phase, secs in clock.durations().items():
        ms = [1000 * s for s in secs]
        med = statistics.median(ms)
        rows.append({**base, "method": name, "phase": phase, "epochs_timed": len(ms), "batches_per_epoch": args.batches_per_epoch,
                     "batch_size": args.batch_size, "epoch_ms": med, "epoch_ms_min": min(ms), "epoch_ms_max": max(ms),
                     "batch_ms": med / args.batches_per_epoch, "status": "ok", "rule_source": source,
                     "projection": projection})  # fmt: skip
    return rows


def run_problem(problem_cfg: str, args, env: dict) -> list[dict]:
    from hardlinear.problems.datasets import build_dataset

    problem = common.load_problem(problem_cfg)
    val = build_dataset(problem, "val", args.val_size, args.seed, None, args.cache_dir, progress=False)
    base = {**common.problem_identity(problem_cfg, problem), "device": env["device_name"], "threads": args.threads,
            "git_sha": env["git_sha"]}  # fmt: skip
    rows = []
    variants = [(name, solve) for name in args.methods for solve in (args.train_solves if name == "proposed" else ["auto"])]
    for name, solve in variants:
        t0 = time.perf_counter()
        try:
            out = time_method(problem_cfg, name, problem, val, args, base, solve)
        except NotApplicable as err:  # recorded with its reason, never timed
            rows.append({**base, "method": name, "status": "not_applicable", "note": str(err)})
            common.log(f"  {problem_cfg:>10} {name:<9} not applicable: {err}")
            continue
        rows += out
        text = ", ".join(f"{r['phase']} {r['epoch_ms']:.0f} ms/epoch" for r in out)
        label = f"{name} ({out[0]['projection']})" if out and out[0]["projection"] else name
        common.log(f"  {problem_cfg:>10} {label:<9} {text}  ({time.perf_counter() - t0:.1f} s)")
    return rows


def plot(rows: list[dict], path: Path) -> Path:
    fig, (ax,) = common.new_figure(1, size=(7.5, 4.0))
    rows = [r for r in rows if r.get("status") == "ok"]
    problems = list(dict.fromkeys(r["problem"] for r in rows))
    key = lambda r: (r["method"], r["phase"], r.get("projection", ""))  # noqa: E731
    series = list(dict.fromkeys(key(r) for r in rows))
    width = 0.8 / max(len(series), 1)
    for j, (method, phase, projection) in enumerate(series):
        xs, ys = [], []
        for i, problem in enumerate(problems):
            r = next((r for r in rows if r["problem"] == problem and key(r) == (method, phase, projection)), None)
            if r is not None:
                xs.append(i + (j - (len(series) - 1) / 2) * width)
                ys.append(r["epoch_ms"])
        projected = f", {projection}" if projection and phase == "train" else ""
        ax.bar(xs, ys, width=width, label=f"{method} ({phase}{projected})")
    ax.set_xticks(range(len(problems)), problems)
    ax.set_yscale("log")
    ax.set_ylabel("ms per epoch (20 batches of 64)")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return common.save_figure(fig, path)


def main(argv: list[str] | None = None) -> dict:
    args = common.resolve(parser().parse_args(argv), QUICK, FULL)
    if args.epochs < 1:
        raise ValueError(f"--epochs must be >= 1; got {args.epochs}")
    torch.set_num_threads(args.threads)
    keep = trainer.keep_large_blocks
    if args.default_allocator:
        trainer.keep_large_blocks = lambda: False
    env = common.environment(args.device, args.threads)
    common.log(
        f"[training] {args.size}: {', '.join(args.problems)} x {', '.join(args.methods)} on {env['device_name']}"
    )
    rows: list[dict] = []
    try:
        for problem_cfg in args.problems:
            rows += run_problem(problem_cfg, args, env)
    finally:
        trainer.keep_large_blocks = keep
    allocator = "keep_blocks" if keeping_large_blocks() else "default"  # what the process ran with, not the flag
    rows = [{**r, "allocator": allocator} for r in rows]
    meta = {**env, "benchmark": NAME, "size": args.size, "settings": vars(args), "rule_available": common.rule_available(),
            "notes": {"timing": "median epoch wall time; first epoch of each phase and the validating last epoch excluded"}}  # fmt: skip
    out = Path(args.out_dir)
    paths = common.write_results(out, NAME, rows, meta, COLUMNS)
    if not args.no_plot:
        paths["png"] = plot(rows, out / f"{NAME}.png")
    return {"paths": paths, "rows": rows}


if __name__ == "__main__":
    main()
