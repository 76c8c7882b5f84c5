"""A process that forks children for the API (the X12 mapping children of
``child.py``), so that the API, a threaded process, never forks itself.

A fork copies only the forking thread: a lock another thread held (the
database store thread's, pika's, a logging handler's) stays held in the child
forever, which is why Python 3.12 warns of any fork in a process with threads.
This server is one thread. The API's entry point starts it (``start``) before
the server's threads, as a new program (``subprocess``: fork-and-exec, safe
from any thread), and it imports the mapping code once; each child it forks
starts with that code loaded and maps at once.

It is not multiprocessing's fork server, which starts each child by running the
entry point's main module again (``settleq``'s CLI, or a bench's module), a
fraction of a second per file, and runs nothing else the API needs.

It knows nothing of what its children do: it runs ``python -m MODULE``, and
that module's main hands ``serve`` the function each child runs. The two talk
over a ``SOCK_SEQPACKET`` pair: the API sends a message (what to
map) with the child's descriptors (``SCM_RIGHTS``); the server forks, and
answers the child's pid. Its children are reaped by the kernel (``SIGCHLD``
ignored), so none is ever a zombie; the API waits for one's end through a
pidfd and kills it through the same pidfd (a pid may be reused, a pidfd is
not). The server ends when the API's end of the pair closes (the API exited),
and a server found dead is started again on the next file.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from typing import NoReturn

_PID = struct.Struct("<q")
_MESSAGE_BYTES = 1 << 16
_MAX_FDS = 8
# The longest a request waits for the server's answer (its pid): a server that
# does not answer (stuck, or still starting on a machine far too busy) is
# stopped, and the request goes on without a child.
ANSWER_S = 10.0
EXIT_S = 5.0  # the longest a stopped server is given to exit before it is killed
CAN_FORK: bool = all(
    hasattr(module, name)
    for module, name in ((os, "fork"), (os, "pidfd_open"), (socket, "recv_fds"))
)


Run = Callable[[bytes, list[int]], None]


class ForkServer:
    """The API's end: the server process (``python -m module``, whose main calls
    ``serve``) and its half of the pair. Started on first use, or by ``start``.
    ``answer_s`` and ``exit_s``: the waits for its answer and for its exit once
    stopped (``ANSWER_S``, ``EXIT_S``)."""

    def __init__(self, module: str, *, answer_s: float = ANSWER_S, exit_s: float = EXIT_S) -> None:
        self.module = module
        self.answer_s, self.exit_s = answer_s, exit_s
        self.lock = threading.Lock()  # one request and its answer at a time
        self.process: subprocess.Popen[bytes] | None = None
        self.socket: socket.socket | None = None

    def running(self) -> socket.socket:
        if self.socket is not None and self.process is not None and self.process.poll() is None:
            return self.socket
        self.stop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(  # noqa: S603 - this interpreter, this module
                [sys.executable, "-m", self.module, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                close_fds=True,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.settimeout(self.answer_s)
        self.socket = ours
        return ours

    def start(self) -> None:
        """Start the server now, so that the first request does not wait for it."""
        if CAN_FORK:
            with self.lock:
                self.running()

    def launch(self, message: bytes, fds: Sequence[int]) -> int:
        """Fork a child that runs the module's ``run(message, fds)``: its pid
        (``OSError`` if none could be made). The caller still owns ``fds``."""
        with self.lock:
            sock = self.running()
            try:
                socket.send_fds(sock, [message], list(fds))
                answer = sock.recv(_PID.size)
            except OSError:
                self.stop()  # started again on the next file
                raise
            if len(answer) != _PID.size:
                self.stop()
                raise OSError("the fork server ended")
            pid: int = _PID.unpack(answer)[0]
            if pid <= 0:
                raise OSError(-pid, "the fork server could not fork")
            return pid

    def stop(self) -> None:
        if self.socket is not None:
            self.socket.close()  # the server's recv sees the end, and it exits
            self.socket = None
        if self.process is not None:
            try:
                self.process.wait(timeout=self.exit_s)
            except subprocess.TimeoutExpired:  # it did not see the end: it is stuck
                self.process.kill()
                self.process.wait()
            self.process = None


def serve(fd: int, run: Run) -> NoReturn:
    """The server's whole life (its module's main, given the pair's descriptor):
    a child running ``run`` for each message, until the API is gone."""
    sock = socket.socket(fileno=fd)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps its children
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C is the API's to act on
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(sock, _MESSAGE_BYTES, _MAX_FDS)
        except OSError:
            break
        if not message:
            break  # the API's end closed
        try:
            pid = os.fork()
        except OSError as exc:
            pid = -(exc.errno or 1)
        if pid == 0:
            code = 1
            try:
                sock.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                run(message, fds)
                code = 0
            except BaseException:  # noqa: BLE001 - a bug: said, and the parent maps the rest
                traceback.print_exc()
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        try:
            sock.sendall(_PID.pack(pid))
        except OSError:
            break
    os._exit(0)
