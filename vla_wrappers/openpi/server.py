"""``recovery serve-policy``: serve any of our policies over the openpi protocol."""

from __future__ import annotations

import http
import logging
import threading
import traceback

from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode
from websockets.sync.server import Server, ServerConnection, serve

from vla_wrappers.base import Policy
from vla_wrappers.openpi import msgpack_numpy
from vla_wrappers.openpi.wire import from_request

log = logging.getLogger(__name__)


class PolicyServer:
    """One policy, many clients; inference is serialised (policies keep per-episode state).
    The policy is reset whenever a request's prompt differs from the previous one."""

    def __init__(self, policy: Policy, metadata: dict | None = None):
        self.policy = policy
        self.metadata = metadata or {}
        self._lock = threading.Lock()
        self._prompt: str | None = None

    def build(self, host: str, port: int) -> Server:
        return serve(self._handle, host, port, compression=None, max_size=None,
                     process_request=self._health_check)

    @staticmethod
    def _health_check(connection: ServerConnection, request):
        if request.path == "/healthz":
            return connection.respond(http.HTTPStatus.OK, "OK\n")
        return None

    def _handle(self, ws: ServerConnection) -> None:
        log.info("client connected: %s", ws.remote_address)
        ws.send(msgpack_numpy.packb(self.metadata))
        while True:
            try:
                frame = ws.recv()
            except ConnectionClosed:
                return
            try:
                reply = self._infer(frame)
            except Exception:
                tb = traceback.format_exc()
                log.error("request from %s failed:\n%s", ws.remote_address, tb)
                ws.send(tb)
                ws.close(CloseCode.INTERNAL_ERROR, "Internal server error")
                return
            ws.send(reply)

    def _infer(self, frame) -> bytes:
        if isinstance(frame, str):
            raise ValueError("expected a binary msgpack frame, got text")
        obs, prompt = from_request(msgpack_numpy.unpackb(frame))
        with self._lock:
            if prompt != self._prompt:
                self.policy.reset(prompt)
                self._prompt = prompt
            output = self.policy.infer(obs)
        return msgpack_numpy.packb({"actions": output.actions, **output.info})
