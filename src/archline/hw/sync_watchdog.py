"""A wait for the GPU that never returns: a watchdog that notices it and hands it to a callback.

A replayed step with nodes switched off can hang the GPU, most likely a kernel waiting for something a switched-off
node would have done (on a VGG-16 training step, session 29, a group timed alone did not finish and the host waited in
``torch.cuda.synchronize`` until the run's time limit). A kernel that does not end cannot be stopped from the host,
so the only way out is to end the process; without a watchdog the program waits with nothing printed.
:class:`SyncWatchdog` marks each wait (``begin``/``end``: two attribute writes, nothing added to the wait itself),
and a daemon thread checks once a second whether one has lasted longer than ``limit_s``; if so it calls
``on_hang(seconds waited)`` once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

#: Seconds a wait for a replayed step may last before it counts as a hang: a step's replay takes milliseconds to
#: seconds, and one measurement synchronises after at most a few seconds of them.
HANG_S = 60.0
#: How often the watchdog thread looks (s).
POLL_S = 1.0


class SyncWatchdog:
    """Watches waits for the GPU (``begin``/``end`` around each); ``on_hang(waited_s)`` is called once, from the
    watchdog's thread, when one lasts longer than ``limit_s`` of ``now()``. ``start`` runs the thread; ``check`` is
    what it does each time it looks (callable directly, with any clock)."""

    def __init__(
        self,
        limit_s: float,
        on_hang: Callable[[float], None],
        now: Callable[[], float] = time.monotonic,
        poll_s: float = POLL_S,
    ) -> None:
        if not limit_s > 0:
            raise ValueError(f"limit_s must be > 0, not {limit_s}")
        self.limit_s, self.on_hang, self.now, self.poll_s = limit_s, on_hang, now, poll_s
        self._since: float | None = None
        self.fired = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def begin(self) -> None:
        """A wait starts."""
        self._since = self.now()

    def end(self) -> None:
        """The wait returned."""
        self._since = None

    def check(self) -> bool:
        """Whether the wait under way has lasted longer than the limit; the first time, ``on_hang`` is called."""
        since = self._since
        if since is None or self.fired:
            return False
        waited = self.now() - since
        if waited <= self.limit_s:
            return False
        self.fired = True
        self.on_hang(waited)
        return True

    def start(self) -> SyncWatchdog:
        """Start the watchdog's daemon thread (it ends with :meth:`stop` or the process)."""

        def run() -> None:
            while not self._stop.wait(self.poll_s):
                if self.check():
                    return

        self._thread = threading.Thread(target=run, name="archline-sync-watchdog", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread (a wait under way is no longer watched)."""
        self._stop.set()
