"""Credentials kept out of every text the programs write.

The rule: no log line, error, health answer, metric label, Event or CLI output ever
carries a bearer token, a password or a key. Each source of a credential keeps it out of
its own messages (a refused token is named by its file and the reason, never its value).
This module is the second line, for a text nobody foresaw (a library's exception, a
server echoing a header back): every credential the programs read is :func:`remember`-ed,
and every text that leaves the process passes through :func:`scrub`, which writes each
one as ``[redacted]``. :func:`redact_url` hides a URL's password as Go's
``url.URL.Redacted`` does.
"""

from __future__ import annotations

import threading

__all__ = ["MIN_LENGTH", "REDACTED", "redact_url", "remember", "scrub"]

REDACTED = "[redacted]"
MIN_LENGTH = 6
"""Shorter values are not remembered: scrubbing two or three letters out of every line
would mangle the text without protecting anything worth the name."""
KEPT = 64
"""Credentials remembered at most, the newest kept: tokens rotate (hourly for a projected
ServiceAccount token), and an old one is worth hiding only while it may still be valid."""

_lock = threading.Lock()
_known: dict[str, None] = {}  # insertion-ordered: the oldest is dropped first
_longest_first: tuple[str, ...] = ()  # what scrub() replaces, a longer one before a part of it


def remember(secret: str | bytes | None) -> None:
    """Hide ``secret`` in every text :func:`scrub` sees from now on."""
    if isinstance(secret, bytes):
        secret = secret.decode("utf-8", "replace")
    if not secret:
        return
    for value in {secret, secret.strip()}:
        if len(value) < MIN_LENGTH:
            continue
        with _lock:
            _known.pop(value, None)
            _known[value] = None
            while len(_known) > KEPT:
                del _known[next(iter(_known))]
            _publish()


def _publish() -> None:
    global _longest_first
    _longest_first = tuple(sorted(_known, key=len, reverse=True))


def scrub(text: str) -> str:
    """``text`` with every remembered credential written as ``[redacted]``."""
    for secret in _longest_first:  # one tuple, replaced whole by remember()
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def forget_all() -> None:
    """Forget every credential (tests)."""
    with _lock:
        _known.clear()
        _publish()


def redact_url(url: str) -> str:
    """``url`` with the password of its user information replaced by ``xxxxx`` (Go's
    ``URL.Redacted``); a URL without one is returned as it is."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority_end = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#"))
                         if i >= 0), default=len(rest))
    authority = rest[:authority_end]
    userinfo, at, host = authority.rpartition("@")
    if not at:
        return url
    user, colon, _password = userinfo.partition(":")
    shown = f"{user}:xxxxx" if colon else user
    return f"{scheme}://{shown}@{host}{rest[authority_end:]}"
