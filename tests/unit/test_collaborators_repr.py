"""The loops and writers that hold an API client are dataclasses for their fields, not for
their repr: a generated ``__repr__`` would show every field, the client (and whatever
credential its own repr carries) among them, in any log or error that formats the object.
Theirs stays ``object``'s."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cpa.horizontal.daemon.react import EarlyPolls
from cpa.horizontal.daemon.target_writes import TargetWrites
from cpa.horizontal.decide.load import Load
from cpa.horizontal.scrape.scraper import Scraper
from cpa.kube.targets import parse_targets
from cpa.runtime.ticker import Ticker
from cpa.vertical.daemon.configfile import ConfigFile
from cpa.vertical.daemon.cpvpa_loop import VerticalAutoscaler, VerticalLoopConfig
from cpa.vertical.daemon.inplace import InPlaceResizer
from cpa.vertical.daemon.target import TargetLoop
from cpa.vertical.daemon.writer import TemplateWriter
from cpa.vertical.decide.patch import PatchTarget
from cpa.vertical.decide.state import VerticalState
from tests.fakes import FakeApi

CANARY = "CANARY-bearer-token-0123456789"


class TokenApi(FakeApi):
    """An API client whose repr carries a credential, as a careless one might."""

    def __repr__(self) -> str:
        return f"TokenApi(token={CANARY!r})"


def _made() -> list[Callable[[TokenApi], object]]:
    target = PatchTarget("DaemonSet", "agent")
    return [
        lambda api: Scraper(api, "ns", "/scale", "deployment/coredns",
                            Load(target_per_replica=100)),
        lambda api: TargetWrites(api, "ns", parse_targets("deployment/coredns")[0], False,
                                 lambda: None),  # type: ignore[arg-type,return-value]
        lambda api: InPlaceResizer(api, "ns", target),
        lambda api: TargetLoop(VerticalState(None), TemplateWriter(api, "ns", target)),
        lambda api: VerticalAutoscaler(
            VerticalLoopConfig(), lambda: (3, 24), ConfigFile(""),
            [TargetLoop(VerticalState(None), TemplateWriter(api, "ns", target))]),
        lambda api: EarlyPolls(Ticker(10.0, lambda: 0.0), lambda: 0.0,
                               lambda: api,  # type: ignore[arg-type,return-value]
                               lambda: (None, None), lambda: None, None),
    ]


@pytest.mark.parametrize("make", _made())
def test_the_object_shows_no_field_in_its_repr(make: Callable[[TokenApi], object]) -> None:
    assert CANARY in repr(TokenApi())  # the canary would show if a field were shown
    text = repr(make(TokenApi()))
    assert CANARY not in text and "TokenApi" not in text, text
    assert text.startswith("<") and " object at 0x" in text
