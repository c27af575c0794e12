"""Print the sizes n, m_eq, m_ineq, k of the paper's problems, ours beside the paper's."""

from hardlinear.problems import PAPER_SIZES, build_problem


def main() -> None:
    header = f"{'problem':<11} {'form':<10} {'ours n/m_eq/m_ineq/k':<24} {'paper':<24} match"
    print(header)
    print("-" * len(header))
    for name, paper in PAPER_SIZES.items():
        for form in ("standard", "inequality"):
            p = build_problem(name, form=form)
            ours = (p.n, p.m_eq, p.m_ineq, p.k)
            fmt = "/".join(map(str, ours))
            paper_fmt = "/".join(map(str, paper)) if form == "standard" else "-"
            match = ("yes" if ours == paper else "NO") if form == "standard" else ""
            print(f"{name:<11} {form:<10} {fmt:<24} {paper_fmt:<24} {match}")


if __name__ == "__main__":
    main()
