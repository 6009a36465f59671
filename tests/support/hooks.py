"""Transform hooks the integration tests configure (tables.N.transform.hook)."""


def body_length(row: dict) -> dict:
    """Adds the body's length; refuses a row whose status is 'poison' (a dead letter)."""
    if row.get("status") == "poison":
        raise ValueError("poison status")
    return {**row, "body_len": len(row["body"]) if row.get("body") is not None else None}
