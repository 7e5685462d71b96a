"""A Policy that asks a remote openpi policy server (pi0 / pi0.5 / pi0-FAST on a GPU box)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import websockets
from websockets.sync.client import ClientConnection, connect

from recovery.core.robot import Observation, RobotBackend
from vla_wrappers.base import Policy, PolicyError, PolicyOutput, config_from_options
from vla_wrappers.openpi import msgpack_numpy
from vla_wrappers.openpi.wire import to_request

log = logging.getLogger(__name__)


class PolicyServerError(PolicyError):
    """The server is unreachable, dropped us, answered with an error, or answered too late."""


@dataclass(frozen=True)
class ClientConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    timeout_s: float = 10.0  # per inference; a later reply is never used
    attempts: int = 4  # connection attempts per inference, with exponential backoff
    backoff_s: float = 0.5
    image_size: int = 224
    send_object_poses: bool = False  # for our own privileged policies behind `recovery serve-policy`
    api_key: str | None = None

    @property
    def uri(self) -> str:
        return f"ws://{self.host}:{self.port}"


class OpenPIClientPolicy(Policy):
    needs_images = True

    def __init__(self, backend: RobotBackend | None = None, config: ClientConfig = ClientConfig()):
        self.config = config
        self.metadata: dict = {}
        self._ws: ClientConnection | None = None
        self._prompt = ""

    @classmethod
    def from_options(cls, backend: RobotBackend | None, options: dict[str, str]) -> OpenPIClientPolicy:
        return cls(backend, config_from_options(ClientConfig, options))

    def reset(self, instruction: str) -> None:
        self._prompt = instruction

    def infer(self, obs: Observation) -> PolicyOutput:
        request = msgpack_numpy.packb(
            to_request(obs, self._prompt, self.config.image_size, self.config.send_object_poses)
        )
        reply = self._round_trip(request)
        if not isinstance(reply, dict) or "actions" not in reply:
            raise PolicyServerError(f"{self.config.uri} replied without 'actions': {type(reply).__name__}")
        actions = np.asarray(reply["actions"], dtype=np.float64)
        return PolicyOutput(actions, {k: v for k, v in reply.items() if k != "actions"})

    def close(self) -> None:
        self._drop(grace_s=self.config.timeout_s)

    # --- connection ----------------------------------------------------------------------------
    def _round_trip(self, request: bytes):
        """Send one request and wait for its reply. A connection lost before the reply is retried
        (inference has no side effects); a timeout drops the connection so that the late reply
        can never be read as the answer to a later request."""
        last_error: Exception | None = None
        for attempt in range(self.config.attempts):
            if attempt:
                time.sleep(min(self.config.backoff_s * 2 ** (attempt - 1), 8.0))
            try:
                ws = self._connection()
                ws.send(request)
                frame = ws.recv(timeout=self.config.timeout_s)
            except TimeoutError as exc:
                self._drop()
                raise PolicyServerError(
                    f"{self.config.uri} did not answer within {self.config.timeout_s} s; reply discarded"
                ) from exc
            except (OSError, websockets.exceptions.WebSocketException) as exc:
                self._drop()
                last_error = exc
                log.warning("policy server %s: %s (attempt %d/%d)", self.config.uri, exc, attempt + 1,
                            self.config.attempts)
                continue
            if isinstance(frame, str):  # the server's traceback
                self._drop()
                raise PolicyServerError(f"policy server {self.config.uri} failed:\n{frame}")
            try:
                return msgpack_numpy.unpackb(frame)
            except ValueError as exc:
                self._drop()
                raise PolicyServerError(f"{self.config.uri} sent a malformed frame: {exc}") from exc
        raise PolicyServerError(
            f"policy server {self.config.uri} unreachable after {self.config.attempts} attempts: {last_error}"
        )

    def _connection(self) -> ClientConnection:
        if self._ws is None:
            headers = {"Authorization": f"Api-Key {self.config.api_key}"} if self.config.api_key else None
            ws = connect(self.config.uri, additional_headers=headers, compression=None, max_size=None,
                         open_timeout=self.config.timeout_s)
            try:
                self.metadata = msgpack_numpy.unpackb(ws.recv(timeout=self.config.timeout_s))
            except msgpack_numpy.MalformedFrameError as exc:
                _close(ws, grace_s=0.0)
                raise PolicyServerError(f"{self.config.uri} sent malformed metadata: {exc}") from exc
            except Exception:
                _close(ws, grace_s=0.0)
                raise
            self._ws = ws
        return self._ws

    def _drop(self, grace_s: float = 0.0) -> None:
        """After a failure the server's half of the closing handshake is not waited for: a server that
        stopped answering would hold us for the library's close timeout on top of ours."""
        if self._ws is not None:
            _close(self._ws, grace_s)
            self._ws = None


def _close(ws: ClientConnection, grace_s: float) -> None:
    """Close, waiting at most ``grace_s`` for the server to complete the closing handshake."""
    ws.close_timeout = grace_s  # read by close(), which takes no timeout of its own
    ws.close()
