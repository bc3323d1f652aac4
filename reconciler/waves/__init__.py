"""Waves (SPEC section 4b): pure decisions on whether an instance may start a version.

Given ``waves.yaml`` (``model.waves.Waves``) and the other clusters' status records,
``gate`` says Open, Waiting (what for, and how long a soak still runs) or Halted
(which clusters failed the version). It reads nothing itself: the daemon, the ``wave``
commands and the status page hand it what they read from Git.
"""

from reconciler.model.waves import SeenRecord
from reconciler.waves.board import BoardInstance, BoardWave, wave_board
from reconciler.waves.gate import (
    WAITING_FOR_WAVE,
    WAVE_HALTED,
    Decision,
    Freshness,
    Halted,
    Open,
    Waiting,
    change_waits,
    gate,
)

__all__ = [
    "WAITING_FOR_WAVE",
    "WAVE_HALTED",
    "BoardInstance",
    "BoardWave",
    "Decision",
    "Freshness",
    "Halted",
    "Open",
    "SeenRecord",
    "Waiting",
    "change_waits",
    "gate",
    "wave_board",
]
