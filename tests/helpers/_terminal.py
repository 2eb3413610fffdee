"""A terminal a person types into: a command run in its own tmux server, read as the screen
shows it (``tmux capture-pane``), typed into with ``tmux send-keys``."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from tests.helpers._waiting import eventually

__all__ = ["Terminal", "terminal"]


class Terminal:
    """One tmux pane running a command."""

    def __init__(self, socket: str) -> None:
        self._socket = socket

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self._socket, *args], capture_output=True, text=True, check=False
        )
        return done.stdout

    def screen(self) -> str:
        """What the pane shows, its scrollback included."""
        return self._tmux("capture-pane", "-p", "-J", "-S", "-2000", "-t", "main")

    def type(self, text: str) -> None:
        """Type ``text`` and press Enter."""
        self._tmux("send-keys", "-t", "main", "-l", text)
        self._tmux("send-keys", "-t", "main", "Enter")

    def press(self, key: str) -> None:
        """Press a key tmux names (``C-c``, ``C-d``)."""
        self._tmux("send-keys", "-t", "main", key)

    async def shows(self, text: str, *, after: int = 0, timeout: float = 30) -> str:
        """The screen once ``text`` is on it past its first ``after`` characters."""

        def probe() -> str | None:
            screen = self.screen()
            return screen if text in screen[after:] else None

        try:
            return await eventually(probe, f"the terminal shows {text!r}", timeout=timeout)
        except AssertionError as error:
            raise AssertionError(f"{error}; it shows:\n{self.screen()}") from None


@contextmanager
def terminal(command: Sequence[str], env: dict[str, str]) -> Iterator[Terminal]:
    """``command`` running in a fresh tmux server (200 by 50), with ``env`` exported; killed after.
    When the command ends the pane shows ``[exited CODE]``."""
    assert shutil.which("tmux"), "tmux is needed (apt-get install tmux)"
    socket = f"orga-test-{uuid.uuid4().hex[:10]}"
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    # The pane stays after the command, to show how it exited.
    line = f'env {exports} {shlex.join(command)}; echo "[exited $?]"; sleep 600'
    subprocess.run(
        ["tmux", "-L", socket, "new-session", "-d", "-s", "main", "-x", "200", "-y", "50", line],
        check=True,
    )
    try:
        yield Terminal(socket)
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, check=False)
