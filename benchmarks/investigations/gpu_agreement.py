"""DC3's and FSNet's scripted inference loops on CUDA against the CPU (issue 40, item 5): the same fresh network
and method moved to the GPU, outputs and iteration counts compared. Run on a GPU machine with the project's
``src`` on the path: ``python benchmarks/investigations/gpu_agreement.py`` (writes ``$OUT/agreement.json`` or ``/tmp``)."""

from __future__ import annotations

import json
import os
import warnings

import torch

from hardlinear.methods.base import Context
from hardlinear.methods.dc3 import DC3
from hardlinear.methods.fsnet import FSNet
from hardlinear.problems import build_problem


def main() -> dict:
    warnings.filterwarnings("ignore")
    out = {}
    problem = build_problem("dc3_qp")
    xi = problem.sample(256, generator=torch.Generator().manual_seed(0))
    for name, cls, kw in (("dc3", DC3, {"layer_dtype": "float64"}), ("fsnet", FSNet, {"output_box": 5.0})):
        torch.manual_seed(0)
        method = cls(**kw)
        method.setup(problem, Context(cache_dir="/tmp/cache", progress=False))
        method.eval()
        cpu = method.predict(xi)
        method.to("cuda")
        gpu = method.predict(xi.cuda())
        out[name] = {
            "rel_diff_cuda_vs_cpu": float((cpu.y - gpu.y.cpu()).abs().max() / cpu.y.abs().max()),
            "iters_cpu": float(cpu.iterations.float().mean()), "iters_cuda": float(gpu.iterations.float().mean()),
            "extras_cpu": {k: float(v) for k, v in cpu.extras.items() if not hasattr(v, "shape")},
            "extras_cuda": {k: float(v) for k, v in gpu.extras.items() if not hasattr(v, "shape")},
        }
        print(name, out[name], flush=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "agreement.json"), "w") as f:
        json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    main()
