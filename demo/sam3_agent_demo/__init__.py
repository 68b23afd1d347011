"""Everything synthetic: the tabletop scenes and their moving sequence, the sample bags made from
them with their ground truth, and the two demos that replay those bags into the node and score
its answers (``sam3-agent demo``, ``demo-follow``). Users' own bags need none of it: the bag
tools are ``sam3_agent_ros.bags``."""
