"""``--default-params`` -> the ConfigMap's data, as upstream writes it.

A module of its own because flag parsing needs it: the daemon parses its flags before the
Node list goes out, and this needs only the Go-json reader and writer, not the parameter
parsers (:mod:`cpa.horizontal.decide.modes` with ``behavior`` and the counting keys), which load
later.
"""

from __future__ import annotations

from cpa.go.json import GoJsonError, JsonValue, as_object, go_marshal, parse

__all__ = ["default_params_to_data"]


def default_params_to_data(text: str) -> dict[str, str]:
    """Turn the ``--default-params`` flag into ConfigMap data, as upstream does.

    Upstream unmarshals the flag into ``map[string]interface{}`` and marshals each value
    back, so keys get sorted, numbers pass through float64 and HTML characters are
    escaped: ``{"linear":{"nodesPerReplica":16,"coresPerReplica":256}}`` becomes
    ``{"linear": '{"coresPerReplica":256,"nodesPerReplica":16}'}``.  A JSON ``null`` flag
    gives no entries, as in Go.
    """
    try:
        obj = as_object(parse(text), "--default-params")
        data: dict[str, JsonValue] = {}
        for key, value in obj.members if obj else ():
            data[key] = value
        return {key: go_marshal(value, key) for key, value in data.items()}
    except GoJsonError as error:
        raise ValueError(
            f"--default-params must be a JSON object such as "
            f'{{"linear":{{"coresPerReplica":256,"nodesPerReplica":16}}}}: {error}'
        ) from None
