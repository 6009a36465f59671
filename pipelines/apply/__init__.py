"""Applying changes: the batch apply into the stores (records decoded by connectors/envelope.py), the
stores and their index definitions from the config, the rebuild's partition fold."""
