"""The kubelet's flags that take a small language of their own (`--eviction-hard`)."""

from __future__ import annotations

import pytest

from agents.kubelet import config as kconfig
from agents.kubelet.config import Threshold


def _parse(*flags: str) -> kconfig.KubeletConfig:
    return kconfig.from_args(kconfig.parser().parse_args(["--kubeconfig", "k.conf", *flags]))


def test_eviction_hard_takes_quantities_and_percentages() -> None:
    config = _parse("--eviction-hard", "memory.available<200Mi,nodefs.available<5%")
    assert config.eviction_hard == {
        "memory.available": Threshold(quantity=200 * 1024 * 1024),
        "nodefs.available": Threshold(fraction=0.05),
    }
    assert config.eviction_hard["nodefs.available"].of(1000) == 50
    assert _parse().eviction_hard == kconfig.EVICTION_HARD


def test_eviction_hard_refuses_what_it_cannot_watch(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parse("--eviction-hard", "imagefs.available<15%")
    assert "signal one of memory.available, nodefs.available" in capsys.readouterr().err
