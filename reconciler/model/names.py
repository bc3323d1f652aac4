"""Kubernetes object name rules, shared by the catalog loader, render and the engine.

https://kubernetes.io/docs/concepts/overview/working-with-objects/names/ :
namespaces (and reconciler's own names) are DNS-1123 labels, most other objects
DNS-1123 subdomains. They are checked before any ``allowedNamespaces`` pattern
match, because a glob's ``*`` would happily match ``team-x/../kube-system``.
"""

from __future__ import annotations

import re
from typing import Any

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
MAX_SUBDOMAIN = 253


def is_dns_label(value: Any) -> bool:
    return isinstance(value, str) and DNS_LABEL.fullmatch(value) is not None


def is_dns_subdomain(value: Any) -> bool:
    return (
        isinstance(value, str)
        and len(value) <= MAX_SUBDOMAIN
        and DNS_SUBDOMAIN.fullmatch(value) is not None
    )
