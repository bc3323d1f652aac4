"""``AppEntry.sorted_versions`` keeps its order between calls, never a stale version.

Resolution asks for an app's sorted versions several times per instance; the order
is kept while the entry holds the very same version objects, and sorted again when
the loader replaces one (``dataclasses.replace``: an equal copy is still a new
object, and the answer must hold the new one) or adds one.
"""

from __future__ import annotations

from dataclasses import replace

from reconciler.model.catalog import AppEntry, AppVersion
from reconciler.model.version import parse_version


def version(text: str) -> AppVersion:
    return AppVersion(app="web", version=parse_version(text), directory=f"apps/web/versions/{text}")


def keys(entry: AppEntry) -> list[str]:
    return [v.key for v in entry.sorted_versions()]


def test_versions_come_lowest_first_and_the_answer_is_the_callers_own() -> None:
    entry = AppEntry(
        name="web", versions={v: version(v) for v in ("1.10.0", "1.2.0", "1.2.0-rc.1")}
    )
    assert keys(entry) == ["1.2.0-rc.1", "1.2.0", "1.10.0"]
    entry.sorted_versions().clear()  # a caller's list: the next answer is whole
    assert keys(entry) == ["1.2.0-rc.1", "1.2.0", "1.10.0"]


def test_a_replaced_or_added_version_is_in_the_next_answer() -> None:
    entry = AppEntry(name="web", versions={v: version(v) for v in ("1.0.0", "2.0.0")})
    assert keys(entry) == ["1.0.0", "2.0.0"]
    invalid = replace(entry.versions["1.0.0"], valid=False)
    entry.versions["1.0.0"] = invalid
    assert entry.sorted_versions()[0] is invalid
    entry.versions["1.5.0"] = version("1.5.0")
    assert keys(entry) == ["1.0.0", "1.5.0", "2.0.0"]
    del entry.versions["2.0.0"]
    assert keys(entry) == ["1.0.0", "1.5.0"]
