from pipelines.state.topic_ids import TopicIds


def test_ids_are_learned_once_and_a_new_id_is_a_recreation(tmp_path):
    ids = TopicIds(tmp_path)
    ids.learn({"a": "1", "b": "2"})
    ids.learn({"a": "9", "c": "3"})            # learning never overwrites: that is the check's job
    again = TopicIds(tmp_path)
    assert again.known == {"a": "1", "b": "2", "c": "3"}
    assert again.recreated({"a": "9", "b": "2", "d": "4"}) == ["a"]
