"""``recovery ros up PARAMS.yaml``: start the nodes a parameter file lists, as plain processes.

What ``launch/recovery.launch.py`` does where launch_ros is installed, without it: one process per
node, each given the same parameter file and renamed to its section's name. Ctrl-C (or SIGTERM)
stops them all; so does any one of them exiting, as a required node would under launch.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from ros_nodes.launch_spec import NodeSpec, read_launch_spec

STOP_GRACE_S = 10.0


def node_command(spec: NodeSpec, params: Path) -> list[str]:
    return [sys.executable, "-m", spec.module, "--ros-args", "-r", f"__node:={spec.name}",
            "--params-file", str(params)]


def up(params: Path) -> int:
    """Run until interrupted or a node exits; returns the first non-zero exit code (else 0)."""
    params = Path(params).resolve()
    specs = read_launch_spec(params)
    procs = {spec.name: subprocess.Popen(node_command(spec, params)) for spec in specs}
    print(f"started {', '.join(f'{n} (pid {p.pid})' for n, p in procs.items())}", flush=True)
    stopping: list[int] = []
    previous = {sig: signal.signal(sig, lambda s, f: stopping.append(s)) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stopping and all(p.poll() is None for p in procs.values()):
            time.sleep(0.1)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        code = _stop(procs)
    return 0 if stopping else code


def _stop(procs: dict[str, subprocess.Popen]) -> int:
    """SIGINT to every node still running (rclpy shuts down cleanly on it), then kill stragglers."""
    for proc in procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + STOP_GRACE_S
    for name, proc in procs.items():
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f"{name} did not stop within {STOP_GRACE_S} s: killed", file=sys.stderr, flush=True)
            proc.kill()
            proc.wait()
    failed = [(n, p.returncode) for n, p in procs.items() if p.returncode not in (0, -signal.SIGINT)]
    for name, rc in failed:
        print(f"{name} exited with code {rc}", file=sys.stderr, flush=True)
    return failed[0][1] if failed else 0
