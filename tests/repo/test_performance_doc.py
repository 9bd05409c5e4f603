"""docs/performance.md's tables are its results files' figures, and nothing else.

Each table of figures on the page follows a comment that names its renderer here and the
results file it reads (``<!-- full_run: bench/results/latest.json -->``). The test renders
every table again from its file and compares it with the page, so a figure on the page
cannot drift from the data it came from. After a new run,
``python -m tests.repo.test_performance_doc --write`` puts the new tables on the page.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "performance.md"
_MARK = re.compile(r"^<!-- ([a-z_]+): (bench/results/\S+) -->\n\n((?:\|.*\n)*)", re.M)


def _load(path: Path) -> Any:
    return json.loads(path.read_text())


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _ratio(ours: Any, upstream: Any) -> str:
    numbers = all(isinstance(v, (int, float)) for v in (ours, upstream))
    return f"{ours / upstream:.2f}" if numbers and upstream else "-"


def _by_impl(rows: list[dict[str, Any]]) -> tuple[list[int], dict[tuple[str, int], Any]]:
    return (sorted({r["nodes"] for r in rows if not r.get("not_run")}),
            {(r["impl"], r["nodes"]): r for r in rows if not r.get("not_run")})


_FULL_RUN = (("first correct write, s", "sync_seconds", ".2f"),
             ("API server CPU to it, s", "sync_apiserver_cpu_seconds", ".2f"),
             ("CPU a steady poll, ms", "poll_cpu_ms", ".3f"),
             ("requests a poll", "requests_per_poll", ".2f"),
             ("peak RSS, MiB", "peak_rss_mib", ".1f"),
             ("steady RSS, MiB", "steady_rss_mib", ".1f"),
             ("churn updates/s", "churn_updates_per_second", ".0f"),
             ("churn CPU %", "churn_cpu_percent", ".2f"))


def full_run(path: Path) -> str:
    """bench.run's rows, ours and upstream side by side, with the run's ratios
    (``latest-meta.json``, as ``latest.md`` prints them)."""
    sizes, by = _by_impl(_load(path))
    meta = _load(path.with_name(f"{path.stem}-meta.json"))
    ratios = {r["nodes"]: r for r in meta.get("ratios", [])}
    body = []
    for n in sizes:
        for impl, first in (("ours", f"{n:,}"), ("upstream", "")):
            if (impl, n) in by:
                row = by[(impl, n)]
                body.append([first, impl, *(_fmt(row.get(k), s) for _, k, s in _FULL_RUN)])
        if n in ratios:
            body.append(["", "ours / upstream",
                         *(_fmt(ratios[n].get(k), ".2f") for _, k, _s in _FULL_RUN)])
    return _table([f"Nodes (run of {meta['started'][:10]})", "",
                   *(label for label, _, _s in _FULL_RUN)], body)


def _median_p90(row: Any) -> str:
    if not isinstance(row, dict) or row.get("reaction_median_seconds") is None:
        return "-"
    return f"{row['reaction_median_seconds']:.2f} / {row['reaction_p90_seconds']:.2f}"


def reaction(path: Path) -> str:
    """The reaction of bench.run's rows: without the flag, both; with it, ours."""
    sizes, by = _by_impl(_load(path))
    body = []
    for n in sizes:
        ours = by.get(("ours", n), {})
        body.append([f"{n:,}", str(ours.get("reaction_batch", "-")), _median_p90(ours),
                     _median_p90(by.get(("upstream", n))), _median_p90(ours.get("react"))])
    return _table(["Nodes", "Nodes a batch", "ours: median / p90, s", "upstream",
                   "ours with `--react-to-node-changes`"], body)


def pollcost(path: Path) -> str:
    """bench.pollcost: one version of ours against upstream, interleaved."""
    data = _load(path)
    ours = next(v for name, v in data["variants"].items() if name != "upstream")
    upstream = data["variants"]["upstream"]
    rows = ((f"CPU a poll, ms (schedstat, median of {data['rounds']} interleaved rounds)",
             "cpu_ms_per_poll_median", ".3f"),)
    body = [[label, _fmt(ours[k], s), _fmt(upstream[k], s), _ratio(ours[k], upstream[k])]
            for label, k, s in rows]
    ours_i, up_i = (v.get("callgrind", {}).get("instructions_per_poll")
                    for v in (ours, upstream))
    body.append(["instructions a poll (callgrind)", _fmt(ours_i, ","), _fmt(up_i, ","),
                 _ratio(ours_i, up_i)])
    return _table([f"{data['nodes']:,} Nodes", "ours", "upstream", "ours / upstream"], body)


_CONTAINER = (("image, gzip layers (what a node pulls), MiB", "compressed_mib", ".1f"),
              ("image, unpacked, MiB", "uncompressed_mib", ".1f"),
              ("start to first correct write, median of the runs, s",
               "start_to_first_write_s_median", ".2f"),
              ("the same, warm (the runs after the first), s",
               "warm_start_to_first_write_s_median", ".2f"),
              ("the same, cold (each the first run after a pull), s",
               "cold_start_to_first_write_s_median", ".2f"),
              ("RSS, median, MiB", "rss_mib_median", ".1f"),
              ("peak RSS (VmHWM), MiB", "peak_rss_mib_max", ".1f"))


def container(path: Path) -> str:
    """bench.container: our image against upstream's binary in a scratch image."""
    data = _load(path)
    ours, upstream = data["images"]["ours"], data["images"]["upstream"]
    body = [[label, _fmt(ours.get(k), s), _fmt(upstream.get(k), s),
             _ratio(ours.get(k), upstream.get(k))] for label, k, s in _CONTAINER]
    head = f"{data['nodes']:,} Nodes, {data['starts']} runs and {data['cold_starts']} pulls"
    return _table([head, "ours", "upstream", "ours / upstream"], body)


def load_scrape(path: Path) -> str:
    """bench.load: what a scrape of the target's Pods costs."""
    body = []
    for s in _load(path)["scrape"]:
        cpu, wall = s["cpu_ms_per_scrape"], s["wall_ms_per_scrape"]
        body.append([str(s["pods"]), f"{cpu['median']:.2f} / {cpu['p90']:.2f}",
                     f"{s['cpu_ms_pod_list']:.2f}", f"{s['cpu_ms_per_pod']:.2f}",
                     f"{wall['median']:.1f} / {wall['p90']:.1f}",
                     f"{s['cpu_ms_per_poll']:.1f} ({s['scrapes_per_poll']:.0f} scrapes)"])
    return _table(["Pods", "CPU a scrape, median / p90, ms", "of which the Pod list, ms",
                   "CPU a Pod, ms", "wall a scrape, median / p90, ms",
                   "CPU a poll with its scrapes, ms"], body)


def load_reaction(path: Path) -> str:
    """bench.load: the real daemon's answer to a step in the load."""
    data = _load(path)["reaction"]
    body = []
    for label, key in (("step -> first scale-up written", "first_write_seconds"),
                       ("step -> the full count written", "full_write_seconds")):
        t = data[key]
        body.append([label, f"{t['median']:.2f}", f"{t['p90']:.2f}",
                     f"{t['min']:.2f} / {t['max']:.2f}"])
    return _table([f"{data['trials']} trials, s", "median", "p90", "min / max"], body)


def placement(path: Path) -> str:
    """bench.placement: targetPlacement's cost in process."""
    d = _load(path)
    body = [["CPU a poll (placement unchanged), µs", f"{d['poll_cpu_us_without_key']:.1f}",
             f"{d['poll_cpu_us_with_key_unchanged']:.1f}"],
            ["a changed placement (one pass over the Nodes), ms", "-",
             f"{d['changed_placement_pass_ms']:.0f}"],
            ["a watch event that changes a Node's record, µs",
             f"{d['changed_node_event_us_no_placement']:.1f}",
             f"{d['changed_node_event_us_one_placement']:.1f}"],
            ["the node store's records, MiB", f"{d['store_mib_default']:.1f}",
             f"{d['store_mib_every_label']:.1f}"]]
    return _table([f"{d['nodes']:,} Nodes", "without the key", "with `targetPlacement`"], body)


def _churn_rates(run: dict[str, Any]) -> str:
    churn = run.get("churn") or {}
    return (f"{churn['creates_per_second']:.0f} / {churn['deletes_per_second']:.0f}"
            if churn else "-")


def _count_right(run: dict[str, Any]) -> str:
    right = (run.get("churn") or {}).get("count_right")
    return "-" if right is None else "yes" if right else "no"


def objects(path: Path) -> str:
    """bench.objects: the daemon without and with the Pods and Services axes."""
    d = _load(path)
    sides = (d["without_axes"], d["with_axes"])

    def row(label: str, cell: Callable[[dict[str, Any]], str]) -> list[str]:
        return [label, *(cell(side) for side in sides)]

    def churn(key: str, spec: str) -> Callable[[dict[str, Any]], str]:
        return lambda side: _fmt((side.get("churn") or {}).get(key), spec)

    body = [row("first correct write, s", lambda s: f"{s['first_correct_write_seconds']:.2f}"),
            row("API server CPU to it, s", lambda s: f"{s['apiserver_sync_cpu_seconds']:.2f}"),
            row("peak RSS / in the churn, MiB",
                lambda s: f"{s['peak_rss_mib']:.1f} / " + churn("peak_rss_mib", ".1f")(s)),
            row("CPU a steady poll, ms", lambda s: f"{s['cpu_ms_per_poll']:.1f}"),
            row("churn: created / deleted a second", _churn_rates),
            row("churn: CPU %, ours / API server",
                lambda s: churn("daemon_cpu_percent", ".1f")(s) + " / "
                + churn("apiserver_cpu_percent", ".0f")(s)),
            row("churn: count right after", _count_right)]
    return _table([f"{d['pods']:,} Pods, {d['services']:,} Services", "without the axes",
                   "with them"], body)


def _p99_in_spike(run: dict[str, Any], jump: int, end: int) -> str:
    values = [w["p99_ms"] for w in run["windows"]
              if jump <= w["start"] < end and w["p99_ms"] is not None]
    return f"{max(values):.0f}" if values else "-"


_DNS_SETUPS = {"upstream": "(a) upstream v1.10.3", "ours": "(b) ours",
               "ours_load": "(c) ours, `load` key", "hpa": "(d) HPA, CPU 50 %"}


def dns_spike(path: Path) -> str:
    """bench.dns: the spike profile's four runs, one row each."""
    doc = _load(path)
    prof = doc["profiles"]["spike"]
    jump, end = prof["jump"], prof["jump"] + prof["phases"][1][0]
    body = []
    for key, run in prof["runs"].items():
        body.append([_DNS_SETUPS.get(key, key), f"{run['sent']:,}",
                     f"{run['lost']:,} ({run['lost_percent']:.1f} %)", f"{run['late']:,}",
                     _p99_in_spike(run, jump, end), f"{run['replica_seconds']:.0f}",
                     str(run["peak_replicas"]), _fmt(run["capacity_seconds"], "d")])
    return _table([f"base {doc['base_qps']:,}/s", "sent", "lost", "late",
                   "p99, worst 10 s, ms", "replica-seconds", "peak", "to capacity, s"], body)


RENDERERS: dict[str, Callable[[Path], str]] = {
    f.__name__: f for f in (full_run, reaction, pollcost, container, load_scrape,
                            load_reaction, placement, objects, dns_spike)}


def rendered(text: str) -> str:
    """The page with every marked table rendered again from its file."""
    return _MARK.sub(lambda m: f"<!-- {m[1]}: {m[2]} -->\n\n" + RENDERERS[m[1]](REPO / m[2]),
                     text)


def test_each_table_is_its_results_files_figures() -> None:
    text = PAGE.read_text()
    marks = _MARK.findall(text)
    assert sorted(name for name, _, _t in marks) == sorted(RENDERERS), \
        "each renderer renders one table of the page"
    for name, source, table in marks:
        expected = RENDERERS[name](REPO / source)
        assert table == expected, (
            f"docs/performance.md's {name} table is not {source}'s figures; "
            f"`python -m tests.repo.test_performance_doc --write` renders it:\n{expected}")


def test_a_changed_figure_changes_the_table(tmp_path: Path) -> None:
    for name in ("latest.json", "latest-meta.json"):
        shutil.copy(REPO / "bench" / "results" / name, tmp_path / name)
    rows = _load(tmp_path / "latest.json")
    before = full_run(tmp_path / "latest.json")
    next(r for r in rows if r["impl"] == "ours")["poll_cpu_ms"] = 9.876
    (tmp_path / "latest.json").write_text(json.dumps(rows))
    after = full_run(tmp_path / "latest.json")
    assert "9.876" in after and "9.876" not in before
    assert before in PAGE.read_text() and after not in PAGE.read_text()


def main(argv: Sequence[str]) -> int:
    page = rendered(PAGE.read_text())
    if "--write" in argv:
        PAGE.write_text(page)
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
