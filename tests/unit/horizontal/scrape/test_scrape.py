"""The load axis's inputs (cpa.horizontal.scrape): the text format, counter rates and resets, the
estimate, the concurrent fetch (against small HTTP servers on loopback), the Prometheus
source. The Pod selection (cpa.kube.pods) is tests/unit/kube/test_pods.py's."""

from __future__ import annotations

import contextlib
import json
import math
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa.horizontal.decide.load import Load, Prometheus
from cpa.horizontal.scrape.exposition import ExpositionError, Family, parse_family
from cpa.horizontal.scrape.pages import PodPages, Request
from cpa.horizontal.scrape.prometheus import PrometheusClient, PrometheusError
from cpa.horizontal.scrape.rates import CounterBook, estimate
from cpa.horizontal.scrape.scraper import Scraper
from tests.fakes import FakeApi
from tests.httpserve import QuietHandler, serving

COREDNS_PAGE = """\
# HELP coredns_build_info A metric with a constant '1' value.
# TYPE coredns_build_info gauge
coredns_build_info{goversion="go1.26.8",revision="",version="1.15.0"} 1
# HELP coredns_dns_requests_total Counter of DNS requests made per zone, protocol and family.
# TYPE coredns_dns_requests_total counter
coredns_dns_requests_total{family="1",proto="udp",server="dns://:53",type="A",zone="."} 1200
coredns_dns_requests_total{family="1",proto="udp",server="dns://:53",type="AAAA",zone="."} 34
coredns_dns_requests_total{family="1",proto="tcp",server="dns://:53",type="NS",zone="."} 5e+0
coredns_dns_requests_total_other 99
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.76e+09
"""


def test_a_coredns_page() -> None:
    family = parse_family(COREDNS_PAGE, "coredns_dns_requests_total")
    assert family.counter and family.type == "counter"
    assert sorted(family.series.values()) == [5.0, 34.0, 1200.0]
    assert family.start_time == 1.76e9


@pytest.mark.parametrize(("page", "name", "values", "counter"), [
    ("m_total 3\n", "m_total", [3.0], True),  # untyped, _total: a counter
    ("m 3\n", "m", [3.0], False),  # untyped: a gauge
    ("# TYPE m gauge\nm{a=\"x\"} 1\nm{a=\"y\"} 2 1700000000000\n", "m", [1.0, 2.0], False),
    ("# TYPE m counter\nm_total 4\n", "m_total", [4.0], True),  # OpenMetrics-style TYPE
    ('m{a="q\\"}\\\\",b="}"} 7\n', "m", [7.0], False),  # escapes, } inside a value
    ("m NaN\n", "m", [math.nan], False),
    ("m +Inf\r\nm_bucket 1\n", "m", [math.inf], False),
    ("other 1\n", "m", [], False),
    ("m{} 2\n", "m", [2.0], False),
])
def test_text_format(page: str, name: str, values: list[float], counter: bool) -> None:
    family = parse_family(page, name)
    got = sorted(family.series.values())
    assert len(got) == len(values)
    pairs = zip(got, values, strict=True)
    assert all((math.isnan(a) and math.isnan(b)) or a == b for a, b in pairs)
    assert family.counter is counter


@pytest.mark.parametrize("page", [
    "<html><body>m 1</body></html>\nm oops\n",
    'm{a=1} 2\n',
    'm{a="1" b="2"} 2\n',
    "# TYPE m widget\nm 1\n",
])
def test_not_the_text_format(page: str) -> None:
    with pytest.raises(ExpositionError):
        parse_family(page, "m")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_page_parses_or_is_refused(page: str) -> None:
    with contextlib.suppress(ExpositionError):
        parse_family(page, "m")


def fam(values: dict[str, float], start: float | None = None, kind: str = "counter"
        ) -> Family:
    return Family("m_total", kind, dict(values), start)


def test_counter_rates_per_series_with_resets() -> None:
    book = CounterBook()
    assert book.observe("p", 0.0, fam({"a": 100, "b": 50})).rate is None  # first sample
    assert book.observe("p", 2.0, fam({"a": 120, "b": 60})).rate == 15.0
    # b reset (process restarted, start time unknown): its increase is its new value 4
    assert book.observe("p", 4.0, fam({"a": 130, "b": 4})).rate == (10 + 4) / 2
    # a series gone (no false reset of the sum) and a new one: no rate until its second
    assert book.observe("p", 6.0, fam({"b": 8, "c": 10})).rate == 4 / 2
    assert book.observe("p", 8.0, fam({"b": 8, "c": 14})).rate == 4 / 2


def test_a_decrease_without_a_restart_is_a_fault_and_with_one_a_reset() -> None:
    book = CounterBook()
    book.observe("p", 0.0, fam({"a": 100}, start=10.0))
    got = book.observe("p", 2.0, fam({"a": 90}, start=10.0))
    assert got.rate is None and got.fault == "counter_backwards"
    assert book.observe("p", 4.0, fam({"a": 96}, start=10.0)).rate == 3.0  # re-based
    assert book.observe("p", 6.0, fam({"a": 8}, start=55.0)).rate == 4.0  # restarted


def test_no_series_yet_is_idle_and_losing_the_metric_a_fault() -> None:
    book = CounterBook()
    assert book.observe("p", 0.0, fam({}, start=1.0)) == (None, None)  # a new Pod
    assert book.observe("p", 2.0, fam({}, start=1.0)) == (0.0, None)  # idle CoreDNS
    # its first queries: a new series, a rate from its second sample
    assert book.observe("p", 4.0, fam({"a": 6}, start=1.0)) == (None, None)
    assert book.observe("p", 5.0, fam({"a": 8}, start=1.0)).rate == 2.0
    assert book.observe("p", 6.0, fam({}, start=1.0)).fault == "missing_metric"
    assert book.observe("p", 8.0, fam({}, start=1.0)).fault == "missing_metric"
    # back with its old counters: it goes on from its last value over its own gap, never
    # counted from 0 (a false spike)
    assert book.observe("p", 10.0, fam({"a": 18}, start=1.0)).rate == 2.0
    assert book.observe("p", 12.0, fam({"a": 24}, start=1.0)).rate == 3.0
    assert book.observe("p", 14.0, fam({}, start=9.0)) == (0.0, None)  # restarted: idle


def test_faults_and_gauges() -> None:
    book = CounterBook()
    assert book.observe("p", 0.0, fam({"a": math.nan})).fault == "not_finite"
    assert book.observe("p", 0.0, fam({"a": 3, "b": 4}, kind="gauge")).rate == 7.0
    book.observe("q", 0.0, fam({"a": 1}))
    book.keep_only(["p"])
    assert book.observe("q", 2.0, fam({"a": 5})).rate is None  # forgotten: starts afresh


def test_knative_estimate() -> None:
    assert estimate([10.0, 20.0], 2) == 30.0  # everyone answered: the sum
    assert estimate([10.0, 20.0, 30.0, 40.0], 5) == 125.0  # four of five: the mean times five
    assert estimate([10.0, 20.0], 4) is None  # two of four: fewer than Knative's sample
    assert estimate([], 3) is None


# --- the fetch ---------------------------------------------------------------------------


class _Handler(QuietHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if self.path == "/slow":
            time.sleep(1.5)
        body = COREDNS_PAGE.encode()
        if self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (body[:100], body[100:]):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
            return
        if self.path == "/missing":
            self.send_error(404)
            return
        self.answer(200, body)


@pytest.fixture
def server() -> Iterator[int]:
    with serving(_Handler) as httpd:
        yield httpd.server_port


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_fetch_all(server: int) -> None:
    closed = _free_port()
    requests = [Request(f"ok{i}", "127.0.0.1", server, "/metrics") for i in range(6)]
    requests += [Request("chunked", "127.0.0.1", server, "/chunked"),
                 Request("slow", "127.0.0.1", server, "/slow"),
                 Request("404", "127.0.0.1", server, "/missing"),
                 Request("refused", "127.0.0.1", closed, "/metrics")]
    started = time.monotonic()
    pages = PodPages()
    answers = {a.key: a for a in pages.fetch_all(requests, 3, 0.5)}
    assert time.monotonic() - started < 1.4  # the slow one is cut at its deadline
    assert set(answers) == {r.key for r in requests}
    for i in range(6):
        assert answers[f"ok{i}"].error is None and answers[f"ok{i}"].body == COREDNS_PAGE.encode()
    assert answers["chunked"].body == COREDNS_PAGE.encode()
    assert answers["slow"].reason == "timeout" and "no complete answer within 0.5 s" in str(
        answers["slow"].error)
    assert answers["404"].reason == "http" and answers["404"].status == 404
    assert answers["refused"].reason == "connect" and "Connection refused" in str(
        answers["refused"].error)
    pages.close()


# --- the Prometheus source -------------------------------------------------------------------


class _PromHandler(QuietHandler):
    answers: ClassVar[dict[str, Any]] = {}
    seen: ClassVar[list[tuple[str, str | None]]] = []
    revoked: ClassVar[set[str]] = set()  # Authorization headers answered 401

    def do_GET(self) -> None:
        _PromHandler.seen.append((self.path, self.headers.get("Authorization")))
        if self.headers.get("Authorization") in _PromHandler.revoked:
            self.answer(401, b"Unauthorized", "text/plain")
            return
        path = self.path.split("?", 1)[0]
        status, doc = _PromHandler.answers.get(path, (404, {"status": "error",
                                                            "error": "no such API"}))
        self.answer(status, json.dumps(doc).encode(), "application/json")


@pytest.fixture
def prometheus() -> Iterator[str]:
    _PromHandler.seen.clear()
    _PromHandler.revoked.clear()
    with serving(_PromHandler) as httpd:
        yield f"http://127.0.0.1:{httpd.server_port}"


def _vector(*values: str) -> tuple[int, dict[str, Any]]:
    return 200, {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {}, "value": [1700000000.0, v]} for v in values]}}


def test_the_prometheus_source(prometheus: str, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    source = Prometheus(prometheus, "sum(rate(coredns_dns_requests_total[1m]))",
                        bearer_token_file=str(token))
    _PromHandler.answers = {"/api/v1/query": _vector("1234.5")}
    client = PrometheusClient(source)
    assert client.instant(2.0) == 1234.5
    path, auth = _PromHandler.seen[-1]
    assert auth == "Bearer s3cret" and "query=sum%28rate%28coredns" in path
    _PromHandler.answers = {"/api/v1/query": (200, {"status": "success", "data": {
        "resultType": "scalar", "result": [1700000000.0, "7"]}})}
    assert client.instant(2.0) == 7.0
    for answer, reason in [(_vector(), "no_result"), (_vector("1", "2"), "many_series"),
                           (_vector("NaN"), "not_finite"), (_vector("-3"), "negative"),
                           ((400, {"status": "error", "error": "parse error"}), "http")]:
        _PromHandler.answers = {"/api/v1/query": answer}
        with pytest.raises(PrometheusError) as caught:
            client.instant(2.0)
        assert caught.value.reason == reason
    with pytest.raises(PrometheusError) as down:
        PrometheusClient(Prometheus(f"http://127.0.0.1:{_free_port()}", "x")).instant(1.0)
    assert down.value.reason == "connect"
    token.unlink()  # the last good token is kept, as for the API server's
    _PromHandler.answers = {"/api/v1/query": _vector("1")}
    assert client.instant(1.0) == 1.0 and _PromHandler.seen[-1][1] == "Bearer s3cret"
    with pytest.raises(PrometheusError, match="bearerTokenFile") as never:
        PrometheusClient(source).instant(1.0)  # a file that never held a token
    assert never.value.reason == "token"


def test_a_prometheus_query_refused_401_is_sent_again_with_the_token_the_file_holds_now(
        prometheus: str, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    client = PrometheusClient(Prometheus(prometheus, "q", bearer_token_file=str(token)))
    _PromHandler.answers = {"/api/v1/query": _vector("5")}
    assert client.instant(2.0) == 5.0
    token.write_text("second\n")  # rotated within the minute, then the old one revoked
    _PromHandler.revoked.add("Bearer first")
    assert client.instant(2.0) == 5.0
    assert [auth for _, auth in _PromHandler.seen] == [
        "Bearer first", "Bearer first", "Bearer second"]
    _PromHandler.revoked.add("Bearer second")  # revoked, and the file holds no other
    with pytest.raises(PrometheusError, match="answered HTTP 401") as refused:
        client.instant(2.0)
    assert refused.value.reason == "http" and len(_PromHandler.seen) == 4  # sent once


def test_the_range_query_for_advice(prometheus: str) -> None:
    _PromHandler.answers = {"/api/v1/query_range": (200, {"status": "success", "data": {
        "resultType": "matrix", "result": [{"metric": {}, "values": [
            [100.0, "10"], [110.0, "NaN"], [120.0, "30"]]}]}})}
    points = PrometheusClient(Prometheus(prometheus, "q")).range_query(100.0, 120.0, 10.0)
    assert points == [(100.0, 10.0), (120.0, 30.0)]  # a NaN point is a gap


def test_a_scraper_on_the_prometheus_source(prometheus: str) -> None:
    api = FakeApi()
    scale = "/apis/apps/v1/namespaces/kube-system/deployments/coredns/scale"
    api.objects[scale] = {"status": {"selector": "k8s-app=kube-dns", "replicas": 3}}
    load = Load(target_per_replica=100, prometheus=Prometheus(prometheus, "q"))
    scraper = Scraper(api, "kube-system", scale, "deployment/coredns", load)
    _PromHandler.answers = {"/api/v1/query": _vector("450")}
    sample = scraper.scrape_once()
    assert sample is not None and (sample.rate, sample.ready) == (450.0, 3)
    _PromHandler.answers = {}
    assert scraper.scrape_once() is None
    status = scraper.status()
    assert status.fault_reason == "http" and status.errors == {"http": 1}
    assert len(status.samples) == 1  # the gap is no sample


@pytest.fixture
def silent() -> Iterator[str]:
    """A server that accepts and never answers (a hung Prometheus, a stuck Pod)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


def test_stopping_a_scraper_cuts_its_scrape_and_leaves_no_thread(silent: str) -> None:
    """Before: each removal of the ``load`` key waited up to 5 s for a scraper stuck in a
    query, and left its thread behind (6 -> 9 threads over three removals)."""
    api = FakeApi()
    scale = "/apis/apps/v1/namespaces/kube-system/deployments/coredns/scale"
    api.objects[scale] = {"status": {"selector": "k8s-app=kube-dns", "replicas": 3}}
    load = Load(target_per_replica=100, prometheus=Prometheus(silent, "q"),
                scrape_timeout_seconds=30.0)
    def ours() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name.startswith("load-")]

    assert ours() == []
    for _ in range(3):
        scraper = Scraper(api, "kube-system", scale, "deployment/coredns", load)
        scraper.start()
        time.sleep(0.3)  # its query is in flight, unanswered
        started = time.monotonic()
        scraper.stop()
        assert time.monotonic() - started < 1.0
    deadline = time.monotonic() + 2
    while ours() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ours() == []
