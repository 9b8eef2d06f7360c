"""Running the ``mnemon`` executable: no shell, a timeout, an output cap, one lock per
data directory; and turning a failed run into a typed error."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import IO

import attrs

from mnemon_sm.errors import InvalidInput, MnemonError, StorageError, UnknownInsight, UnknownSpace

KILL_GRACE_S = 1.5  # between SIGTERM and SIGKILL, as dsh-mnemon
_CHUNK = 65_536
_STORE_MISSING = re.compile(
    r"\bstore\b[^\n]*\b(?:not found|does not exist|doesn't exist)|no such store|unknown store"
)
_INSIGHT_MISSING = re.compile(
    r"not found|does not exist|doesn't exist|no such insight|already deleted|is deleted"
    r"|not active|no active insight"
)
_VALIDATION = re.compile(
    r"\binvalid\b|must be|\brequired\b|too long|too large|too many|exceed|out of range"
    r"|already exists|not allowed|cannot be empty|is empty"
)


# -- running a child ------------------------------------------------------------------------


@attrs.frozen
class ProcessOutput:
    """What a finished child printed, and its exit code."""

    code: int
    stdout: str
    stderr: str


class _Pump:
    """Reads a child's stdout and stderr on two threads, counting both against one cap."""

    def __init__(self, streams: Sequence[IO[bytes]], cap: int, kill: Callable[[], None]) -> None:
        self._cap, self._kill = cap, kill
        self._guard = threading.Lock()
        self._total = 0
        self.overflow = False
        self._streams = list(streams)
        self._parts: list[list[bytes]] = [[] for _ in streams]
        self._threads = [
            threading.Thread(target=self._read, args=(stream, parts), daemon=True)
            for stream, parts in zip(self._streams, self._parts, strict=True)
        ]
        for thread in self._threads:
            thread.start()

    def _read(self, stream: IO[bytes], parts: list[bytes]) -> None:
        fd = stream.fileno()
        while True:
            try:
                data = os.read(fd, _CHUNK)
            except OSError:
                return
            if not data:
                return
            with self._guard:
                if self.overflow:
                    return
                self._total += len(data)
                if self._total > self._cap:
                    self.overflow = True
                    self._kill()
                    return
                parts.append(data)

    def finish(self) -> list[str]:
        """Wait for the readers (the child has exited) and decode what they read."""
        for thread in self._threads:
            thread.join(timeout=KILL_GRACE_S)
        if not any(thread.is_alive() for thread in self._threads):
            for stream in self._streams:  # a reader still blocked keeps its descriptor
                stream.close()
        with self._guard:
            return [b"".join(parts).decode("utf-8", "replace") for parts in self._parts]


def _signal(child: subprocess.Popen[bytes], *, hard: bool) -> None:
    """SIGTERM (or SIGKILL) to the child's process group, if the child was not reaped yet."""
    if child.poll() is not None:
        return
    if os.name == "posix":
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGKILL if hard else signal.SIGTERM)
    elif hard:
        child.kill()
    else:
        child.terminate()


def run_process(
    argv: Sequence[str], *, timeout_ms: int, cap: int, label: str = "mnemon"
) -> ProcessOutput:
    """Run ``argv`` (no shell, stdin closed) and collect its output.

    Raises ``StorageError`` when it cannot start, outlives ``timeout_ms`` (SIGTERM, then
    SIGKILL after :data:`KILL_GRACE_S`), or prints more than ``cap`` bytes (SIGKILL).
    """
    try:
        child = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            shell=False,
            close_fds=True,
            start_new_session=os.name == "posix",
        )
    except (OSError, ValueError) as exc:
        raise StorageError(f"{label} could not be started: {exc}") from exc
    assert child.stdout is not None and child.stderr is not None
    pump = _Pump([child.stdout, child.stderr], cap, lambda: _signal(child, hard=True))
    timed_out = False
    try:
        try:
            child.wait(timeout=timeout_ms / 1000)
        except subprocess.TimeoutExpired:
            timed_out = True
            _signal(child, hard=False)
            try:
                child.wait(timeout=KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                _signal(child, hard=True)
                child.wait()
    finally:
        if child.poll() is None:  # interrupted while waiting
            _signal(child, hard=True)
            child.wait()
        stdout, stderr = pump.finish()
    if timed_out:
        raise StorageError(f"{label} timed out after {timeout_ms} ms and was stopped")
    if pump.overflow:
        raise StorageError(f"{label} printed more than {cap} bytes and was killed")
    return ProcessOutput(child.returncode, stdout, stderr)


def _failure(label: str, out: ProcessOutput, *, insight_op: bool) -> MnemonError:
    """The typed error for a non-zero exit."""
    text = (out.stderr.strip() or out.stdout.strip())[:4000]
    message = f"{label} exited {out.code}: {text}"
    low = text.lower()
    if _STORE_MISSING.search(low):
        return UnknownSpace(message)
    if insight_op and _INSIGHT_MISSING.search(low):
        return UnknownInsight(message)
    if _VALIDATION.search(low):
        return InvalidInput(message)
    return StorageError(message)
