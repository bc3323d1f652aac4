"""The ``${...}`` placeholder grammar of manifests, shared by validation and rendering.

Known placeholders: ``${params.NAME}``, ``${images.NAME}``, ``${instance.name}``,
``${instance.namespace}``, ``${app.name}``, ``${app.version}``. ``$${`` writes a
literal ``${`` (shell scripts in ConfigMaps use ``${VAR}`` too, and must be able
to say so). Anything else between ``${`` and ``}`` is an error, so a typo such
as ``${param.replicas}`` fails validation instead of reaching a cluster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

# $${ is an escape; ${ opens a placeholder that must close on the same scalar
TOKEN = re.compile(r"\$\$\{|\$\{([^}]*)\}|\$\{")
_REF = re.compile(
    r"(params|images)\.([A-Za-z_][A-Za-z0-9_]*)|(instance)\.(name|namespace)|(app)\.(name|version)"
)

FIXED = ("instance.name", "instance.namespace", "app.name", "app.version")


@dataclass(frozen=True)
class Placeholder:
    """A parsed reference: ``scope`` is params/images/instance/app, ``name`` the key."""

    scope: str
    name: str

    def __str__(self) -> str:
        return f"${{{self.scope}.{self.name}}}"


class PlaceholderError(ValueError):
    """An unknown or malformed placeholder; the message quotes it."""


@lru_cache(maxsize=4096)
def parse_placeholder(expr: str) -> Placeholder:
    match = _REF.fullmatch(expr.strip())
    if match is None:
        raise PlaceholderError(
            f'unknown placeholder "${{{expr}}}" (known: ${{params.NAME}}, ${{images.NAME}}, '
            + ", ".join(f"${{{f}}}" for f in FIXED)
            + '; write "$${" for a literal "${")'
        )
    groups = [g for g in match.groups() if g is not None]
    return Placeholder(groups[0], groups[1])


@lru_cache(maxsize=65536)
def find_placeholders(text: str) -> tuple[Placeholder, ...]:
    """Every placeholder in one string, raising ``PlaceholderError`` for a bad one.

    Cached: the same strings (``${instance.name}``) recur in every version of
    every app, and this check runs on each load of the catalog.
    """
    found: list[Placeholder] = []
    for match in TOKEN.finditer(text):
        token = match.group(0)
        if token == "$${":
            continue
        if token == "${":
            raise PlaceholderError(f'unterminated placeholder in "{text}" (missing "}}")')
        found.append(parse_placeholder(match.group(1)))
    return tuple(found)


def is_single_placeholder(text: str) -> bool:
    """True when the whole scalar is one placeholder, so it keeps the value's type."""
    match = TOKEN.fullmatch(text)
    return match is not None and match.group(1) is not None


Path = tuple[str | int, ...]


def placeholder_paths(data: Any) -> tuple[Path, ...] | None:
    """Where ``data`` holds ``${`` in a string value: the paths of those strings.

    None when a mapping *key* holds one (renaming keys in place would reorder them;
    such templates are rendered by walking every value). Rendering copies the
    template in one go and rewrites these paths alone, instead of rebuilding every
    mapping and list of every object for every instance.
    """
    paths: list[Path] = []

    def walk(value: Any, path: Path) -> bool:
        if isinstance(value, str):
            if "${" in value:
                paths.append(path)
            return True
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and "${" in key:
                    return False
                if not walk(item, (*path, key)):
                    return False
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if not walk(item, (*path, i)):
                    return False
        return True

    return tuple(paths) if walk(data, ()) else None
