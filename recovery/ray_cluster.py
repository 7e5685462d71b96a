"""Ray, only when asked for (``--ray ADDRESS``): connect with a clear error, shard episodes.

``local`` starts a Ray instance on this machine; ``auto`` joins the one ``ray start`` made here;
``HOST:PORT`` (or ``ray://HOST:PORT``) joins a cluster. Reachability is checked before anything
starts, so an unreachable address fails at once with nothing half-built.
"""

from __future__ import annotations

import socket
from typing import Any

from recovery.core.errors import RecoveryError


class RayUnavailableError(RecoveryError, RuntimeError):
    """Ray is not installed, or its cluster cannot be reached."""


def _check_reachable(address: str, timeout_s: float = 3.0) -> None:
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise RayUnavailableError(f"Ray address {address!r} is not HOST:PORT, 'local' or 'auto'")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise RayUnavailableError(f"Ray cluster at {address} cannot be reached ({exc}): start it with "
                                  "`ray start --head` there, or use --ray local") from exc


def connect(address: str, num_cpus: int | None = None) -> Any:
    """The initialised ``ray`` module."""
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailableError("--ray needs Ray: pip install 'agentic-recovery[ray]'") from exc
    if ray.is_initialized():
        return ray
    if address == "local":
        ray.init(num_cpus=num_cpus, include_dashboard=False, logging_level="WARNING")
        return ray
    if address != "auto":
        _check_reachable(address)
    try:
        ray.init(address=address, logging_level="WARNING")
    except ConnectionError as exc:
        raise RayUnavailableError(f"Ray cluster at {address!r} cannot be reached: {exc}") from exc
    return ray
