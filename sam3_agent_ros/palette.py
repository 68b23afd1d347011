"""The colour names of the built-in demo backends, and the RGB colour the synthetic scenes paint
each in.

The colour segmenter (``segmenters/color.py``) recognises these names by hue and saturation; the
scenes (``sam3_agent_demo.scene``, demo/) paint objects in these albedos, saturated enough that
the segmenter and a human agree on the name under a mild lighting gradient (test/test_palette.py
checks it).
Nothing else of the package is imported here.
"""

from __future__ import annotations

# Albedo of each colour name (RGB, 0..255).
COLORS: dict[str, tuple[int, int, int]] = {
    "red": (205, 35, 35),
    "orange": (235, 130, 30),
    "yellow": (235, 205, 40),
    "green": (40, 165, 70),
    "cyan": (40, 190, 200),
    "blue": (35, 75, 205),
    "purple": (130, 50, 180),
    "pink": (230, 80, 170),
    "white": (245, 245, 245),
    "black": (25, 25, 25),
    "gray": (120, 120, 120),
    "brown": (120, 70, 30),
}
TABLE_COLOR: tuple[int, int, int] = (182, 172, 158)  # a light, low-saturation table top
