"""The ``pinet-hcnn (JAX)`` reference row of :mod:`bench_methods` (issue 40, item 2): our Pinet method's network and
settings, with the projection run by the Pinet package's own jitted layer instead of ours.

Why a row and not only :mod:`bench_dr`: it times what a user of the package would run in a torch pipeline, the
same network, the same ``G, H``, right-hand sides, Ruiz rounds, sigma, omega and test iterations, through
``predict``, the arrays converted between torch and JAX (counted: that is the price of using it from torch). Its
floor is Pinet's (:func:`floors.pinet`), so the floor ratios of the two rows compare like with like. Present only
where the ``peers`` extra and ``pinet-hcnn`` are installed (``available()``); elsewhere the row is ``skipped`` with
the install line.
"""

from __future__ import annotations

import numpy as np
import torch

from hardlinear.methods.base import Prediction

INSTALL = "pip install jax equinox jaxtyping beartype && pip install --no-deps pinet-hcnn==0.2.0 (docs/pinet.md)"


def available() -> bool:
    try:
        import jax  # noqa: F401
        import pinet  # noqa: F401
    except ImportError:
        return False
    return True


class PinetHcnnReference:
    """``predict(xi)``: ``method``'s network in torch, then ``pinet.Project`` (JAX, float64) with ``method``'s settings."""

    iterative = True  # reports its iterations (the floor counts them)

    def __init__(self, method) -> None:
        import jax
        import jax.numpy as jnp
        import pinet

        jax.config.update("jax_enable_x64", True)
        self.method, self.jnp = method, jnp
        # floors.pinet reads these
        self.net, self.layer, self.layer_dtype, self.problem = method.net, method.layer, method.layer_dtype, method.problem
        family = method.problem.family
        from hardlinear.errors import NotApplicable
        from hardlinear.layers.equality import constant_lhs

        B_ineq = np.asarray(family.B_ineq, dtype=np.float64)
        if np.any(B_ineq[:, 1:]):
            raise NotApplicable("pinet-hcnn's inequality bounds are constants of the layer; here h(x) moves with the input")
        G = constant_lhs(family, "G") if family.m_eq else np.zeros((0, family.n))
        H = constant_lhs(family, "H") if family.m_ineq else np.zeros((0, family.n))
        if G is None or H is None:
            raise NotApplicable("pinet-hcnn needs constant G and H")
        eq = pinet.EqualityConstraint(a_mat=jnp.asarray(G)[None], b=jnp.zeros((1, G.shape[0], 1)), method=None, var_b=True)
        ineq = pinet.AffineInequalityConstraint(
            c_mat=jnp.asarray(H)[None], lb=jnp.full((1, H.shape[0], 1), -jnp.inf), ub=jnp.asarray(B_ineq[:, 0])[None, :, None]
        )
        r = method.ruiz
        params = pinet.EquilibrationParams(max_iter=r.max_iter, tol=r.tol, ord=r.ord, col_scaling=r.col_scaling,
                                           update_mode="Gauss" if r.mode == "gauss" else "Jacobi", safeguard=r.safeguard)
        self.project = pinet.Project(eq_constraint=eq, ineq_constraint=ineq, unroll=False, equilibration_params=params)
        self.pinet = pinet

    def eval(self) -> PinetHcnnReference:
        self.method.eval()
        return self

    def describe(self) -> dict[str, str]:
        return {"variant": "pinet-hcnn 0.2.0's jitted Project (JAX), our network"}

    @torch.no_grad()
    def predict(self, xi: torch.Tensor) -> Prediction:
        from hardlinear.layers.network import run_net

        m, jnp, pinet = self.method, self.jnp, self.pinet
        family = m.problem.family
        x64 = xi.to(torch.float64)
        y_raw = run_net(m.net, xi).to(torch.float64)
        inp = pinet.ProjectionInstance(
            x=jnp.asarray(y_raw.cpu().numpy())[..., None],
            eq=pinet.EqualityConstraintsSpecification(b=jnp.asarray(family.eq_rhs(x64).cpu().numpy())[..., None]),
        )
        out, _ = self.project.call(y_raw=inp, sigma=m.sigma, omega=m.omega, n_iter=m.n_iter_test,
                                   n_iter_bwd=m.n_iter_bwd, fpi=False)
        y = torch.from_numpy(np.array(out.x[..., 0].block_until_ready()))  # a writable copy
        return Prediction(y=y, iterations=torch.full((xi.shape[0],), m.n_iter_test, dtype=torch.long))
