"""Applying changes: decoding records, the batch apply into the stores, the rebuild's partition fold."""
