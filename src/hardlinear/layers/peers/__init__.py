"""The peers' correction layers, each written from its paper: DC3's completion and gradient correction
(:mod:`.dc3`), alternating projections (:mod:`.apm`), HardNet-Aff (:mod:`.hardnet`), the gauge map
(:mod:`.gauge`), the differentiable QP projection (:mod:`.qp_projection`) and the reduced-space inequalities
that HardNet and the gauge share (:mod:`.reduced`). They sit apart from the paper's layer so that what is ours
and what is a peer's reads from the layout."""
