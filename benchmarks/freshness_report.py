"""The freshness benchmark's numbers: percentiles, its tables on stdout and its figures (benchmarks/freshness.py)."""
from __future__ import annotations

from benchmarks.common import RESULTS


def percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p95": None, "p99": None, "max": None, "n": 0}
    v = sorted(values)
    pick = lambda q: round(v[min(len(v) - 1, int(q * len(v)))], 3)  # noqa: E731
    return {"p50": pick(0.50), "p95": pick(0.95), "p99": pick(0.99), "max": round(v[-1], 3), "n": len(v)}


def histogram_percentiles(before: dict, after: dict) -> dict[str, float | None]:
    """Percentiles from the bucket counts added between two scrapes (linear inside a bucket)."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0) for b in bounds]
    total = counts[-1] if counts else 0
    if not total:
        return {"p50": None, "p95": None, "p99": None, "n": 0}
    out: dict[str, float | None] = {"n": int(total)}
    for name, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
        want, prev_b, prev_c = q * total, 0.0, 0.0
        for b, c in zip(bounds, counts):
            if c >= want:
                out[name] = round(prev_b + (b - prev_b) * (want - prev_c) / max(c - prev_c, 1e-9), 3) \
                    if b != float("inf") else prev_b
                break
            prev_b, prev_c = b, c
    return out


def print_tables(result: dict) -> None:
    """Latency per commit rate, a column per source; then the replay rates: sources vs plain consumer."""
    sources = result["sources"]
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    cells = {}
    for source in sources:
        for p in result["by_source"][source]["phases"]:
            c, se = p["outside"]["cache"], p["outside"]["search"]
            cells[(p["rate"], source)] = (f"{fmt(c['p50'])}/{fmt(c['p99'])}  {fmt(se['p99'])}  "
                                          f"{p['pipeline_vs_debezium'] or 0:.3f}x {'ok' if p['keeps_up'] else 'LAG'}")
    width = max([len(v) for v in cells.values()] + [32])
    print()
    print("commit to visible, outside (s): Redis p50/p99  index p99  pipeline/Debezium  lag back to 0")
    print(f"{'commits/s':>10}  " + "  ".join(f"{s + ' source':<{width}}" for s in sources))
    for rate in result["rates"]:
        print(f"{rate:>10,}  " + "  ".join(f"{cells.get((rate, s), '-'):<{width}}" for s in sources))
    t = result["throughput"]["redis"]
    print()
    print(f"replay of the run's topic into Redis ({t['records']:,} records), events/s:")
    print("".join(f"{s + ' source':>16}" for s in sources) + f"{'plain consumer':>16}")
    print("".join(f"{t[f'{s}_events_per_s']:>16,}" for s in sources) + f"{t['plain_events_per_s']:>16,}")
    print("".join(f"{t[f'{s}_vs_plain']:>15.2f}x" for s in sources) + f"{'1.00x':>16}", flush=True)


def plot(result: dict, name: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sources = result["sources"]
    dash = {"python": "-", "jvm": "--"}
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for source in sources:
        phases = result["by_source"][source]["phases"]
        rates = [p["rate"] for p in phases]
        for store, marker, color in (("cache", "o", "#d62728"), ("search", "s", "#1f77b4")):
            for q, alpha in (("p50", 1.0), ("p99", 0.45)):
                ax.plot(rates, [p["outside"][store][q] for p in phases], dash[source] + marker, color=color,
                        alpha=alpha, mfc=color if source == "python" else "white",
                        label=f"{source} source: {store} {q}")
    ax.set_xlabel("commits/s")
    ax.set_ylabel("commit to visible (s)")
    ax.set_title(f"Freshness by commit rate (trigger {result['trigger']})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(RESULTS / f"{name}_latency.png", dpi=110)

    fig, ax = plt.subplots(figsize=(7, 4))
    for source in sources:
        trace = result["by_source"][source]["lag_trace"]
        for rate in result["rates"]:
            pts = [t for t in trace if t["rate"] == rate]
            ax.plot([t["t"] for t in pts], [t["lag"] for t in pts], dash[source], label=f"{source}: {rate} commits/s")
    ax.set_xlabel("seconds since the first phase")
    ax.set_ylabel("records behind the topic end")
    ax.set_title("Pipeline lag over time")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / f"{name}_lag.png", dpi=110)

    fig, ax = plt.subplots(figsize=(6, 4))
    t = result["throughput"]["redis"]
    labels = [f"Spark, {s} source" for s in sources] + ["plain consumer"]
    values = [t[f"{s}_events_per_s"] for s in sources] + [t["plain_events_per_s"]]
    colors = {"python": "#e25a1c", "jvm": "#3c78b4"}
    ax.bar(labels, values, color=[colors[s] for s in sources] + ["#888"])
    ax.set_ylabel("events/s into Redis")
    ax.set_title("Replay of the run's topic: " + ", ".join(f"{s}/plain {t[f'{s}_vs_plain']:.2f}x" for s in sources))
    fig.tight_layout()
    fig.savefig(RESULTS / f"{name}_throughput.png", dpi=110)
    print(f"wrote {RESULTS}/{name}_*.png")
