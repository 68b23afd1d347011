"""Packaging of ``sam3_agent_demo``: the synthetic world of this repository (the tabletop scenes
and their moving sequence, the sample bags' generators and ground truth, the scoring, the demos'
sessions and the node-process harness, the reserved DDS domains of tests and demos).

It is NOT part of what a robot deploys: colcon builds the repository root (package.xml,
CMakeLists.txt) and never looks into this folder, and the root setup.py does not pick it up.
``make setup`` (scripts/setup_venv.sh) and the extra venvs install it editable next to
``sam3_agent_ros``; it needs nothing but ``sam3_agent_ros`` and what that package's venv has.

``package_dir={"": "."}``: the editable install is a plain path entry (a .pth naming this
folder), as for the root package.
"""

from setuptools import setup

setup(
    name="sam3_agent_demo",
    version="0.1.0",
    description="The synthetic scenes, sample bags, scoring and demos of sam3_agent_ros "
                "(source repository only; not deployed)",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=["sam3_agent_demo"],
    package_dir={"": "."},
    install_requires=[],  # sam3_agent_ros and its pinned requirements (requirements/)
    zip_safe=False,
)
