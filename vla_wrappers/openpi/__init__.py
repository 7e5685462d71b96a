"""The openpi policy-server protocol, both sides: talk to pi0 / pi0.5 / pi0-FAST servers, or serve ours.

One websocket per client. The server first sends a msgpack metadata frame; then each request is a
msgpack observation and each reply a msgpack dict holding ``actions`` (H x 7). An error comes back
as a text frame holding the traceback, then a close with code 1011. ``GET /healthz`` answers OK.
"""
