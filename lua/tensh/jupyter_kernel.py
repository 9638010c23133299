"""The tensh Jupyter kernel's wrapper: ipykernel speaks Jupyter's messaging
protocol (sockets, signatures, heartbeat, control, interrupts); a tensh
process (`tensh --jupyter kernel IN OUT`, lua/tensh/jupyter.lua) runs the
code. Requests go to tensh as JSON lines on the pipe IN, answers come back
on OUT; tensh's stdout and stderr are pipes read here and sent as stream
messages while a cell runs. `tensh --jupyter install` writes this file
beside kernel.json; it is embedded in the tensh binary.

Why a wrapper and not libzmq in C: ipykernel (Debian's python3-ipykernel)
is the protocol's reference implementation, already on every machine that
runs Jupyter, and it gets the details right (HMAC signing, the control
channel, heartbeats, shutdown and restart, message versions) that a C
reimplementation would have to grow and keep up to date."""
import argparse
import codecs
import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import time

from ipykernel.kernelapp import IPKernelApp
from ipykernel.kernelbase import Kernel

TENSH = "tensh"


class TenshKernel(Kernel):
    implementation = "tensh"
    implementation_version = "0.1"
    language = "lua"
    language_version = "5.4"
    language_info = {
        "name": "lua",
        "mimetype": "text/x-lua",
        "file_extension": ".lua",
        "codemirror_mode": "lua",
        "pygments_lexer": "lua",
    }
    banner = "tensh"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._start()

    # ---- the tensh process ----------------------------------------------------

    def _start(self):
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        self.proc = subprocess.Popen(
            [TENSH, "--jupyter", "kernel", str(req_r), str(rep_w)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            pass_fds=(req_r, rep_w))
        os.close(req_r)
        os.close(rep_w)
        self.req = os.fdopen(req_w, "wb", buffering=0)
        self.rep = rep_r
        self.rep_buf = b""
        self.decoders = {name: codecs.getincrementaldecoder("utf-8")(errors="replace") for name in ("stdout", "stderr")}
        for f in (self.proc.stdout, self.proc.stderr, self.rep):
            fd = f if isinstance(f, int) else f.fileno()
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
        ready = self._wait_reply(stream=False)
        if ready is None or ready.get("type") != "ready":
            raise RuntimeError("tensh did not start: %r" % (ready,))
        self.banner = ready.get("banner", self.banner)
        self.implementation_version = ready.get("version", self.implementation_version)

    def _forward(self, fd, name, stream):
        """what the process printed on fd, sent as a stream message"""
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return False
        if not data:
            return False
        text = self.decoders[name].decode(data)
        if text and stream:
            self.send_response(self.iopub_socket, "stream", {"name": name, "text": text})
        return True

    def _drain(self, stream):
        while self._forward(self.proc.stdout.fileno(), "stdout", stream):
            pass
        while self._forward(self.proc.stderr.fileno(), "stderr", stream):
            pass

    def _wait_reply(self, stream=True):
        """the next message of tensh's that is not a display: streams and
        displays in the meantime go to the front end, in order"""
        fds = [self.rep, self.proc.stdout.fileno(), self.proc.stderr.fileno()]
        self.interrupted = None
        while True:
            while b"\n" in self.rep_buf:
                line, self.rep_buf = self.rep_buf.split(b"\n", 1)
                msg = json.loads(line.decode("utf-8", errors="replace"))
                # tensh flushed its output before this message: send that first
                self._drain(stream)
                if msg.get("type") == "display":
                    if stream:
                        self.send_response(self.iopub_socket, "display_data",
                                           {"data": msg["data"], "metadata": msg.get("metadata") or {}})
                    continue
                return msg
            try:
                ready, _, _ = select.select(fds, [], [], 0.5 if self.interrupted else None)
            except KeyboardInterrupt:
                # the front end's interrupt: tensh stops the cell and answers with
                # an error. Jupyter signals the process group, so tensh has its
                # own SIGINT; one goes to it from here only if it has not
                # answered in half a second (a second one would stop the next cell).
                self.interrupted = time.monotonic()
                continue
            if self.interrupted and not ready and time.monotonic() - self.interrupted >= 0.5:
                self.interrupted = None
                self._interrupt()
            if self.proc.stdout.fileno() in ready:
                self._forward(self.proc.stdout.fileno(), "stdout", stream)
            if self.proc.stderr.fileno() in ready:
                self._forward(self.proc.stderr.fileno(), "stderr", stream)
            if self.rep in ready:
                try:
                    data = os.read(self.rep, 1 << 20)
                except BlockingIOError:
                    continue
                if not data:  # tensh is gone
                    self._drain(stream)
                    return None
                self.rep_buf += data

    def _interrupt(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGINT)

    def _request(self, msg):
        try:
            self.req.write(json.dumps(msg).encode() + b"\n")
        except BrokenPipeError:
            return None
        return self._wait_reply()

    def _died(self):
        code = self.proc.wait()
        self._start()  # a new process for the next cell
        return {"type": "result", "status": "error", "ename": "KernelDied",
                "evalue": "the tensh process ended (exit status %s); a new one started: globals are gone" % code,
                "traceback": []}

    # ---- Jupyter's requests -----------------------------------------------------

    def do_execute(self, code, silent, store_history=True, user_expressions=None, allow_stdin=False):
        reply = self._request({"type": "execute", "code": code, "count": self.execution_count})
        if reply is None:
            reply = self._died()
        if reply.get("status") == "error":
            if not silent:
                self.send_response(self.iopub_socket, "error", {
                    "ename": reply["ename"], "evalue": reply["evalue"], "traceback": reply["traceback"]})
            return {"status": "error", "execution_count": self.execution_count, "ename": reply["ename"],
                    "evalue": reply["evalue"], "traceback": reply["traceback"]}
        if not silent and reply.get("text") is not None:
            self.send_response(self.iopub_socket, "execute_result", {
                "execution_count": self.execution_count, "data": {"text/plain": reply["text"]}, "metadata": {}})
        return {"status": "ok", "execution_count": self.execution_count, "payload": [], "user_expressions": {}}

    def do_complete(self, code, cursor_pos):
        reply = self._request({"type": "complete", "code": code, "cursor_pos": cursor_pos}) or {}
        return {"status": "ok", "matches": reply.get("matches", []), "cursor_start": reply.get("cursor_start", cursor_pos),
                "cursor_end": reply.get("cursor_end", cursor_pos), "metadata": {}}

    def do_inspect(self, code, cursor_pos, detail_level=0, omit_sections=()):
        reply = self._request({"type": "inspect", "code": code, "cursor_pos": cursor_pos}) or {}
        found = bool(reply.get("found"))
        return {"status": "ok", "found": found, "data": {"text/plain": reply["text"]} if found else {}, "metadata": {}}

    def do_is_complete(self, code):
        reply = self._request({"type": "is_complete", "code": code}) or {}
        status = reply.get("status", "unknown")
        return {"status": status, "indent": "  " if status == "incomplete" else ""}

    def do_shutdown(self, restart):
        try:
            self.req.write(b'{"type": "shutdown"}\n')
            self.req.close()
            self.proc.wait(timeout=5)
        except Exception:
            self.proc.kill()
        return {"status": "ok", "restart": restart}


def main():
    global TENSH
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--tensh", default=os.environ.get("TENSH", "tensh"))
    known, rest = parser.parse_known_args()
    TENSH = known.tensh
    IPKernelApp.launch_instance(argv=rest, kernel_class=TenshKernel)


if __name__ == "__main__":
    main()
