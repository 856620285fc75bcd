"""Transcript tests of the Raft core: every tests/raft/testdata/*.txt script is run
against a fresh InteractionEnv and its full output compared with the file.

Regenerate after an intended behaviour change with `pytest tests/raft --rewrite`, then
review the diff of the transcripts.
"""

from pathlib import Path

import pytest

from tests.raft.datadriven import run_file
from tests.raft.interaction import InteractionEnv

TESTDATA = Path(__file__).parent / "testdata"


@pytest.mark.parametrize("path", sorted(TESTDATA.glob("*.txt")), ids=lambda p: p.stem)
def test_transcript(path: Path, request: pytest.FixtureRequest) -> None:
    env = InteractionEnv()
    failures = run_file(path, env.handle, rewrite=request.config.getoption("--rewrite"))
    assert not failures, "\n\n".join(failures)
