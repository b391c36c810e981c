"""``jev calibrate``'s picture: a reliability diagram and a set-size chart, side by side, as a PNG.

Needs matplotlib (the ``plots`` extra: ``pip install -e '.[plots]'``); drawn with the
Agg backend, so no display is needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from jev_shared import SetReport
from jev_shared.calibration import Record

INSTALL_PLOTS = "pip install -e '.[plots]' from the jev checkout (matplotlib)"
BINS = 10


def have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401  # pyright: ignore[reportMissingImports]
    except ImportError:
        return False
    return True


def reliability(records: Sequence[Record], bins: int = BINS) -> list[tuple[float, float, int]]:
    """(mean top probability, accuracy, count) per bin of the top probability, empty bins left out."""
    cells: list[list[tuple[float, bool]]] = [[] for _ in range(bins)]
    for r in records:
        top = max(r.probabilities, key=r.probabilities.__getitem__)
        p = r.probabilities[top]
        cells[min(int(p * bins), bins - 1)].append((p, top == r.label))
    return [(sum(p for p, _ in c) / len(c), sum(ok for _, ok in c) / len(c), len(c)) for c in cells if c]


def write_png(path: Path, before: Sequence[Record], after: Sequence[Record], sizes: Sequence[int],
              report: SetReport, coverage: float) -> None:
    """The reliability diagram (held-out answers, before and after calibration) and the held-out set sizes."""
    if not have_matplotlib():
        raise RuntimeError(f"the PNG needs matplotlib; install it with: {INSTALL_PLOTS}")
    import matplotlib  # pyright: ignore[reportMissingImports]

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pyright: ignore[reportMissingImports]

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2), dpi=100)
    left.plot([0, 1], [0, 1], color="0.6", linestyle="--", linewidth=1, label="perfect")
    for recs, name, marker in ((before, "as answered", "o"), (after, "calibrated", "s")):
        cells = reliability(recs)
        left.plot([c[0] for c in cells], [c[1] for c in cells], marker=marker, label=name)
    left.set(xlim=(0, 1), ylim=(0, 1), xlabel="top probability (held out)", ylabel="share right",
             title="Reliability")
    left.legend(loc="upper left")
    top = max(sizes, default=0)
    counts = [sum(s == k for s in sizes) for k in range(top + 1)]
    colors = ["tab:red" if k != 1 else "tab:green" for k in range(top + 1)]
    right.bar(range(top + 1), counts, color=colors)
    right.xaxis.get_major_locator().set_params(integer=True)
    right.set(xlabel="options in the set (1: decided alone)", ylabel="held-out answers",
              title=f"Decision sets at {coverage:.0%}: coverage {report.coverage:.1%}, "
                    f"{report.decided:.0%} alone")
    fig.tight_layout()
    fig.savefig(path, format="png")  # the name as given: matplotlib adds ".png" to a name without a suffix
    plt.close(fig)
