"""Notice that the Ray cluster's head is gone, and say so, before Ray ends the driver.

When the head (its control store, GCS) dies, a driver's calls keep waiting: results of tasks
already running on other nodes still arrive, nothing new can start, and after 60 s Ray's core
worker ends the process abruptly ("Failed to connect to GCS within 60 seconds ... The program
will terminate"), with no word from flopwatch and the run half done. A thread here asks the GCS
for the start of an HTTP/2 conversation every `PERIOD_S` (`ray_access.tcp_problem`: the client
preface, answered by the server's SETTINGS frame); after `MISSES` failures in a row the head
counts as lost. A TCP connect alone is not enough: the kernel completes the handshake for a
listening socket whose process is stopped or hung, so a head that is up but silent (SIGSTOP,
a machine stalled in swap) looked alive for ever while the driver waited on it; only the
process itself sends SETTINGS. Then the driver's loop raises `HeadLost` at its next turn
(`check()`), and the command ends with one clear line (exit 2) and every finished result already
committed to the store. In the command-line program (`exit_if_stuck()`), if the loop does not come round within `GRACE_S`
(blocked in a call that will never answer), the thread says the same itself and ends the
process, still before Ray would; a library caller only gets the exception.
"""

from __future__ import annotations

import os
import sys
import threading

import ray

from pipeline.fleet.ray_access import Address, tcp_problem

PERIOD_S = 1.0
# How long one probe waits for the GCS's SETTINGS frame: a loaded head answers in milliseconds,
# and three misses of this length in a row are what a silent head costs before it is reported.
PROBE_TIMEOUT_S = 5.0
MISSES = 3
GRACE_S = 20.0
EXIT_CODE = 2
_exit_if_stuck = False


def exit_if_stuck() -> None:
    """The command-line program's choice: end the process when the loop cannot report the loss."""
    global _exit_if_stuck
    _exit_if_stuck = True


class HeadLost(RuntimeError):
    """The Ray head went away during a command; the message says what is kept and what to do."""


class _Watch:
    def __init__(self, address: str):
        self.address = address
        host, _, port = address.rpartition(":")
        self._target = Address(host.strip("[]"), int(port), "the head")
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="flopwatch-headwatch", daemon=True)
        self._thread.start()

    def message(self) -> str:
        return (f"lost the Ray cluster's head: its control store at {self.address} stopped answering "
                f"during the run")

    def _reachable(self) -> bool:
        return tcp_problem(self._target, PROBE_TIMEOUT_S) is None

    def _run(self) -> None:
        misses = 0
        while not self._stop.wait(PERIOD_S):
            if not ray.is_initialized():
                return  # the driver left the cluster itself: nothing to watch
            misses = 0 if self._reachable() else misses + 1
            if misses >= MISSES:
                self.lost.set()
                break
        if not _exit_if_stuck or self._stop.wait(GRACE_S) or not self.lost.is_set():
            return
        # The driver's loop did not come round to report it: say it here, before Ray ends us.
        print(f"flopwatch: error: {self.message()}; the results finished so far are in the store; "
              "start the cluster again and run `flopwatch run --resume`", file=sys.stderr, flush=True)
        os._exit(EXIT_CODE)

    def stop(self) -> None:
        self._stop.set()


_WATCH: dict[str, _Watch] = {}


def start() -> None:
    """Watch the head of this driver's Ray connection (once per connection)."""
    address = ray.get_runtime_context().gcs_address
    if address and address not in _WATCH:
        stop()
        _WATCH[address] = _Watch(address)


def check() -> None:
    """Raise `HeadLost` when the watched head is gone."""
    for watch in _WATCH.values():
        if watch.lost.is_set():
            raise HeadLost(watch.message())


def lost() -> bool:
    return any(w.lost.is_set() for w in _WATCH.values())


def stop() -> None:
    """Stop watching (the command ends its connection)."""
    for watch in _WATCH.values():
        watch.stop()
    _WATCH.clear()


__all__ = ["EXIT_CODE", "HeadLost", "check", "lost", "start", "stop"]
