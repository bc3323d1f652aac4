"""Keep credentials out of every message: URLs with passwords, tokens, Git's own output.

Every string that leaves ``reconciler.source`` (errors, log records, status
messages, ``SyncResult.url``) passes through ``redact_url`` or ``redact_text``.
Git and gitpython echo the remote URL in their errors, so the raw text of a Git
failure is never shown before it is redacted here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit, urlunsplit

MASK = "***"

# scheme://userinfo@host...: userinfo stops at the first "@" before the host part
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/\s@]+)@")


def redact_url(url: str) -> str:
    """``url`` with any password (and an HTTP(S) token given as user name) masked.

    ``https://user:tok@host/x`` -> ``https://user:***@host/x``;
    ``https://tok@host/x`` -> ``https://***@host/x`` (GitHub-style token as user);
    ``ssh://git@host/x`` and scp-like ``git@host:x`` keep the user: it is not secret.
    """
    return _URL_USERINFO.sub(_mask_userinfo, url)


def _mask_userinfo(match: re.Match[str]) -> str:
    scheme = match.group("scheme")
    user, sep, _password = match.group("userinfo").partition(":")
    if sep:
        return f"{scheme}{user}:{MASK}@"
    if scheme.lower().startswith("http"):
        return f"{scheme}{MASK}@"
    return match.group(0)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every URL redacted and every known secret value masked."""
    masked = {s for s in secrets if len(s) >= 4}
    if "://" not in text and not any(s in text for s in masked):
        return text  # no URL and no secret: the status ledger asks for every record
    out = redact_url(text)
    for secret in sorted(masked, key=len, reverse=True):
        out = out.replace(secret, MASK)
    return out


def split_credentials(url: str) -> tuple[str, str | None, str | None]:
    """``(url without userinfo password, user, password)`` for an HTTP(S) URL.

    Credentials are moved out of the URL so that Git's command line, the cached
    clone's config and gitpython's debug log never hold them. Non-HTTP URLs are
    returned unchanged.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or "@" not in parts.netloc:
        return url, None, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, sep, password = userinfo.partition(":")
    if not sep:
        # a bare token in the user position (https://TOKEN@github.com/...)
        return urlunsplit(parts._replace(netloc=hostport)), None, unquote(user)
    clean = urlunsplit(parts._replace(netloc=hostport))
    return clean, unquote(user) or None, unquote(password)
