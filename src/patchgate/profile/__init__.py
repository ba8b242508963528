"""The profile: what one run is asked to do (model, engine, scenarios, guard, thresholds).

- :mod:`.schema`: the dataclasses, where every default lives once;
- :mod:`.load`: profile files (``profiles/*.toml``), read and checked key by key;
- :mod:`.grow`, :mod:`.grown`: a small model grown, function-preserving, to a real
  shape, built on demand into a cache (``Profile.grow``).
"""

from .load import available, get_profile, listing
from .schema import BATCH_SIZES, Lengths, Profile, Sequential, Serving, Thresholds, repo_root

__all__ = ["BATCH_SIZES", "Lengths", "Profile", "Sequential", "Serving", "Thresholds",
           "available", "get_profile", "listing", "repo_root"]
