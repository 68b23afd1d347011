"""Packaging for pip (the editable venv install of scripts/setup_venv.sh).

ROS workspaces build the package with CMakeLists.txt (ament_cmake: the generated interfaces plus
this Python package); both install the console scripts `sam3-agent` and `sam3_agent_node` and put
launch/, config/ and prompts/ under share/sam3_agent_ros. CMakeLists.txt writes the same two
console scripts into lib/sam3_agent_ros (a test keeps the two lists equal).

``package_dir={"": "."}`` makes the editable install a plain path entry (a .pth naming the
repository root) instead of setuptools' import hook: the interfaces that scripts/build_interfaces.sh
installs in site-packages/sam3_agent_ros/{action,msg} then merge with the source package through
pkgutil.extend_path (sam3_agent_ros/__init__.py), and the source package comes first.
"""

from glob import glob

from setuptools import find_packages, setup

PACKAGE_NAME = "sam3_agent_ros"
SHARE = f"share/{PACKAGE_NAME}"

setup(
    name=PACKAGE_NAME,
    version="0.1.0",
    description="Language-driven segmentation for ROS 2: an LLM agent calling SAM 3 as a tool",
    license="Apache-2.0",
    python_requires=">=3.10",
    # demo/ (the sam3_agent_demo package: the synthetic world) is never deployed: it is a package
    # of its own, demo/setup.py, installed into the venvs by scripts/setup_venv.sh.
    packages=find_packages(exclude=["test", "test.*", "demo", "demo.*", "sam3_agent_demo",
                                    "sam3_agent_demo.*"]),
    package_dir={"": "."},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE_NAME}"]),
        (SHARE, ["package.xml"]),
        (f"{SHARE}/launch", sorted(glob("launch/*.launch.py"))),
        (f"{SHARE}/config", sorted(glob("config/*.yaml") + glob("config/*.xml")
                                   + glob("config/*.rviz"))),
        (f"{SHARE}/config/sros2", sorted(glob("config/sros2/*.xml"))),
        (f"{SHARE}/prompts", sorted(glob("prompts/*.md"))),
        (f"{SHARE}/data", ["data/example_tabletop.png", "data/example_tabletop_gt.npz",
                           "data/example_tabletop_depth.png",
                           "data/example_tabletop_camera_info.yaml"]),
        (f"{SHARE}/data/sample_tabletop", ["data/sample_tabletop/ground_truth.json",
                                           "data/sample_tabletop/ground_truth.npz"]),
        (f"{SHARE}/data/sample_tabletop/bag", sorted(glob("data/sample_tabletop/bag/*"))),
        (f"{SHARE}/data/sample_moving", ["data/sample_moving/ground_truth.json",
                                         "data/sample_moving/ground_truth.npz"]),
        (f"{SHARE}/data/sample_moving/bag", sorted(glob("data/sample_moving/bag/*"))),
        (f"{SHARE}/data/sample_grasp", ["data/sample_grasp/ground_truth.json",
                                        "data/sample_grasp/ground_truth.npz"]),
        (f"{SHARE}/data/sample_grasp/bag", sorted(glob("data/sample_grasp/bag/*"))),
    ],
    # Runtime dependencies are pinned in requirements/ (scripts/setup_venv.sh) for pip users and
    # declared in package.xml for rosdep; ROS 2 Python packages are not on PyPI under their
    # import names, so they are not listed here.
    install_requires=[],
    zip_safe=True,
    entry_points={
        "console_scripts": [
            "sam3-agent = sam3_agent_ros.cli:main",
            "sam3_agent_node = sam3_agent_ros.ros.node:main",
        ],
    },
)
