"""``sam3-agent eval``: answer quality on labelled sets (ReasonSeg or annotations.jsonl), ROS-free.

``datasets`` reads the two layouts, ``metrics`` scores (gIoU, cIoU, no-target accuracy),
``runner`` answers the samples ``--jobs`` at a time, ``report`` writes summary.json and
report.md, ``compare`` sets two runs side by side, ``commands`` is the CLI. See docs/eval.md.
"""
