"""Draw the figure of docs/cosim-semantics.md: the co-simulation error against the macro step
on two coupled oscillators (tests/cosim/test_cosim_semantics.py holds the same runs to their
orders). Run: python docs/cosim_figures.py (writes docs/cosim_orders.png)."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402

from tests.cosim.test_cosim_semantics import K1, K2, KC, coupling_errors  # noqa: E402


def main() -> None:
    def rhs(t, z):
        x1, v1, x2, v2 = z
        return [v1, -(K1 + KC) * x1 + KC * x2, v2, -(K2 + KC) * x2 + KC * x1]
    exact = solve_ivp(rhs, (0, 2.0), [1.0, 0.0, 0.0, 0.0], rtol=1e-12, atol=1e-13,
                      dense_output=True).sol
    Hs = np.array([0.08, 0.04, 0.02, 0.01])
    fig, ax = plt.subplots(figsize=(6, 4))
    for scheme, style in (("jacobi", "-o"), ("gauss-seidel", "--s")):
        for e, color in zip((0, 1, 2), ("C0", "C1", "C2")):
            errs = coupling_errors(scheme, e, Hs, exact)
            slope = np.polyfit(np.log(Hs), np.log(errs), 1)[0]
            ax.loglog(Hs, errs, style, color=color, label=f"{scheme}, e={e} (slope {slope:.2f})")
    ax.set_xlabel("macro step H (s)")
    ax.set_ylabel("max |x - x_exact| over 2 s")
    ax.set_title("two coupled oscillators, units RK4 at 1 ms")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(Path(__file__).with_name("cosim_orders.png"), dpi=110)


if __name__ == "__main__":
    main()
