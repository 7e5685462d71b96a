"""One base class for the errors this stack raises on purpose, so a caller can tell them from bugs."""


class RecoveryError(Exception):
    """Base of every error the stack raises deliberately (bad input, unsafe command, refused move)."""
