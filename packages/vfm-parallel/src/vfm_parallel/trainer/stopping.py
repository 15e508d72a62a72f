"""Stopping a run on request: SIGTERM (what a cluster scheduler and torchrun send before a kill) or
SIGINT (Ctrl-C) end the run after the current step with a checkpoint of that step, which
``resume = "auto"`` continues exactly.

The handler only records the signal; the trainer carries the flag in the step's figures that every
rank all-reduces anyway, so all ranks stop after the same step even when the signal reached them at
different moments (or one rank only). A second signal stops at once, as without the handler.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any, Callable

#: The signals that ask for a stop with a checkpoint.
SIGNALS = (signal.SIGTERM, signal.SIGINT)


class TrainingStopped(RuntimeError):
    """The run stopped early on a signal, after saving a checkpoint of its last step.

    ``signal_name`` ("SIGTERM"), ``step`` (the last step run), ``checkpoint`` (its folder, or None
    when the save was skipped: a non-finite step) and ``result`` (the :class:`TrainResult` so far).
    """

    def __init__(self, signum: int, step: int, total: int, checkpoint: Path | None, result: Any,
                 newest: Path | None = None) -> None:
        self.signum, self.signal_name, self.step, self.checkpoint, self.result = (
            signum, signal.Signals(signum).name, step, checkpoint, result)
        kept = (f"checkpoint saved: {checkpoint}; run the same command to resume from it"
                if checkpoint is not None else "that step was not finite, so it was not saved; the same command resumes "
                + (f"from the newest checkpoint, {newest}" if newest is not None else "from step 0 (no checkpoint was saved)"))
        super().__init__(f"stopped by {self.signal_name} after step {step} of {total}; {kept}")

    @property
    def exit_code(self) -> int:
        """The shell's code for a process ended by the signal (143 for SIGTERM, 130 for SIGINT)."""
        return 128 + self.signum


class StopRequests:
    """``with StopRequests() as stop:`` SIGTERM and SIGINT set ``stop.signum`` instead of ending the
    process; the previous handlers come back on exit. Outside the main thread (where Python cannot
    install handlers) it does nothing and a signal acts as before."""

    def __init__(self, announce: bool = True) -> None:
        self.signum: int | None = None
        self.announce = announce
        self._pid = os.getpid()
        self._previous: dict[int, Callable | int | None] = {}

    def __enter__(self) -> "StopRequests":
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                self._previous[sig] = signal.signal(sig, self._received)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._restore()

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def _restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self._previous = {}

    def _received(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:  # the second one: stop now, as the signal would without us
            self._restore()
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            os.kill(os.getpid(), signum)
            return
        self.signum = signum
        # A data-loader worker forked with this handler gets Ctrl-C too (the terminal's whole process
        # group), and a scheduler may signal every process of the job: it keeps serving batches for
        # the step the trainer finishes, silently, and ends on the next signal (the loader's own
        # terminate() at shutdown).
        if self.announce and os.getpid() == self._pid:
            print(f"\n{signal.Signals(signum).name} received: stopping after this step with a checkpoint "
                  f"(send it again to stop at once, without one)", file=sys.stderr, flush=True)
