"""The search index sink (Elasticsearch, OpenSearch) and its generations behind an alias."""
