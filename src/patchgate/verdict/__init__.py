"""The verdict stage: checks and score (:mod:`.judge`), and the document that carries
them, with its schema, version and reader (:mod:`.document`)."""
