"""The demo's waves chapter, run as ``make demo`` runs it (with a shorter soak).

The chapter's soak is real (measured from the status commits' times), so this test
un-pins the Git dates the suite pins elsewhere: a pinned date would make every soak
look long over and the chapter would skip the wait it is meant to show.
"""

from __future__ import annotations

from pathlib import Path

import git
import pytest

from reconciler.commands.demo import DEMO_TIMING, Story, _roll
from reconciler.commands.demo_waves import FAIL_IMAGES, wave_chapter
from reconciler.kube import KubeClient
from reconciler.model.status import Phase
from reconciler.sandbox.testing import running_sandbox


@pytest.mark.slow
def test_the_waves_chapter_tells_a_good_then_a_halted_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GIT_AUTHOR_DATE", raising=False)
    monkeypatch.delenv("GIT_COMMITTER_DATE", raising=False)
    story = Story()
    with (
        running_sandbox(timing=DEMO_TIMING, fail_images=FAIL_IMAGES) as sandbox,
        KubeClient.connect(str(sandbox.kubeconfig)) as client,
    ):
        told = wave_chapter(
            story.chapter,
            story.line,
            client,
            tmp_path / "waves",
            roll=lambda daemon, instance: _roll(story, daemon, instance),
            # the soak is what is shown: held, then let go. 4 s (at least 3 s by Git's
            # whole-second commit times) leaves a busy machine's first look and one more
            # look (0.8 s apart) inside it; the chapter looks again when it is over
            soak=4,
        )
    out = capsys.readouterr().out
    assert told.ok, out
    assert {c: (s.phase, s.version) for c, s in told.good.items() if s} == {
        "staging": (Phase.READY, "6.6.0"),
        "prod-eu": (Phase.READY, "6.6.0"),
        "prod-us": (Phase.READY, "6.6.0"),
    }
    assert [w.state for w in told.board] == ["open", "halted", "halted"]
    assert "wave eu (approval required): HALTED: halted: podinfo 6.7.0 failed" in out
    assert "prod-us runs ghcr.io/stefanprodan/podinfo:6.6.0" in out
    assert "prod-eu runs ghcr.io/stefanprodan/podinfo:6.6.0" in out

    # prod-us's branch tells the story, newest first: each step one commit, and the
    # soak one wait (one commit, however many times the daemon looked)
    subjects = [line.split(" ", 1)[1] for line in told.log]
    assert [s.split(" (")[0] for s in subjects] == [
        "prod-us/web: podinfo 6.6.0",
        "prod-us/web: upgraded podinfo 6.5.0 -> 6.6.0",
        "prod-us/web: podinfo 6.5.0 message updated",
        "prod-us/web: moving podinfo 6.5.0 -> 6.6.0",
        "prod-us/web: podinfo 6.5.0",
    ], subjects
    assert "(Stalled: WaveHalted) halted: podinfo 6.7.0 failed" in subjects[0]
    status = git.Repo(tmp_path / "waves" / "catalog.git")
    bodies = [str(c.message) for c in status.iter_commits("status/prod-us")]
    assert "waiting for wave eu: prod-eu/web 6.6.0 Ready for " in bodies[2]
    assert "waiting for wave canary: staging/web runs 6.5.0" in bodies[3]
    assert out.count("(no commit: the same wait)") >= 1
    # the approvals are commits of the catalog, bound to the version
    approvals = [str(c.message) for c in status.iter_commits("main") if "wave" in c.message]
    assert len(approvals) == 2
    assert all("Reconciler-Wave: eu" in a for a in approvals)
    assert "Reconciler-Version: 6.7.0" in approvals[0]
    assert "Reconciler-Version: 6.6.0" in approvals[1]
