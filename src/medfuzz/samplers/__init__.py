"""TCES building blocks: entity vocabularies, recognition/typing, embeddings and the samplers (RandS, PDWS,
DiscreteZOO). Harness-free."""
