"""Build tags order numerically (SPEC section 8): rev, then dotted build numbers."""

from __future__ import annotations

import pytest

from reconciler.model.builds import ImageBuild, ImageBuilds, pinned_images
from reconciler.model.images import build_tag_key, parse_build_tag, parse_image


def test_builds_order_numerically_field_by_field() -> None:
    tags = ["2.6.2-rev1-b5.10", "2.6.2-rev1-b10", "2.6.2-rev1-b5.9", "2.6.2-rev10", "2.6.2-rev9-b1"]
    tags += ["2.6.2-rev1", "2.6.2-rev1-b9", "2.6.2-rev1-b5"]
    assert sorted(tags, key=build_tag_key) == [
        "2.6.2-rev1",
        "2.6.2-rev1-b5",
        "2.6.2-rev1-b5.9",
        "2.6.2-rev1-b5.10",
        "2.6.2-rev1-b9",
        "2.6.2-rev1-b10",
        "2.6.2-rev9-b1",
        "2.6.2-rev10",
    ]


@pytest.mark.parametrize(
    ("tag", "intermediate", "build"),
    [
        ("2.6.2-rev1-b5.1", "2.6.2-rev1", (5, 1)),
        ("2.6.2-rev1", "2.6.2-rev1", ()),
        ("1.0.0-rc.1-rev3-b7", "1.0.0-rc.1-rev3", (7,)),
    ],
)
def test_parse_build_tag(tag: str, intermediate: str, build: tuple[int, ...]) -> None:
    parsed = parse_build_tag(tag)
    assert parsed is not None
    assert parsed.intermediate == intermediate
    assert parsed.build == build
    assert str(parsed) == tag
    assert parsed.is_long == bool(build)


@pytest.mark.parametrize(
    "tag", ["2.6.2", "latest", "2.6.2-rev", "2.6.2-rev1-b", "2.6.2-rev1-b5.", "x-rev1"]
)
def test_tags_that_are_not_build_tags(tag: str) -> None:
    assert parse_build_tag(tag) is None


def test_pinned_images_use_long_tag_and_digest_and_keep_the_rest() -> None:
    digest = "sha256:" + "a" * 64
    images = {"web": "registry.example:5000/shop/web:2.6.2-rev1", "sidecar": "busybox:1.36"}
    builds = {"web": ImageBuild("2.6.2-rev1-b6.1", digest), "gone": ImageBuild("x-rev1-b1", digest)}
    assert pinned_images(images, builds) == {
        "web": f"registry.example:5000/shop/web:2.6.2-rev1-b6.1@{digest}",
        "sidecar": "busybox:1.36",
    }


def test_builds_file_round_trip_is_stable() -> None:
    digest = "sha256:" + "b" * 64
    builds = ImageBuilds("shop").with_build("2.10.0", "web", ImageBuild("2.10.0-rev1-b1", digest))
    builds = builds.with_build("2.9.0", "web", ImageBuild("2.9.0-rev2-b3", digest))
    data = builds.to_dict()
    assert list(data["builds"]) == ["2.9.0", "2.10.0"]
    assert data["kind"] == "ImageBuilds"
    assert ImageBuild.from_dict(data["builds"]["2.9.0"]["web"]).tag == "2.9.0-rev2-b3"
    assert (
        parse_image(
            builds.for_version("2.9.0")["web"].pinned(parse_image("r/web:2.9.0-rev2"))
        ).digest
        == digest
    )
