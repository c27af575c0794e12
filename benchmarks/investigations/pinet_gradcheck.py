"""Issue 41, item 1: is our Pinet layer, as configured by ``conf/experiment/pinet_e662b15.yaml``, the layer of
Pinet's commit ``e662b15`` (the one whose published DC3 runs we reproduce)? Forward outputs and the gradient of
the training loss (mean objective of the projected output) with respect to the network's raw output ``y_raw``,
for the three backward modes, on DC3's convex QP, at the same ``y_raw`` and batch:

* ours: :class:`hardlinear.methods.pinet.Pinet` (``start=raw``, sigma 1, omega 1.7, 100 DR iterations, no Ruiz);
* ``e662b15``: that commit's own layer (``src/hcnn``, JAX, float64), imported from a scratch extraction (optional,
  ``--e662b15 DIR``; nothing of it is in this repository):
  ``git -C <clone of antonioterpin/pinet> archive e662b15 src/hcnn | tar -x -C DIR``;
* ``pinet-hcnn`` 0.2.0 (PyPI, JAX) with the same start passed as ``s0`` (optional: skipped where not importable);
* references: ``K-map`` = the exact gradient of the 100-iteration map (autograd through the iterations, ours);
  ``IFT(s_K)`` = the implicit gradient at ``s_K`` with the adjoint system solved exactly (dense, per instance);
  ``proj`` = the gradient through the exact Euclidean projection (``I - C'(CC')^+ C`` with ``C`` the equality rows
  and the active inequality rows of the converged projection, at its output).

Two points ``y_raw``: ``init``, the e662b15 network (MLP 2 x 200, flax's initialisation, seed 0) at a training batch
(the first step of training); ``trained``, the same network after ``--epochs`` epochs of our implicit training (the
point where the late-training gradients are taken). Run (about a minute on one CPU core)::

    PYTHONPATH=src python benchmarks/investigations/pinet_gradcheck.py --e662b15 /tmp/e662b15
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

MODES = {"implicit": 5, "fixed_point": 25, "unrolled": 0}  # e662b15's backward iterations (simple_QP_*.yaml)
SIGMA, OMEGA, K = 1.0, 1.7, 100
NETWORK = {"hidden": 200, "layers": 2, "batch_norm": False, "standardize": False, "init": "lecun_normal"}


class Fixed(torch.nn.Module):
    """A "network" whose output is a given ``y_raw`` (a parameter: its ``.grad`` is the vjp we compare)."""

    def __init__(self, y_raw: np.ndarray) -> None:
        super().__init__()
        self.y = torch.nn.Parameter(torch.tensor(y_raw, dtype=torch.float64))

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        return self.y * 1.0


def setup(backward: str, n_iter_bwd: int, problem, net: torch.nn.Module | None = None):
    from hardlinear.methods.base import Context
    from hardlinear.methods.pinet import Pinet

    method = Pinet(sigma=SIGMA, omega=OMEGA, n_iter_train=K, n_iter_test=K, backward=backward,
                   n_iter_bwd=max(n_iter_bwd, 1), start="raw")
    torch.manual_seed(0)
    method.setup(problem, Context(cache_dir=None, dtype=torch.float64, seed=0, progress=False, network=NETWORK))
    if net is not None:
        method.net = net
    return method


def loss_torch(problem, y: torch.Tensor) -> torch.Tensor:
    Q, p = torch.tensor(problem.data.Q), torch.tensor(problem.data.p)
    return (0.5 * ((y @ Q) * y).sum(1) + y @ p).mean()


def ours(problem, xi: np.ndarray, y_raw: np.ndarray, backward: str, n_iter_bwd: int):
    method = setup(backward, n_iter_bwd, problem, Fixed(y_raw))
    y = method.forward(torch.tensor(xi))
    loss_torch(problem, y).backward()
    return y.detach().numpy(), method.net.y.grad.numpy(), method


def e662b15(directory: str, problem, xi: np.ndarray, y_raw: np.ndarray, backward: str, n_iter_bwd: int):
    """e662b15's layer as its run_simple_QP.py builds and calls it (var_b equality, h as the upper bound)."""
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    if directory + "/src" not in sys.path:
        sys.path.insert(0, directory + "/src")
    from hcnn.constraints.affine_equality import EqualityConstraint
    from hcnn.constraints.affine_inequality import AffineInequalityConstraint
    from hcnn.project import Project

    d = problem.data
    X = jnp.asarray(xi)[..., None]
    h = jnp.asarray(d.h)[None, :, None]
    eq = EqualityConstraint(A=jnp.asarray(d.A)[None], b=X, method=None, var_b=True)
    ineq = AffineInequalityConstraint(C=jnp.asarray(d.G)[None], ub=h, lb=-jnp.inf * jnp.ones_like(h))
    proj = Project(ineq_constraint=ineq, eq_constraint=eq, sigma=SIGMA, omega=OMEGA, unroll=backward == "unrolled")
    Q, p = jnp.asarray(d.Q), jnp.asarray(d.p)

    def loss(yr):
        if backward == "unrolled":
            y = proj.call(yr, X, interpolation_value=0, n_iter=K)[0]
        else:
            y = proj.call(yr, X, interpolation_value=0, n_iter=K, n_iter_bwd=n_iter_bwd, fpi=backward == "fixed_point")[0]
        return (0.5 * jnp.sum((y @ Q) * y, axis=1) + y @ p).mean(), y

    (_, y), g = jax.value_and_grad(loss, has_aux=True)(jnp.asarray(y_raw))
    return np.asarray(y), np.asarray(g)


def hcnn_layer(data, xi: np.ndarray, backward: str, n_iter_bwd: int):
    """pinet-hcnn 0.2.0's projection of DC3's QP ``data`` at inputs ``xi``, as a JAX function ``y_raw -> y``,
    started at e662b15's ``s0 = (y_raw, 0)`` passed explicitly (its default start is 0). Also what
    tests/test_pinet_gradient.py checks our layer against."""
    import jax
    import jax.numpy as jnp
    import pinet

    jax.config.update("jax_enable_x64", True)
    X = jnp.asarray(xi)[..., None]
    eq = pinet.EqualityConstraint(a_mat=jnp.asarray(data.A)[None], b=X, method=None, var_b=True)
    ineq = pinet.AffineInequalityConstraint(c_mat=jnp.asarray(data.G)[None], lb=jnp.full((1, data.G.shape[0], 1), -jnp.inf),
                                            ub=jnp.asarray(data.h)[None, :, None])
    params = pinet.EquilibrationParams(max_iter=0, tol=1e-3, ord=2.0, col_scaling=False, update_mode="Gauss", safeguard=False)
    proj = pinet.Project(eq_constraint=eq, ineq_constraint=ineq, unroll=backward == "unrolled", equilibration_params=params)
    spec = pinet.EqualityConstraintsSpecification(b=X)
    m = data.G.shape[0]

    def run(yr):
        inp = pinet.ProjectionInstance(x=yr[..., None], eq=spec)
        s0 = proj.initialize(inp).update(x=jnp.concatenate([yr[..., None], jnp.zeros((yr.shape[0], m, 1))], axis=1))
        kw = {} if backward == "unrolled" else {"n_iter_bwd": n_iter_bwd, "fpi": backward == "fixed_point"}
        out, _ = proj.call(y_raw=inp, s0=s0, sigma=SIGMA, omega=OMEGA, n_iter=K, **kw)
        return out.x[..., 0]

    return run


def pinet_hcnn(problem, xi: np.ndarray, y_raw: np.ndarray, backward: str, n_iter_bwd: int):
    """pinet-hcnn 0.2.0's output and the gradient of the mean QP objective through it (:func:`hcnn_layer`)."""
    import jax
    import jax.numpy as jnp

    d = problem.data
    run = hcnn_layer(d, xi, backward, n_iter_bwd)
    Q, p = jnp.asarray(d.Q), jnp.asarray(d.p)

    def loss(yr):
        y = run(yr)
        return (0.5 * jnp.sum((y @ Q) * y, axis=1) + y @ p).mean(), y

    (_, y), g = jax.value_and_grad(loss, has_aux=True)(jnp.asarray(y_raw))
    return np.asarray(y), np.asarray(g)


def ift_exact(method, problem, xi: np.ndarray, y_raw: np.ndarray) -> np.ndarray:
    """``J_{T,y}' (I - J_{T,s}')^{-1} v`` at ``s_K`` with the adjoint system solved densely, instance by instance."""
    layer, fam = method.layer, problem.family
    x = torch.tensor(xi)
    yr = torch.tensor(y_raw)
    q, s_lo, s_hi = layer._data(yr, fam.eq_rhs(x), fam.ineq_rhs(x), None)
    s0 = torch.cat([yr, yr.new_zeros(yr.shape[0], layer.m)], 1)
    with torch.no_grad():
        _, s_K = layer(yr, fam.eq_rhs(x), fam.ineq_rhs(x), n_iter=K, s0=s0)
    s_ = s_K.clone().requires_grad_(True)
    (d,) = layer.consts.get(("d",), s_)
    y = d * layer._project_eq(s_, q)[:, : layer.n]
    (v,) = torch.autograd.grad(loss_torch(problem, y), s_)
    out = np.empty_like(y_raw)
    for i in range(yr.shape[0]):
        def T_s(s, i=i):
            return layer._step(s, yr[i : i + 1], q[i : i + 1], s_lo[i : i + 1], s_hi[i : i + 1])

        J = torch.autograd.functional.jacobian(T_s, s_K[i : i + 1]).reshape(layer.n + layer.m, -1).numpy()
        w = np.linalg.solve(np.eye(J.shape[0]) - J.T, v[i].numpy())
        y_i = yr[i : i + 1].clone().requires_grad_(True)
        t = layer._step(s_K[i : i + 1], y_i, q[i : i + 1], s_lo[i : i + 1], s_hi[i : i + 1])
        (out[i],) = torch.autograd.grad(t, y_i, torch.tensor(w)[None])[0].numpy()
    return out


def projection_gradient(method, problem, xi: np.ndarray, y_raw: np.ndarray, iters: int = 20000):
    """The gradient through the exact projection: DR run to convergence, its active set, ``I - C'(CC')^+ C``."""
    layer, fam, d = method.layer, problem.family, problem.data
    x = torch.tensor(xi)
    yr = torch.tensor(y_raw)
    s0 = torch.cat([yr, yr.new_zeros(yr.shape[0], layer.m)], 1)
    with torch.no_grad():
        y, _ = layer(yr, fam.eq_rhs(x), fam.ineq_rhs(x), n_iter=iters, s0=s0)
    y = y.numpy()
    slack = d.G @ y.T - d.h[:, None]  # (m, B)
    g = (y @ d.Q + d.p) / y.shape[0]
    out = np.empty_like(y)
    n_active = []
    for i in range(y.shape[0]):
        act = slack[:, i] > -1e-7
        n_active.append(int(act.sum()))
        C = np.vstack([d.A, d.G[act]])
        out[i] = g[i] - C.T @ np.linalg.lstsq(C @ C.T, C @ g[i], rcond=None)[0]
    return out, np.array(n_active), float(np.maximum(slack, 0).max())


def compare(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """``(||a - b|| / ||b||, cosine(a, b))`` over the whole batch."""
    a, b = a.ravel(), b.ravel()
    return float(np.linalg.norm(a - b) / np.linalg.norm(b)), float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def train(problem, xi_train: np.ndarray, epochs: int):
    """Our implicit training, e662b15's settings (Adam 1e-2, batch 2000, a shuffled pass an epoch), ``epochs`` epochs."""
    method = setup("implicit", 5, problem)
    opt = torch.optim.Adam(method.net.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(0)
    X = torch.tensor(xi_train)
    for _ in range(epochs):
        for idx in torch.randperm(X.shape[0], generator=gen).split(2000):
            opt.zero_grad()
            loss_torch(problem, method.forward(X[idx])).backward()
            opt.step()
    return method.net


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--e662b15", default=None, help="a directory holding e662b15's src/hcnn (see the module docstring)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=10, help="training epochs for the 'trained' point (0: skip it)")
    ap.add_argument("--k-map-only", action="store_true", help="only the K-map reference (the dense IFT and the "
                    "converged projection are per instance: slow at a training batch of 2000)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    from hardlinear.problems import build_problem

    try:
        import pinet  # noqa: F401
        have_pinet = True
    except ImportError:
        have_pinet = False
    problem = build_problem("dc3_qp")
    xi_train = problem.given_inputs["train"]
    xi = xi_train[: args.batch]
    net = setup("implicit", 5, problem).net
    points = {"init": net(torch.tensor(xi)).detach().numpy()}
    if args.epochs:
        t0 = time.perf_counter()
        net = train(problem, xi_train, args.epochs)
        points[f"trained ({args.epochs} epochs)"] = net(torch.tensor(xi)).detach().numpy()
        print(f"# trained {args.epochs} epochs in {time.perf_counter() - t0:.0f} s")
    for point, y_raw in points.items():
        ref_method = setup("implicit", 5, problem, Fixed(y_raw))
        _, g_K, _ = ours(problem, xi, y_raw, "unrolled", 0)
        refs = [g_K]
        print(f"\n## y_raw = {point}: batch {len(xi)}")
        if not args.k_map_only:
            g_ift = ift_exact(ref_method, problem, xi, y_raw)
            g_proj, n_active, excess = projection_gradient(ref_method, problem, xi, y_raw)
            refs += [g_ift, g_proj]
            print(f"active inequality rows at the projection: median {np.median(n_active):.0f} (min {n_active.min()}, "
                  f"max {n_active.max()}); converged-projection excess {excess:.1e}")
            print(f"references: IFT(s_K) vs K-map: rel {compare(g_ift, g_K)[0]:.2e}; proj vs K-map: rel {compare(g_proj, g_K)[0]:.2e}")
        names = ["K-map", "IFT(s_K)", "proj"][: len(refs)]
        print("| backward | iters | fwd ours vs e662b15 (max abs) | fwd ours vs pinet-hcnn | grad ours vs e662b15 (rel) "
              "| grad ours vs pinet-hcnn (rel) | " + " | ".join(f"grad vs {r}: rel / cos" for r in names) + " |")
        print("|---" * (6 + len(refs)) + "|")
        for mode, nb in MODES.items():
            y, g, _ = ours(problem, xi, y_raw, mode, nb)
            cells = [mode, str(nb) if nb else "(100 unrolled)"]
            if args.e662b15:
                y_e, g_e = e662b15(args.e662b15, problem, xi, y_raw, mode, nb)
                fe, ge = f"{np.abs(y - y_e).max():.1e}", f"{compare(g, g_e)[0]:.1e}"
            else:
                fe = ge = "(not run)"
            if have_pinet:
                y_p, g_p = pinet_hcnn(problem, xi, y_raw, mode, nb)
                fp, gp = f"{np.abs(y - y_p).max():.1e}", f"{compare(g, g_p)[0]:.1e}"
            else:
                fp = gp = "(not installed)"
            cells += [fe, fp, ge, gp]
            for ref in refs:
                r, c = compare(g, ref)
                cells.append(f"{r:.3f} / {c:.4f}")
            print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
