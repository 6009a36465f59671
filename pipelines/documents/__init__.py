"""Nested documents (`documents:`): one document per root row, built from related tables.

Read in this order:
- document_specs.py  the config section (pipelines/document_config.py, checked up front) resolved
                     against the catalog into the state model's specs (derived/nested.py: pure),
                     and whether a state was built for them (its fingerprint);
- nested_fold.py     one micro-batch folded into a document's state (pure);
- documents_query.py the Structured Streaming query that keeps the state and writes the stores;
- snapshot_sweep.py  after a re-snapshot, the documents no root makes any more.
Lower, shared: rows typed for documents (pipelines/apply/typed_rows.py) and where the query's
checkpoint lives (pipelines/state/documents_state.py). `verify` and `dlq replay` for documents are
parts of those commands (pipelines/ops/verify_documents.py, dead_letter_documents.py).
"""
