"""Property tests: sugar equals its expansion, || is union, AND is intersection,
and the prerelease rule holds for arbitrary comparator sets."""

from __future__ import annotations

import string

from hypothesis import given
from hypothesis import strategies as st

from reconciler.model.version import Version
from reconciler.resolve import RangeSyntaxError, parse_range

small = st.integers(min_value=0, max_value=3)
prereleases = st.sampled_from([None, "0", "alpha", "beta.1", "beta.2", "rc.9", "rc.10"])
versions = st.builds(Version, small, small, small, prereleases)
flags = st.booleans()

OPS = ["", "=", ">", ">=", "<", "<="]
comparators = st.builds(lambda op, v: f"{op}{v}", st.sampled_from(OPS), versions)
and_sets = st.lists(comparators, min_size=1, max_size=3).map(" ".join)


def v3(major: int, minor: int, patch: int) -> str:
    return f"{major}.{minor}.{patch}"


@given(small, small, small, versions, flags)
def test_tilde_is_its_expansion(major: int, minor: int, patch: int, v: Version, inc: bool) -> None:
    tilde = parse_range(f"~{v3(major, minor, patch)}")
    expansion = parse_range(f">={v3(major, minor, patch)} <{v3(major, minor + 1, 0)}-0")
    assert tilde.matches(v, include_prerelease=inc) == expansion.matches(v, include_prerelease=inc)
    if not inc:  # the SPEC's wording, without node-semver's "-0"
        plain = parse_range(f">={v3(major, minor, patch)} <{v3(major, minor + 1, 0)}")
        assert tilde.matches(v) == plain.matches(v)


@given(small, small, small, versions, flags)
def test_caret_is_its_expansion(major: int, minor: int, patch: int, v: Version, inc: bool) -> None:
    if major:
        upper = v3(major + 1, 0, 0)
    elif minor:
        upper = v3(0, minor + 1, 0)
    else:
        upper = v3(0, 0, patch + 1)
    caret = parse_range(f"^{v3(major, minor, patch)}")
    expansion = parse_range(f">={v3(major, minor, patch)} <{upper}-0")
    assert caret.matches(v, include_prerelease=inc) == expansion.matches(v, include_prerelease=inc)


@given(small, small, versions, st.sampled_from(["x", "X", "*"]))
def test_wildcards_are_their_expansions(major: int, minor: int, v: Version, x: str) -> None:
    assert parse_range(f"{major}.{minor}.{x}").matches(v) == parse_range(
        f">={v3(major, minor, 0)} <{v3(major, minor + 1, 0)}"
    ).matches(v)
    assert parse_range(f"{major}.{x}").matches(v) == parse_range(
        f">={v3(major, 0, 0)} <{v3(major + 1, 0, 0)}"
    ).matches(v)
    assert parse_range(f"~{major}").matches(v) == parse_range(f"{major}.{x}").matches(v)
    assert parse_range(f">={major}.{minor}").matches(v) == parse_range(
        f">={v3(major, minor, 0)}"
    ).matches(v)
    assert parse_range(f"<{major}.{minor}").matches(v) == parse_range(
        f"<{v3(major, minor, 0)}"
    ).matches(v)
    assert parse_range(x).matches(v) == (v.prerelease is None)
    assert parse_range(x).matches(v, include_prerelease=True)


@given(and_sets, and_sets, versions, flags)
def test_or_is_union(a: str, b: str, v: Version, inc: bool) -> None:
    either = parse_range(f"{a} || {b}").matches(v, include_prerelease=inc)
    ra, rb = parse_range(a), parse_range(b)
    assert either == (
        ra.matches(v, include_prerelease=inc) or rb.matches(v, include_prerelease=inc)
    )


@given(and_sets, and_sets, versions, flags)
def test_and_is_intersection(a: str, b: str, v: Version, inc: bool) -> None:
    both = parse_range(f"{a} {b}")
    assert both.matches(v, include_prerelease=inc) == parse_range(f"{a}, {b}").matches(
        v, include_prerelease=inc
    )
    ra, rb = parse_range(a), parse_range(b)
    if inc or v.prerelease is None:
        assert both.matches(v, include_prerelease=inc) == (
            ra.matches(v, include_prerelease=inc) and rb.matches(v, include_prerelease=inc)
        )
    elif both.matches(v):  # a prerelease opted in by either side must still be in both
        assert ra.matches(v, include_prerelease=True) and rb.matches(v, include_prerelease=True)


@given(st.lists(comparators, min_size=1, max_size=4), versions)
def test_prerelease_rule(parts: list[str], v: Version) -> None:
    r = parse_range(" ".join(parts))
    if v.prerelease is None:
        assert r.matches(v) == r.matches(v, include_prerelease=True)
        return
    same_tuple = any(
        (w := Version.parse(p.lstrip("<>="))).prerelease is not None
        and (w.major, w.minor, w.patch) == (v.major, v.minor, v.patch)
        for p in parts
    )
    assert r.matches(v) == (same_tuple and r.matches(v, include_prerelease=True))


@given(and_sets)
def test_str_round_trips(expression: str) -> None:
    assert str(parse_range(expression)) == expression
    assert parse_range(parse_range(expression).normalized).normalized == (
        parse_range(expression).normalized
    )


@given(st.text(alphabet=string.digits + ".xX*-^~<>=!|, v+ab", max_size=20), versions)
def test_any_text_parses_or_raises_range_syntax_error(text: str, v: Version) -> None:
    try:
        r = parse_range(text)
    except RangeSyntaxError as e:
        assert 1 <= e.column <= max(len(text), 1) + 1
        return
    r.matches(v)
    r.matches(v, include_prerelease=True)
