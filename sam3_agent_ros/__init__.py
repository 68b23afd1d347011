"""sam3_agent_ros: language-driven segmentation for ROS 2 (see README.md).

The generated ROS interfaces (``sam3_agent_ros.action``, ``sam3_agent_ros.msg``) may live in
another folder named ``sam3_agent_ros`` on ``sys.path`` (a venv's site-packages, where
scripts/build_interfaces.sh installs them next to the editable source): merge it in.
"""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)
