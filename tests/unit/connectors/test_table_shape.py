from connectors.table_shape import Column, SchemaChange, diff

T = "public.t"
BASE = [Column(1, "id", "integer", False), Column(2, "name", "text", False), Column(3, "amount", "numeric(12,2)", False)]


def test_no_change_is_no_change():
    assert diff(T, BASE, list(BASE)) == []


def test_each_kind_is_told_apart_by_column_number():
    after = [Column(1, "id", "integer", False),                        # unchanged
             Column(2, "full_name", "text", False),                    # renamed
             Column(4, "note", "text", False),                         # added
             Column(5, "status", "text", True)]                        # added with a DEFAULT; 3 dropped
    assert diff(T, BASE, after) == [
        SchemaChange(T, "renamed", "full_name", old="name"),
        SchemaChange(T, "dropped", "amount"),
        SchemaChange(T, "added", "note"),
        SchemaChange(T, "added_with_default", "status"),
    ]


def test_a_drop_and_an_add_of_the_same_name_is_not_a_type_change():
    after = [BASE[0], BASE[1], Column(4, "amount", "text", False)]
    assert [c.kind for c in diff(T, BASE, after)] == ["dropped", "added"]


def test_a_rename_and_a_type_change_of_one_column_are_both_reported():
    after = [BASE[0], BASE[1], Column(3, "total", "numeric(20,4)", False)]
    assert diff(T, BASE, after) == [SchemaChange(T, "renamed", "total", old="amount"),
                                    SchemaChange(T, "retyped", "total", old="numeric(12,2)", new="numeric(20,4)")]


def test_columns_round_trip_through_json():
    assert [Column.from_json(c.as_json()) for c in BASE] == BASE
