"""The API server address and request queries, read and written without ``urllib.parse``
(which costs ~2.5 ms of the start-up path with ``ipaddress``): the same results as
``urlsplit`` and ``urlencode`` for every input, generated ones included."""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa.http.pool import split_url
from cpa.kube.client import _target, quote_plus


def by_urllib(url: str) -> tuple[str, str | None, int | None, str] | str:
    try:
        parts = urlsplit(url)
        return parts.scheme, parts.hostname, parts.port, parts.path
    except ValueError as exc:
        return str(exc)


def ours(url: str) -> tuple[str, str | None, int | None, str] | str:
    try:
        return split_url(url)
    except ValueError as exc:
        return str(exc)


@pytest.mark.parametrize("url", [
    "https://127.0.0.1:6443", "https://[::1]:443/", "http://LocalHost", "HTTPS://H:1",
    "https://API.example.com:6443/k8s/clusters/c-1", "https://h:0", "https://[fd00::1]",
    "https://u:p@h:1/x", "https://h/p?q=1", " https://h", "https://h:99999", "https://h:/x",
    "https://:6443", "https://", "https://[fe80::1%25eth0]:6443", "https://h:65535/a/b/",
    "https://bücher.example:443", "https://h#frag", "https://under_score.local:6443",
])
def test_server_addresses_read_as_urlsplit_reads_them(url: str) -> None:
    assert ours(url) == by_urllib(url)


_HOSTS = st.one_of(
    st.from_regex(r"[A-Za-z0-9._-]{0,12}", fullmatch=True),
    st.ip_addresses(v=4).map(str),
    st.ip_addresses(v=6).map(lambda ip: f"[{ip}]"),
    st.text(max_size=8),
)


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(["https", "http", "HTTPS", "ftp", ""]), _HOSTS,
       st.one_of(st.none(), st.integers(0, 70000).map(str), st.text("0123456789:", max_size=6)),
       st.one_of(st.just(""), st.text(max_size=10).map(lambda p: "/" + p)))
def test_generated_addresses_read_as_urlsplit_reads_them(scheme: str, host: str,
                                                        port: str | None, path: str) -> None:
    url = f"{scheme}://{host}" + (f":{port}" if port is not None else "") + path
    assert ours(url) == by_urllib(url)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=6), st.text(max_size=12), max_size=4))
def test_queries_encoded_as_urlencode_encodes_them(query: dict[str, str]) -> None:
    assert _target("/api/v1/nodes", query) == (
        "/api/v1/nodes" + ("?" + urlencode(query) if query else ""))


def test_a_label_selector_is_escaped() -> None:
    assert quote_plus("zone in (a b),!x") == "zone+in+%28a+b%29%2C%21x"
    assert quote_plus("plain-name_1.2~") == "plain-name_1.2~"
