"""A building climate controller as a parametric QP, written as an ``.npz`` for ``problem=linear``.

Three zones heated over 12 hourly steps (72 outputs: each zone's temperature and heating power every hour;
27 inputs: the zones' starting temperatures, the outdoor temperature forecast and the solar gain of each hour;
36 equalities: the thermal dynamics; 156 inequalities: comfort band, heater limits and the building's feeder
limit). The cost is the energy bill at time-of-use prices plus a small quadratic term on the heating power. A check problem for the methods' default trainer (docs/own_problem.md,
"Defaults on one's own problem"): it was not used to choose those defaults.

    python scripts/examples/building_climate.py data/building_climate.npz
    python run.py problem=linear problem.path=data/building_climate.npz method=proposed_refined
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

ZONES, HOURS = 3, 12
RETAIN, COUPLE, LOSS = 0.80, 0.025, 0.15   # a zone keeps 80 % of its heat, exchanges 2.5 % with each other zone, loses 15 % outside
HEAT_GAIN, SOLAR_GAIN = 1.0, 0.5           # degrees per kWh of heating and per unit of solar input
T_MIN, T_MAX = 19.0, 25.0                 # comfort band (degrees C)
U_MAX, FEEDER = 6.0, 15.0                  # heater limit per zone and the building's total per hour (kWh)


def build() -> dict[str, np.ndarray]:
    """The problem's arrays (keys of hardlinear.problems.linear)."""
    n = 2 * ZONES * HOURS                  # y = [T (hour-major, zone-minor), u (same order)]
    t_idx = lambda h, z: h * ZONES + z     # noqa: E731 - index helpers
    u_idx = lambda h, z: ZONES * HOURS + h * ZONES + z  # noqa: E731
    k = ZONES + 2 * HOURS                  # xi = [T0 (3), outdoor temperature (12), solar (12)]
    out_idx = lambda h: ZONES + h          # noqa: E731
    sol_idx = lambda h: ZONES + HOURS + h  # noqa: E731
    mix = RETAIN * np.eye(ZONES) + COUPLE * (np.ones((ZONES, ZONES)) - np.eye(ZONES))

    G = np.zeros((ZONES * HOURS, n))
    Gx = np.zeros((ZONES * HOURS, k))
    for h in range(HOURS):
        for z in range(ZONES):
            row = h * ZONES + z            # T[h,z] - mix T[h-1] - HEAT_GAIN u[h,z] = LOSS out[h] + SOLAR_GAIN sol[h]
            G[row, t_idx(h, z)] = 1.0
            G[row, u_idx(h, z)] = -HEAT_GAIN
            for j in range(ZONES):
                if h > 0:
                    G[row, t_idx(h - 1, j)] -= mix[z, j]
                else:
                    Gx[row, j] += mix[z, j]
            Gx[row, out_idx(h)] = LOSS
            Gx[row, sol_idx(h)] = SOLAR_GAIN
    eye_t = np.hstack([np.eye(ZONES * HOURS), np.zeros((ZONES * HOURS, ZONES * HOURS))])
    eye_u = np.hstack([np.zeros((ZONES * HOURS, ZONES * HOURS)), np.eye(ZONES * HOURS)])
    feeder = np.hstack([np.zeros((HOURS, ZONES * HOURS)), np.kron(np.eye(HOURS), np.ones((1, ZONES)))])
    H = np.vstack([-eye_t, eye_t, -eye_u, eye_u, feeder])
    m = ZONES * HOURS
    h0 = np.concatenate([np.full(m, -T_MIN), np.full(m, T_MAX), np.zeros(m), np.full(m, U_MAX), np.full(HOURS, FEEDER)])

    # The bill: time-of-use prices and a quadratic term for the heaters' losses at high power. Only the heating is
    # costed (the comfort band is a constraint), so the optimal cost is positive for every input (heat is always
    # needed: the outdoor temperature stays below the band) and a relative gap compares like with like; a setpoint
    # penalty would add a large constant that no decision moves and shrink every relative gap.
    price = 0.15 + 0.15 * np.isin(np.arange(HOURS), range(4, 9))   # a peak price for five of the twelve hours
    w_heat = 0.05
    Q = np.diag(np.concatenate([np.zeros(m), np.full(m, w_heat)]))
    c = np.concatenate([np.zeros(m), np.repeat(price, ZONES)])
    lo = np.concatenate([np.full(ZONES, 19.5), np.full(HOURS, -5.0), np.zeros(HOURS)])
    hi = np.concatenate([np.full(ZONES, 22.5), np.full(HOURS, 8.0), np.ones(HOURS)])
    names = [f"T[{h},{z}]" for h in range(HOURS) for z in range(ZONES)] + [f"u[{h},{z}]" for h in range(HOURS) for z in range(ZONES)]
    return dict(c=c, Q=Q, G=G, g0=np.zeros(m), Gx=Gx, H=H, h0=h0, Hx=np.zeros((H.shape[0], k)), lo=lo, hi=hi,
                variable_names=np.array(names))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="the .npz to write")
    path = parser.parse_args().path
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = build()
    np.savez(path, **arrays)
    print(f"wrote {path}: {arrays['c'].size} outputs, {arrays['lo'].size} inputs, {arrays['G'].shape[0]} equalities, "
          f"{arrays['H'].shape[0]} inequalities")


if __name__ == "__main__":
    main()
