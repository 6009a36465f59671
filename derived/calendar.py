"""The proleptic Gregorian calendar as day numbers: shared by the wire readers (connectors) and
the computed fields (derived/transforms.py). Pure."""


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date, astronomical year (0 is 1 BC)."""
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * ((month + 9) % 12) + 2) // 5 + day - 1
    return era * 146_097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719_468
