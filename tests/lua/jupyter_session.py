"""A Jupyter session with the tensh kernel, for tests/lua/test_jupyter.lua:
jupyter_client starts the kernel named tensh (from JUPYTER_PATH), runs the
requests below and prints what came back, one JSON object a line, for the
Lua test to check. A cell's record holds the iopub messages its request
caused (in order) and the shell reply's content."""
import json
import os
import signal
import sys
import time

from jupyter_client.manager import start_new_kernel

TIMEOUT = 120


def collect(kc, msg_id):
    """iopub messages of one request until the kernel is idle again, and its shell reply"""
    out = []
    while True:
        m = kc.get_iopub_msg(timeout=TIMEOUT)
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        t = m["msg_type"]
        if t == "status":
            if m["content"]["execution_state"] == "idle":
                break
            continue
        if t == "execute_input":
            continue
        out.append({"type": t, "content": m["content"]})
    while True:
        r = kc.get_shell_msg(timeout=TIMEOUT)
        if r["parent_header"].get("msg_id") == msg_id:
            return out, r["content"]


def main():
    km, kc = start_new_kernel(kernel_name="tensh", startup_timeout=TIMEOUT)
    try:
        info = kc.kernel_info(reply=True, timeout=TIMEOUT)["content"]
        print(json.dumps({"kind": "info", "content": info}))
        for line in sys.stdin:
            req = json.loads(line)
            kind = req["kind"]
            if kind == "execute":
                # an interrupted cell ends in an error, and ipykernel then aborts what
                # arrives until its stop_on_error timer runs (a race under load that
                # aborted the next cell): the interrupt cases ask it not to
                msg_id = kc.execute(req["code"], stop_on_error=not req.get("interrupt_after"))
                if req.get("interrupt_after"):
                    time.sleep(req["interrupt_after"])
                    if req.get("wrapper_only"):  # the wrapper alone gets it: it passes it on
                        os.kill(km.provisioner.process.pid, signal.SIGINT)
                    else:  # Jupyter's way: the kernel's process group
                        km.interrupt_kernel()
                iopub, reply = collect(kc, msg_id)
                print(json.dumps({"kind": kind, "iopub": iopub, "reply": reply}))
            elif kind == "complete":
                msg_id = kc.complete(req["code"], req["cursor_pos"])
                print(json.dumps({"kind": kind, "reply": collect(kc, msg_id)[1]}))
            elif kind == "inspect":
                msg_id = kc.inspect(req["code"], req["cursor_pos"])
                print(json.dumps({"kind": kind, "reply": collect(kc, msg_id)[1]}))
            elif kind == "is_complete":
                msg_id = kc.is_complete(req["code"])
                print(json.dumps({"kind": kind, "reply": collect(kc, msg_id)[1]}))
            sys.stdout.flush()
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)


main()
