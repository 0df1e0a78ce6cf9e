"""Item categories (``SOURCE_ITEMS.category``) that source adapters write and builders select items by.

Below both: a demo source writes the same categories as a published benchmark's adapter, and a builder picks its
items by them, without either importing the other.
"""

# QA over one long document (whole books, case files, the demo dossiers): never a retrieval item.
LONG_DOCUMENT_QA = "long-document QA"
SUMMARIZATION_CATEGORY = "summarization"
