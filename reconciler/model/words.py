"""Numbers and names as people read them: ``1 replica``, ``waiting for promotion``.

Status messages, commit subjects and the status page all count things and name
states; one helper keeps "1 replicas" out of every one of them. Pure functions,
used by every stage that writes text for people.
"""

from __future__ import annotations

import re

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")

# the rollout states' KubeVela names read backwards or terse once split into words
_STATE_WORDS = {
    "rolloutSucceed": "succeeded",
    "rolloutFailed": "failed",
    "rolloutAbandoned": "abandoned",
    "rollingInBatches": "rolling in batches",
    "rolledBack": "rolled back",
}


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 replica``, ``0 replicas``, ``2 replicas`` (``many``: an irregular plural)."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"


def readable(name: str) -> str:
    """A camelCase state or reason in words: ``waitingForPromotion`` -> ``waiting for promotion``.

    Rollout states get their own wording (``rolloutSucceed`` -> ``succeeded``); a
    name that is already words (``Ready``, ``in flight``) is returned as it is.
    """
    if name in _STATE_WORDS:
        return _STATE_WORDS[name]
    if " " in name or not _CAMEL.search(name):
        return name
    return _CAMEL.sub(" ", name).lower()
