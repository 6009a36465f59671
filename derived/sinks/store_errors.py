"""Errors of the stores."""


class StoreUnavailable(Exception):
    """The store did not accept the batch after retries; the batch must be retried as a whole
    (Spark re-runs it from the checkpoint)."""


class GenerationError(RuntimeError):
    """A generation that cannot be created or switched safely."""
