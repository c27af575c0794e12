"""The speed targets as ratios of :mod:`bench_methods` rows, each taken within one round, then summarised over the
rounds (median, min, max): a target is a ratio measured in one run, with its spread.

Per problem (``methods_summary.csv``):

* ``proposed_over_mlp_b1`` (<= 1.5) and ``proposed_over_mlp_b4096`` (<= 2): the proposed method over the bare
  MLP at batch 1 and at batch 4096 (or the largest batch both were timed at, named in ``detail``);
* ``optimizer_over_proposed_b1`` (>= 20): the fastest cold optimizer (``optimizer[SOLVER/cold]`` rows that
  solved every instance) over the proposed method at batch 1;
* ``throughput_over_optimizer`` (>= 1000): the proposed method's instances per second at that large batch over
  the optimizer's (one instance per call).

The targets are stated for dcopf_118 and dcopf_200 (the optimizer ratios for their QPs); other problems are
shown for reference (``target_applies`` False). The same ratios follow for ``proposed[unfused]`` (suffix
`` (unfused)``) and for the ``torch.compile`` pair (``mlp[torch.compile]``, ``proposed[unfused, torch.compile]``:
suffix `` (torch.compile)``) where they were timed.
"""

from __future__ import annotations

import math
import statistics

COLUMNS = ["problem", "ratio", "value", "min", "max", "rounds", "target", "verdict", "target_applies", "detail"]
LARGE = ("dcopf_118", "dcopf_118_qp", "dcopf_200", "dcopf_200_qp")
QP = ("dcopf_118_qp", "dcopf_200_qp")
# ratio -> (comparison, threshold, the problems it is stated for)
TARGETS = {
    "proposed_over_mlp_b1": ("<=", 1.5, LARGE),
    "proposed_over_mlp_b4096": ("<=", 2.0, LARGE),
    "optimizer_over_proposed_b1": (">=", 20.0, QP),
    "throughput_over_optimizer": (">=", 1000.0, QP),
}
# (suffix of the ratio's name, the proposed row, the MLP row it is compared with)
PAIRS = (("", "proposed", "mlp"), ("unfused", "proposed[unfused]", "mlp"),
         ("torch.compile", "proposed[unfused, torch.compile]", "mlp[torch.compile]"))  # fmt: skip


def _get(rows: list[dict], method: str, batch: int) -> dict | None:
    return next((r for r in rows if r["method"] == method and int(r["batch_size"]) == batch and r["status"] == "ok"), None)


def _ms(row: dict | None) -> float:
    return float(row["median_ms"]) if row else math.nan


def fastest_cold_optimizer(rows: list[dict]) -> dict | None:
    """The quickest ``optimizer[SOLVER/cold]`` row that solved every instance (a failed solve is no speed)."""
    cold = [r for r in rows if r["status"] == "ok" and str(r.get("variant", "")).endswith("/cold")
            and str(r["method"]).startswith("optimizer[") and not float(r.get("failures") or 0)]  # fmt: skip
    return min(cold, key=_ms, default=None)


def ratios(rows: list[dict]) -> list[dict]:
    """The ratios of one round's rows, per problem: ``{problem, ratio, value, detail}`` (NaN where a row is missing)."""
    out = []
    for problem in dict.fromkeys(r["problem"] for r in rows):
        pr = [r for r in rows if r["problem"] == problem]
        fastest = fastest_cold_optimizer(pr)
        opt = fastest["variant"] if fastest else "no cold optimizer solved every instance"
        for suffix, name, mlp in PAIRS:
            p1, m1 = _get(pr, name, 1), _get(pr, mlp, 1)
            if suffix and not (p1 and m1):
                continue
            both = [int(r["batch_size"]) for r in pr if r["method"] == name and r["status"] == "ok" and _get(pr, mlp, int(r["batch_size"]))]
            big = 4096 if 4096 in both else max(both, default=1)
            pb, mb = _get(pr, name, big), _get(pr, mlp, big)
            values = {
                "proposed_over_mlp_b1": (_ms(p1) / _ms(m1), "batch 1"),
                "proposed_over_mlp_b4096": (_ms(pb) / _ms(mb), f"batch {big}"),
                "optimizer_over_proposed_b1": (_ms(fastest) / _ms(p1), f"fastest cold optimizer: {opt}"),
                "throughput_over_optimizer": (big / _ms(pb) * _ms(fastest), f"{name} at batch {big} vs {opt}"),
            }
            for ratio, (value, detail) in values.items():
                out.append({"problem": problem, "ratio": ratio + (f" ({suffix})" if suffix else ""), "value": value, "detail": detail})
    return out


def summarize(rounds: list[list[dict]]) -> list[dict]:
    """Every ratio of :func:`ratios` per round, then its median, min and max over the rounds and the verdict of
    the median against its target (``n/a`` where it could not be measured)."""
    per: dict[tuple[str, str], list[dict]] = {}
    for rows in rounds:
        for r in ratios(rows):
            per.setdefault((r["problem"], r["ratio"]), []).append(r)
    out = []
    for (problem, ratio), found in per.items():
        values = [r["value"] for r in found if not math.isnan(r["value"])]
        op, target, where = TARGETS[ratio.split(" (")[0]]
        value = statistics.median(values) if values else math.nan
        ok = value <= target if op == "<=" else value >= target
        out.append({"problem": problem, "ratio": ratio, "value": value, "min": min(values, default=math.nan),
                    "max": max(values, default=math.nan), "rounds": len(values), "target": f"{op} {target:g}",
                    "verdict": "n/a" if math.isnan(value) else ("PASS" if ok else "MISS"),
                    "target_applies": problem in where, "detail": found[-1]["detail"]})  # fmt: skip
    return out


def markdown(summary: list[dict]) -> str:
    """The summary as a table (``methods.md`` appends it)."""
    lines = ["### Ratios against the speed targets", "",
             "| problem | ratio | median | min-max (rounds) | target | verdict | detail |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for s in summary:
        verdict = s["verdict"] if s["target_applies"] else f"{s['verdict']} (reference)"
        spread = f"{s['min']:.3g}-{s['max']:.3g} ({s['rounds']})" if s["rounds"] else ""
        lines.append(f"| {s['problem']} | {s['ratio']} | {s['value']:.3g} | {spread} | {s['target']} | {verdict} | {s['detail']} |")
    return "\n".join(lines) + "\n"
