"""A series' identity on a Pod's page, and what a counter's return, a restart or a bad
value do to the rate: no false surge from the Pods source (issue 47)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from random import Random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa.horizontal.decide.load import Load
from cpa.horizontal.decide.windows import PanicState, read_windows, scale
from cpa.horizontal.scrape.exposition import ExpositionError, Family, parse_family, series_key
from cpa.horizontal.scrape.pages import Answer, PodPages, Request
from cpa.horizontal.scrape.rates import CounterBook, PodRate, answers_needed, estimate
from cpa.horizontal.scrape.scraper import Scraper
from cpa.tools.explain import measured_step
from tests.fakes import FakeApi


@pytest.mark.parametrize(("one", "other"), [
    ('a="1",b="2"', 'b="2",a="1"'),  # another order
    ('a="1",b="2"', ' b = "2" , a="1",'),  # other spacing, a trailing comma
    ('a="1",b=""', 'a="1"'),  # an empty value is no label
    ('a="x\\"y"', 'a="x\\"y"'),
    ('a="x\\ty"', 'a="x\\\\ty"'),  # an unknown escape is the backslash it was written with
    ('a="line\\nnext"', 'a="line\\nnext"'),
])
def test_the_same_series(one: str, other: str) -> None:
    assert series_key(one) == series_key(other)


@pytest.mark.parametrize(("one", "other"), [
    ('a="1"', 'a="2"'),
    ('a="1"', 'b="1"'),
    ('a="x\\\\"', 'a="x"'),  # an escaped backslash is a character of the value
    ('a="1,b=2"', 'a="1",b="2"'),  # a comma inside a value
])
def test_other_series(one: str, other: str) -> None:
    assert series_key(one) != series_key(other)


def test_a_label_twice_is_not_the_text_format() -> None:
    with pytest.raises(ExpositionError, match="twice"):
        parse_family('m{a="1",a="2"} 3\n', "m")


def test_a_page_with_its_labels_in_another_order_has_the_same_series() -> None:
    one = parse_family('# TYPE m counter\nm{zone=".",type="A"} 5\nm{type="AAAA"} 1\n', "m")
    other = parse_family('# TYPE m counter\nm{type="AAAA"} 2\nm{ type="A",zone="."} 6\n',
                         "m")
    assert set(one.series) == set(other.series) == {'type="A",zone="."', 'type="AAAA"'}


_names = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,6}", fullmatch=True)
_values = st.text(st.sampled_from('ab1 ,="\\\n{}'), max_size=6)


def _written(labels: dict[str, str], order: list[int], spaces: list[bool]) -> str:
    """One way of writing the label set: the given order, spacing, escapes."""
    items = list(labels.items())
    parts = []
    for i, at in enumerate(order):
        name, value = items[at]
        text = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        gap = " " if spaces[i % len(spaces)] else ""
        parts.append(f'{gap}{name}{gap}={gap}"{text}"{gap}')
    return ",".join(parts)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_names, _values, max_size=5), st.randoms(use_true_random=False),
       st.lists(st.booleans(), min_size=1, max_size=4))
def test_identity_is_the_label_set(labels: dict[str, str], random: Random,
                                   spaces: list[bool]) -> None:
    order = list(range(len(labels)))
    random.shuffle(order)
    key = series_key(_written(labels, list(range(len(labels))), [False]))
    assert series_key(_written(labels, order, spaces)) == key
    # The key is itself a way of writing the set (empty values left out): it reads back.
    assert series_key(key) == key
    kept = {n: v for n, v in labels.items() if v}
    for name in kept:  # another value of any label is another series
        changed = dict(kept, **{name: kept[name] + "x"})
        assert series_key(_written(changed, list(range(len(changed))), [False])) != key


# --- one Pod's counters: what a series' return, a restart or a bad value give -------------

A = 'proto="udp",type="A"'
AAAA = 'proto="udp",type="AAAA"'


def page(values: dict[str, float], start: float | None = 100.0, kind: str = "counter",
         reverse: bool = False) -> Family:
    """The metric on a page, written as an exporter would (labels reversed on request)."""
    lines = [f"# TYPE m_total {kind}"]
    if start is not None:
        lines.append(f"process_start_time_seconds {start}")
    for labels, value in values.items():
        pairs = labels.split(",")
        text = ",".join(reversed(pairs) if reverse else pairs)
        lines.append(f"m_total{{{text}}} {value!r}".replace("nan", "NaN")
                     .replace("inf", "+Inf").replace("-+Inf", "-Inf"))
    return parse_family("\n".join(lines) + "\n", "m_total")


M = 1e6  # a counter a long-running process has counted up to
# (time, page) after a first page {A: M, AAAA: M} at 0.0 with start 100; the true rate is
# 10/s on each series (20/s on the Pod).
SCENARIOS: list[tuple[str, list[tuple[float, Family]], list[PodRate]]] = [
    ("labels in another order", [
        (0.5, page({A: M + 5, AAAA: M + 5}, reverse=True)),
        (1.0, page({A: M + 10, AAAA: M + 10}))],
     [PodRate(20.0), PodRate(20.0)]),
    ("a series missing for a scrape, then back", [
        (0.5, page({A: M + 5})),
        (1.0, page({A: M + 10, AAAA: M + 10})),
        (1.5, page({A: M + 15, AAAA: M + 15}))],
     [PodRate(10.0), PodRate(20.0), PodRate(20.0)]),
    ("a series missing for three scrapes, back over its own gap", [
        (0.5, page({A: M + 5})), (1.0, page({A: M + 10})), (1.5, page({A: M + 15})),
        (2.0, page({A: M + 20, AAAA: M + 20}))],
     [PodRate(10.0), PodRate(10.0), PodRate(10.0), PodRate(20.0)]),
    ("every series missing for a scrape (missing_metric), then back", [
        (0.5, page({})), (1.0, page({A: M + 10, AAAA: M + 10}))],
     [PodRate(None, "missing_metric"), PodRate(20.0)]),
    ("a series back lower in the same process: deleted and made again, a reset", [
        (0.5, page({A: M + 5})), (1.0, page({A: M + 10, AAAA: 5.0}))],
     [PodRate(10.0), PodRate(10.0 + 5.0)]),
    ("a series lower than a scrape ago in the same process: backwards", [
        (0.5, page({A: M + 5, AAAA: 3.0}))],
     [PodRate(None, "counter_backwards")]),
    ("the process restarted (a new start time): a reset, counted from 0", [
        (0.5, page({A: 4.0, AAAA: 4.0}, start=200.0)),
        (1.0, page({A: 9.0, AAAA: 9.0}, start=200.0))],
     [PodRate(16.0), PodRate(20.0)]),
    ("restarted and already past the old value: still counted from 0", [
        (0.5, page({A: M + 2, AAAA: 4.0}, start=200.0))],
     [PodRate((M + 2 + 4.0) / 0.5)]),
    ("a new series: no rate until its second sample", [
        (0.5, page({A: M + 5, AAAA: M + 5, 'type="MX"': 7.0})),
        (1.0, page({A: M + 10, AAAA: M + 10, 'type="MX"': 12.0}))],
     [PodRate(20.0), PodRate(30.0)]),
    ("NaN: the Pod's fault, its memory kept", [
        (0.5, page({A: math.nan, AAAA: M + 5})), (1.0, page({A: M + 10, AAAA: M + 10}))],
     [PodRate(None, "not_finite"), PodRate(20.0)]),
    ("+Inf", [(0.5, page({A: math.inf, AAAA: M + 5}))], [PodRate(None, "not_finite")]),
    ("a negative counter", [(0.5, page({A: -1.0, AAAA: M + 5}))],
     [PodRate(None, "negative")]),
    ("gauges: taken as they are", [(0.5, page({A: 3.0, AAAA: 4.0}, kind="gauge"))],
     [PodRate(7.0)]),
    ("a negative gauge", [(0.5, page({A: -1e6, AAAA: 4.0}, kind="gauge"))],
     [PodRate(None, "negative")]),
    ("gauges adding up past a float", [(0.5, page({A: 1e308, AAAA: 1e308}, kind="gauge"))],
     [PodRate(None, "overflow")]),
    ("a gauge at -Inf", [(0.5, page({A: -math.inf}, kind="gauge"))],
     [PodRate(None, "not_finite")]),
]


@pytest.mark.parametrize(("pages", "expected"), [(p, e) for _n, p, e in SCENARIOS],
                         ids=[n for n, _p, _e in SCENARIOS])
def test_one_pod(pages: list[tuple[float, Family]], expected: list[PodRate]) -> None:
    book = CounterBook(horizon=60.0)
    assert book.observe("p", 0.0, page({A: M, AAAA: M})) == PodRate(None)  # the first page
    got = [book.observe("p", at, family) for at, family in pages]
    assert got == expected


def test_a_series_gone_longer_than_the_horizon_is_new_when_back() -> None:
    book = CounterBook(horizon=2.0)
    book.observe("p", 0.0, page({A: M, AAAA: M}))
    for at in (1.0, 2.0, 3.0):
        assert book.observe("p", at, page({A: M + 10 * at})).rate == 10.0
    # AAAA was last read at 0.0, more than the horizon ago: a first sample, no rate.
    assert book.observe("p", 4.0, page({A: M + 40, AAAA: M + 40})).rate == 10.0
    assert book.observe("p", 5.0, page({A: M + 50, AAAA: M + 50})).rate == 20.0


def test_without_a_start_time_a_decrease_is_a_reset() -> None:
    book = CounterBook()
    book.observe("p", 0.0, page({A: M}, start=None))
    assert book.observe("p", 1.0, page({A: 4.0}, start=None)).rate == 4.0


def test_answers_needed_is_knatives_sample_size_and_at_least_half() -> None:
    # Knative's populationMeanSampleSize for 1-10, 20, 100, 1000 Pods: 1 2 3 4 4 5 6 6 6 7,
    # 9, 14, 16; half of the Ready Pods from 20 on.
    assert [answers_needed(n) for n in range(0, 11)] == [0, 1, 2, 3, 4, 4, 5, 6, 6, 6, 7]
    assert [answers_needed(n) for n in (16, 19, 20, 100, 1000)] == [9, 10, 10, 50, 500]


@pytest.mark.parametrize(("rates", "ready", "expected"), [
    ([10.0] * 20, 20, 200.0),
    ([10.0] * 10, 20, 200.0),  # half of them: the mean times 20
    ([10.0] * 9, 20, None),  # fewer than half (Knative's 9 would do)
    ([1e6], 20, None),  # 1 of 20 answering: no longer x20
    ([10.0, 20.0, 30.0], 3, 60.0),
    ([10.0, 20.0], 3, None),  # up to 3 Ready Pods, Knative needs them all
    ([1e308, 1e308], 2, None),  # Pods' rates adding up past a float: no estimate
])
def test_the_estimate_needs_enough_pods(rates: list[float], ready: int,
                                        expected: float | None) -> None:
    assert estimate(rates, ready) == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(0, 1e12), min_size=1, max_size=40), st.integers(0, 60))
def test_the_estimate_is_at_most_twice_what_the_answering_pods_gave(
        rates: list[float], more: int) -> None:
    ready = len(rates) + more
    got = estimate(rates, ready)
    if got is None:
        assert len(rates) < answers_needed(ready)
        return
    assert len(rates) >= answers_needed(ready) >= (ready + 1) // 2
    assert got <= 2 * math.fsum(rates) * (1 + 1e-12)
    assert got >= math.fsum(rates) * (1 - 1e-12)


# --- the scraper: one Pod's fault is the Pod's, too few answers no estimate ---------------

SCALE = "/apis/apps/v1/namespaces/kube-system/deployments/coredns/scale"
PODS = "/api/v1/namespaces/kube-system/pods"


class FakePods:
    """Ready Pods on a fake API, their pages served by a stand-in for
    :meth:`PodPages.fetch_all` (no sockets in a unit test): each
    Pod's page is what ``pages[name]`` gives at the clock's time (None: a timeout)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, count: int) -> None:
        self.now = 0.0
        self.pages: dict[str, Callable[[float], str | None]] = {}
        self.api = FakeApi()
        self.api.objects[SCALE] = {"status": {"selector": "k8s-app=kube-dns",
                                              "replicas": count}}
        self.ready(count)
        monkeypatch.setattr(PodPages, "fetch_all", self._fetch)

    def ready(self, count: int) -> None:
        """Pods p0 to p<count-1> are the Ready ones."""
        self.api.objects[PODS] = {"items": [{
            "metadata": {"name": f"p{i}", "uid": f"u{i}"},
            "status": {"phase": "Running", "podIP": f"10.0.0.{i}",
                       "conditions": [{"type": "Ready", "status": "True"}]}}
            for i in range(count)]}

    def _fetch(self, requests: Sequence[Request], _concurrency: int, _timeout: float,
               _max_bytes: int = 0) -> list[Answer]:
        answers = []
        for request in requests:
            text = self.pages[request.key.replace("u", "p")](self.now)
            if text is None:
                answers.append(Answer(request.key, 0, b"", "timeout after 1 s", "timeout",
                                      1.0, self.now))
            else:
                answers.append(Answer(request.key, 200, text.encode(), None, None, 0.01,
                                      self.now))
        return answers

    def scraper(self, load: Load) -> Scraper:
        return Scraper(self.api, "kube-system", SCALE, "deployment/coredns", load,
                       clock=lambda: self.now)


def counter_page(rate: float) -> Callable[[float], str | None]:
    return lambda now: (f"# TYPE m_total counter\nprocess_start_time_seconds 100\n"
                        f'm_total{{type="A"}} {1e6 + rate * now}\n')


def gauge_page(*values: str) -> Callable[[float], str | None]:
    lines = "".join(f'm{{s="{i}"}} {v}\n' for i, v in enumerate(values))
    return lambda _now: f"# TYPE m gauge\n{lines}"


@pytest.mark.parametrize(("values", "reason"), [
    (("-1e6",), "negative"),
    (("1e308", "1e308"), "overflow"),
    (("NaN",), "not_finite"),
    (("+Inf", "3"), "not_finite"),
])
def test_one_pods_bad_value_is_that_pods_fault(monkeypatch: pytest.MonkeyPatch,
                                               values: tuple[str, ...], reason: str) -> None:
    pods = FakePods(monkeypatch, 6)  # six Ready Pods: Knative's sample is five
    for i in range(6):
        pods.pages[f"p{i}"] = gauge_page("10")
    pods.pages["p5"] = gauge_page(*values)
    scraper = pods.scraper(Load(100, metric="m", port=9153))
    sample = scraper.scrape_once()
    status = scraper.status()
    # The others' mean times the six Ready Pods: 60/s, as if p5 served what they do.
    assert sample is not None and sample.rate == 60.0, status
    assert (status.answered, status.ready, status.errors) == (5, 6, {reason: 1})
    assert status.left_out == (("p5", reason),)
    # cpa explain --from-cluster says which Pod the measuring scrape left out, and why.
    assert measured_step(status).text == (
        f"Measured now: 5 of 6 Ready Pods gave a rate; left out: p5 ({reason}).")


def test_one_of_twenty_answering_is_no_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    pods = FakePods(monkeypatch, 20)
    for i in range(20):
        pods.pages[f"p{i}"] = counter_page(10.0)
    scraper = pods.scraper(Load(100, metric="m_total", port=9153))
    assert scraper.scrape_once() is None  # the first scrape: every counter needs two
    assert scraper.status().fault_reason == "warming"
    pods.now = 0.5
    sample = scraper.scrape_once()
    assert sample is not None and sample.rate == pytest.approx(200.0)
    for i in range(1, 20):
        pods.pages[f"p{i}"] = lambda _now: None  # 19 time out
    pods.now = 1.0
    assert scraper.scrape_once() is None  # before: p0's 10/s times 20
    status = scraper.status()
    assert status.fault_reason == "too_few_pods"
    assert status.fault is not None and "1 of 20 Ready Pods" in status.fault
    assert "fewer than the 10 an estimate needs: 19 timeout" in status.fault
    assert status.errors == {"timeout": 19, "too_few_pods": 1}
    assert [s.rate for s in status.samples] == [pytest.approx(200.0)]  # a gap, no sample
    for i in range(1, 20):
        pods.pages[f"p{i}"] = counter_page(10.0)
    pods.now = 1.5  # back: their series go on from their last value, over their gap
    sample = scraper.scrape_once()
    assert sample is not None and sample.rate == pytest.approx(200.0)
    assert scraper.status().fault is None


def test_new_pods_short_of_the_floor_are_warming_not_a_fault(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pods = FakePods(monkeypatch, 2)
    for i in range(2):
        pods.pages[f"p{i}"] = counter_page(10.0)
    scraper = pods.scraper(Load(100, metric="m_total", port=9153))
    scraper.scrape_once()
    pods.now = 0.5
    assert scraper.scrape_once() is not None
    # Scaled to 20: 18 new Pods, whose counters need a second scrape. The two old ones
    # (which carried all the load so far) times 20 would be a false surge: no estimate.
    pods.ready(20)
    for i in range(2, 20):
        pods.pages[f"p{i}"] = counter_page(0.0)
    pods.now = 1.0
    assert scraper.scrape_once() is None
    status = scraper.status()
    assert (status.fault_reason, status.answered, status.errors) == ("warming", 2, {})
    assert status.fault == ("2 of 20 Ready Pods of deployment/coredns gave a rate, fewer "
                            "than the 10 an estimate needs; 18 are new (a rate from their "
                            "second scrape)")
    pods.now = 1.5
    sample = scraper.scrape_once()
    assert sample is not None and sample.rate == pytest.approx(20.0)


# --- from the pages to the replicas the load axis asks for --------------------------------


class CoreDnsPod:
    """A Pod's page: a counter from a million at 10/s, split over two series as CoreDNS's
    is, that can leave a series out, write its labels in another order, or restart."""

    def __init__(self) -> None:
        self.zero, self.base, self.start = 0.0, 1e6, 100.0
        self.hidden: set[str] = set()
        self.reverse = False

    def restart(self, at: float) -> None:
        self.zero, self.base, self.start = at, 0.0, self.start + 50.0

    def __call__(self, now: float) -> str:
        value = self.base + 10.0 * (now - self.zero)
        lines = ["# TYPE m_total counter", f"process_start_time_seconds {self.start}"]
        for kind, share in (("A", 0.75), ("AAAA", 0.25)):
            if kind in self.hidden:
                continue
            labels = ['server="dns://:53"', f'type="{kind}"', 'zone="."']
            text = ",".join(reversed(labels) if self.reverse else labels)
            lines.append(f"m_total{{{text}}} {value * share!r}")
        return "\n".join(lines) + "\n"


CHANGES: dict[str, Callable[[CoreDnsPod, float], None]] = {
    "a series left out": lambda pod, _at: pod.hidden.add("AAAA"),
    "labels in another order": lambda pod, _at: setattr(pod, "reverse", True),
    "a restart": lambda pod, at: pod.restart(at - 0.2),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_one_pods_page_changing_for_a_scrape_asks_for_no_more_replicas(
        monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    """Three Pods at 10/s (30/s at 100 per replica: 1 replica); at one scrape one Pod's
    page changes, and goes back at the next (a restart stays). Before, the series taken
    for new counted a million at once: thousands of replicas, written at max."""
    pods = FakePods(monkeypatch, 3)
    pages = [CoreDnsPod() for _ in range(3)]
    for i, made in enumerate(pages):
        pods.pages[f"p{i}"] = made
    load = Load(100, metric="m_total", port=9153, stable_window_seconds=6,
                panic_window_percentage=50, scrape_interval_seconds=0.5)
    scraper, state, asked = pods.scraper(load), PanicState(begun=True), []
    for tick in range(40):
        pods.now = tick * 0.5
        if tick == 10:
            CHANGES[change](pages[0], pods.now)
        elif tick == 11:
            pages[0].hidden.clear()
            pages[0].reverse = False
        scraper.scrape_once()
        reading = read_windows(scraper.status().samples, pods.now, load)
        if reading is not None:
            asked.append(scale(load, state, reading, pods.now).replicas)
    assert len(asked) == 39 and set(asked) == {1}, asked


_EVENTS = st.sampled_from(["ok", "ok", "ok", "hide", "reorder", "restart", "fail", "nan"])


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 8), st.lists(st.floats(0.0, 1e4), min_size=1, max_size=3),
       st.lists(st.lists(_EVENTS, min_size=8, max_size=8), min_size=1, max_size=25),
       st.floats(0.05, 0.95))
def test_no_page_event_makes_the_estimate_exceed_the_true_rate(
        ready: int, rates: list[float], scrapes: list[list[str]], restart_at: float) -> None:
    """Every Pod counts the same rates from a million; at each scrape each Pod's page may
    leave a series out, write its labels in another order, come from a process restarted
    since the last scrape, hold a NaN, or not come at all. The estimate never exceeds the
    true total rate, and equals it whenever every Pod's page is whole."""
    book = CounterBook()
    truth = ready * math.fsum(rates)
    zero, base, start = [0.0] * ready, [M] * ready, [100.0] * ready
    for tick, events in enumerate([["ok"] * 8, *scrapes]):
        at = tick * 0.5
        got = []
        for pod, event in enumerate(events[:ready]):
            if event == "fail":
                continue
            if event == "restart":
                zero[pod], base[pod], start[pod] = at - restart_at * 0.5, 0.0, start[pod] + 1
            values = {f'k="{k}",z="{pod}"': base[pod] + r * (at - zero[pod])
                      for k, r in enumerate(rates)}
            if event == "hide":
                values.pop(f'k="{tick % len(rates)}",z="{pod}"')
            if event == "nan":
                values[f'k="0",z="{pod}"'] = math.nan
            rate = book.observe(str(pod), at, page(values, start[pod],
                                                   reverse=event == "reorder"))
            if rate.rate is not None:
                got.append(rate.rate)
        total = estimate(got, ready)
        if total is None:
            continue
        assert total <= truth * (1 + 1e-9) + 1e-3, (tick, events)
        if tick > 0 and all(e in ("ok", "reorder") for e in events[:ready]):
            assert total == pytest.approx(truth, rel=1e-9, abs=1e-3), (tick, events)
