"""The API server address as the pool reads it, and a request's query as the client
writes it."""

from __future__ import annotations

import pytest

from cpa.http.pool import Pool
from cpa.kube.client import _target


@pytest.mark.parametrize("server", ["ftp://h", "https://", "https://:6443", "h:6443"])
def test_an_address_that_is_not_an_http_url_is_refused(server: str) -> None:
    with pytest.raises(ValueError, match="is not an http"):
        Pool(server, None)


def test_a_label_selector_is_escaped_in_the_query() -> None:
    assert _target("/api/v1/nodes", {"labelSelector": "zone in (a b),!x", "limit": "5"}) == (
        "/api/v1/nodes?labelSelector=zone+in+%28a+b%29%2C%21x&limit=5")
    assert _target("/api/v1/nodes", {}) == "/api/v1/nodes"
