"""Model patches: one optimization per file in ``model_patches/``.

- :mod:`.patch`: a validated patch (identity, engines, settings) and patch sets;
- :mod:`.discover`: finding and validating the files of a folder;
- :mod:`.apply`: running them where the model lives (engine processes only);
- :mod:`.quant`: helpers for patches that quantize weights with real kernels.
"""

from .discover import discover
from .patch import Patch, content_key, merged_server_args, skipped

__all__ = ["Patch", "content_key", "discover", "merged_server_args", "skipped"]
