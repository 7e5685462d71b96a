"""openpi protocol over real sockets on 127.0.0.1: our client against our server (`serve-policy`)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import msgpack
import numpy as np
import pytest
from websockets.sync.client import connect
from websockets.sync.server import serve

from recovery.evaluation.runner import EvalConfig, evaluate
from vla_wrappers.openpi import msgpack_numpy
from vla_wrappers.openpi.client import ClientConfig, OpenPIClientPolicy, PolicyServerError
from vla_wrappers.openpi.wire import resize_with_pad

REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(policy: str, port: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "recovery", "serve-policy", "--policy", policy, "--host", "127.0.0.1",
         "--port", str(port)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as reply:
                if reply.status == 200:
                    return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"server did not start: {proc.communicate()[1]}")


@pytest.fixture
def server():
    procs = []

    def start(policy: str = "zero", port: int | None = None):
        port = port or _free_port()
        procs.append(_start_server(policy, port))
        return procs[-1], port

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def _obs() -> dict:
    rng = np.random.default_rng(0)
    return {"state": rng.normal(size=8), "agentview_image": rng.integers(0, 255, (256, 256, 3), dtype=np.uint8),
            "wrist_image": rng.integers(0, 255, (256, 256, 3), dtype=np.uint8)}


def _client(port: int, **kw) -> OpenPIClientPolicy:
    client = OpenPIClientPolicy(config=ClientConfig(port=port, attempts=2, backoff_s=0.1, **{"timeout_s": 5.0, **kw}))
    client.reset("pick up the alphabet soup and place it in the basket")
    return client


def test_msgpack_numpy_round_trip():
    value = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.int64(3), "c": "text", "d": [1, 2.5]}
    back = msgpack_numpy.unpackb(msgpack_numpy.packb(value))
    np.testing.assert_array_equal(back["a"], value["a"])
    assert back["a"].dtype == np.float32 and back["b"] == 3 and back["c"] == "text" and back["d"] == [1, 2.5]


def test_resize_with_pad_keeps_aspect():
    out = resize_with_pad(np.full((100, 200, 3), 255, np.uint8), 224)
    assert out.shape == (224, 224, 3) and out.dtype == np.uint8
    assert out[0].max() == 0 and out[112].min() == 255  # black bars above, image in the middle


def test_round_trip_and_health(server):
    _, port = server("zero")
    client = _client(port)
    out = client.infer(_obs())
    assert out.actions.shape == (1, 7) and client.metadata == {"policy": "zero"}
    client.close()


def test_killed_server_mid_episode_then_back(server):
    proc, port = server("zero")
    client = _client(port)
    client.infer(_obs())
    proc.kill()
    proc.wait()
    with pytest.raises(PolicyServerError, match=f"127.0.0.1:{port} unreachable after 2 attempts"):
        client.infer(_obs())
    server("zero", port)  # a restarted server: the client reconnects by itself
    assert client.infer(_obs()).actions.shape == (1, 7)
    client.close()


def test_stale_reply_after_timeout_is_never_used(server):
    _, port = server("tests.policies:CountingSlowPolicy", )
    client = _client(port, timeout_s=0.5)
    with pytest.raises(PolicyServerError, match="did not answer within 0.5 s"):
        client.infer(_obs())
    time.sleep(1.5)  # the late reply to call 1 arrives meanwhile, on the dropped connection
    assert client.infer(_obs()).actions[0, 0] == pytest.approx(0.02)  # call 2's answer, not call 1's
    client.close()


def test_malformed_frame_gets_error_and_close_1011(server):
    _, port = server("zero")
    with connect(f"ws://127.0.0.1:{port}") as ws:
        ws.recv()  # metadata
        ws.send(b"\xc1 not msgpack")
        error = ws.recv()
        assert isinstance(error, str) and "Traceback" in error
        with pytest.raises(Exception):
            ws.recv()
        assert ws.close_code == 1011
    assert _client(port).infer(_obs()).actions.shape == (1, 7)  # the server survives


def test_malformed_reply_is_a_clear_error():
    port = _free_port()

    def handler(ws):
        ws.send(msgpack_numpy.packb({}))
        ws.recv()
        ws.send(b"\xc1 garbage")
        time.sleep(0.5)

    with serve(handler, "127.0.0.1", port) as srv:
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        with pytest.raises(PolicyServerError, match="malformed frame"):
            _client(port).infer(_obs())
        srv.shutdown()


def _raw_array(dtype: str, shape: list, data: bytes) -> dict:
    """An ``__ndarray__`` map as a hostile or broken peer may send it, unchecked."""
    return {b"__ndarray__": True, b"data": data, b"dtype": dtype, b"shape": shape}


OBJECT_ARRAY = _raw_array("|O", [8], b"\x41" * 64)  # eight pointers to 0x4141414141414141


@pytest.mark.parametrize("state, reason", [
    (OBJECT_ARRAY, "dtype '|O' is not a bool / integer / float / complex type"),
    (_raw_array("<f8", [8], b"\0" * 56), "needs 64 bytes, got 56"),
], ids=["object dtype", "short buffer"])
def test_hostile_request_gets_error_reply_and_server_serves_on(server, state, reason):
    _, port = server("zero")
    with connect(f"ws://127.0.0.1:{port}") as ws:
        ws.recv()  # metadata
        ws.send(msgpack.packb({"observation/state": state, "prompt": "x"}))
        error = ws.recv(timeout=10)
        assert isinstance(error, str) and "MalformedFrameError" in error and reason in error
        with pytest.raises(Exception):
            ws.recv(timeout=10)
        assert ws.close_code == 1011
    assert _client(port).infer(_obs()).actions.shape == (1, 7)  # the server survives


@pytest.mark.parametrize("metadata, reply, message", [
    (msgpack.packb({"x": OBJECT_ARRAY}), b"", "sent malformed metadata: .*dtype '\\|O'"),
    (msgpack.packb({}), msgpack.packb({"actions": OBJECT_ARRAY}), "sent a malformed frame: .*dtype '\\|O'"),
], ids=["metadata", "reply"])
def test_hostile_server_is_a_clear_error(metadata, reply, message):
    port = _free_port()

    def handler(ws):
        ws.send(metadata)
        for _ in ws:
            ws.send(reply)

    with serve(handler, "127.0.0.1", port) as srv:
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        with pytest.raises(PolicyServerError, match=message):
            _client(port).infer(_obs())


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="needs POSIX job control signals")
def test_stopped_server_fails_within_the_timeout(server):
    proc, port = server("zero")
    client = _client(port, timeout_s=1.0)
    obs = {"state": np.zeros(8)}  # small: the stopped server's socket buffers take it whole
    client.infer(obs)
    proc.send_signal(signal.SIGSTOP)  # the server neither replies nor completes a closing handshake
    try:
        start = time.monotonic()
        with pytest.raises(PolicyServerError, match="did not answer within 1.0 s"):
            client.infer(obs)
        assert time.monotonic() - start < 1.6
    finally:
        proc.send_signal(signal.SIGCONT)
    assert client.infer(obs).actions.shape == (1, 7)  # the server is back: the client reconnects
    client.close()


@pytest.mark.sim
def test_server_down_marks_episodes_as_policy_errors(tmp_path):
    port = _free_port()
    records = evaluate(EvalConfig(
        suite="libero_object", tasks=(0,), episodes=2, policy="openpi", max_steps=5, camera_size=64,
        policy_options={"port": str(port), "attempts": "2", "backoff_s": "0.05"}, out=tmp_path / "r.jsonl",
        progress=False))
    assert len(records) == 2
    assert all(f"127.0.0.1:{port} unreachable" in r["error"] for r in records)


@pytest.mark.sim
def test_episode_over_the_socket(server, tmp_path):
    _, port = server("zero")
    (record,) = evaluate(EvalConfig(
        suite="libero_object", tasks=(0,), episodes=1, policy="openpi", max_steps=6, camera_size=64,
        policy_options={"port": str(port)}, out=tmp_path / "r.jsonl", progress=False))
    assert record["error"] is None and record["steps"] == 6 and record["inferences"] == 6
