"""Changes of one table `public.t`, for sink tests."""
from derived.change import Change, Position, Version


def ch(i: int, op: str = "upsert", version: int = 10) -> Change:
    return Change("public.t", op, {"id": i}, str(i), None if op == "delete" else {"id": i},
                  Version(version, 1, version), Position("x", 0, i))
