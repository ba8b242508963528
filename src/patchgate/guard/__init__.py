"""The accuracy stage: guards that judge whether a change kept the model's accuracy.

- :mod:`.base`: the guard protocol and what a guard returns;
- :mod:`.lmeval_guard`: the guard ``lm_eval``; :mod:`.lmeval`: lm-eval tasks through
  the run's engines (:mod:`.lm_model`, lm-eval's model over an engine; :mod:`.tasks`,
  finding tasks and their data); :mod:`.sequential`: the early stop, look by look;
- :mod:`.agreement`: token agreement with the reference, for random weights;
- :mod:`.results`: results, their pairing, flipped items; :mod:`.reference`: when a
  stored reference result stands in for a measurement.
"""
