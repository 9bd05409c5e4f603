"""A series' identity on a Pod's page, and what a counter's return, a restart or a bad
value do to the rate: no false surge from the Pods source (issue 47)."""

from __future__ import annotations

from random import Random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa.load.exposition import ExpositionError, parse_family, series_key


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
