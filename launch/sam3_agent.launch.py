"""Launch the sam3_agent lifecycle node (it drives itself to 'active' when autostart is true).

    ros2 launch sam3_agent_ros sam3_agent.launch.py image_topic:=/camera/color/image_raw
    ros2 launch sam3_agent_ros sam3_agent.launch.py namespace:=robot1 offline:=true
    ros2 launch sam3_agent_ros sam3_agent.launch.py params_file:=/path/to/my_params.yaml \\
        llm_base_url:=http://gpu-box:8000/v1 llm_model:=Qwen/Qwen3-VL-8B-Instruct
    ros2 launch sam3_agent_ros sam3_agent.launch.py offline:=true rviz:=true

Parameters come from params_file (default: the installed config/sam3_agent.yaml: the real backends,
llm.backend openai and segmenter.backend sam3). The launch arguments llm_base_url and llm_model
override it only when given: left empty (their default), the params file's values hold (and where
it has none, the package defaults). offline:=true switches to the built-in demo backends
(config.OFFLINE_BACKENDS: offline planner, colour segmenter; no model), whatever the params file
says. The real backends need an API key variable (OPENAI_API_KEY; any value for a server without
authentication, e.g. OPENAI_API_KEY=EMPTY for vLLM) and the SAM 3 weights (docs/sam3.md); the
node refuses to configure without them and says which is missing.

How: a launch_ros node's own `parameters` cannot be conditional, so the parameters are set for a
group whose only member is the node: SetParametersFromFile, then SetParameter under a condition.
The node gets them in that order (`--params-file F -p llm.model:=M -p llm.backend:=offline ...`),
and a `-p` after the file wins over the file's value, whether the file's section names the node
(`sam3_agent:`, `/robot1/sam3_agent:`) or every node (`/**:`). One exception: rclpy applies the
sections in the order they first appear and a `-p` adds to `/**`, so in a file with a `/**:`
section above the node's own, the node's section wins over the arguments too.

rviz:=true also starts rviz2 (not a dependency of the package: install ros-<distro>-rviz2) with
the shipped config/sam3_agent.rviz (overlay image, box and label markers, box poses, the target),
in the node's namespace (the config's topics are relative) with the fixed frame rviz_frame (the
colour camera's optical frame by default; a robot's base frame when TF is published).

Large camera images: the Fast DDS profile is process environment, read when the node starts, so
export it before `ros2 launch` (for the camera driver too), under both names: Fast DDS 3 (Kilted)
reads FASTDDS_DEFAULT_PROFILES_FILE, Fast DDS 2 (Humble, Jazzy) FASTRTPS_DEFAULT_PROFILES_FILE;
e.g. both = <share>/sam3_agent_ros/config/fastdds_large_images.xml (docs/ros.md).

Ctrl-C on `ros2 launch` sends the node SIGINT; it exits within 2 s, even in the middle of a query
(bench/node_exit.py). One still running SIGTERM_TIMEOUT_S later gets SIGTERM, then SIGKILL
SIGKILL_TIMEOUT_S after that (launch's defaults: 5 s each).
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, GroupAction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode, Node, SetParameter, SetParametersFromFile

from launch import Condition, LaunchDescription
from sam3_agent_ros.config import OFFLINE_BACKENDS

PACKAGE = "sam3_agent_ros"
SIGTERM_TIMEOUT_S = "3"  # launch takes the timeouts as strings (substitutions)
SIGKILL_TIMEOUT_S = "2"


def generate_launch_description():
    share = get_package_share_directory(PACKAGE)
    default_params = os.path.join(share, "config", "sam3_agent.yaml")
    rviz_config = os.path.join(share, "config", "sam3_agent.rviz")
    image_topic = LaunchConfiguration("image_topic")
    offline = IfCondition(LaunchConfiguration("offline"))

    def given(argument):
        """An argument counts as given when it is not empty (its default)."""
        return Condition(predicate=lambda context: bool(
            context.launch_configurations.get(argument, "")))

    node = LifecycleNode(
        package=PACKAGE, executable="sam3_agent_node", name="sam3_agent",
        namespace=LaunchConfiguration("namespace"), output="screen",
        remappings=[("image", image_topic), ("image/compressed", [image_topic, "/compressed"]),
                    ("query", LaunchConfiguration("query_topic"))],
        sigterm_timeout=SIGTERM_TIMEOUT_S, sigkill_timeout=SIGKILL_TIMEOUT_S)
    rviz = Node(package="rviz2", executable="rviz2", name="rviz2",
                namespace=LaunchConfiguration("namespace"), output="log",
                arguments=["-d", rviz_config, "-f", LaunchConfiguration("rviz_frame")],
                condition=IfCondition(LaunchConfiguration("rviz")))
    return LaunchDescription([
        DeclareLaunchArgument("namespace", default_value="",
                              description="Namespace of the node and its topics."),
        DeclareLaunchArgument("image_topic", default_value="image",
                              description="Camera image topic (sensor_msgs/Image); with "
                                          "image_transport 'compressed': "
                                          "<image_topic>/compressed."),
        DeclareLaunchArgument("query_topic", default_value="query",
                              description="Query topic (std_msgs/String, text or JSON)."),
        DeclareLaunchArgument("params_file", default_value=default_params,
                              description="ROS parameters YAML (see config/sam3_agent.yaml)."),
        DeclareLaunchArgument("llm_base_url", default_value="",
                              description="OpenAI-compatible endpoint; given, it overrides "
                                          "params_file (empty: the params file's llm.base_url)."),
        DeclareLaunchArgument("llm_model", default_value="",
                              description="Model name; given, it overrides params_file (empty: "
                                          "the params file's llm.model)."),
        DeclareLaunchArgument("offline", default_value="false", choices=["true", "false"],
                              description="true: the built-in demo backends, offline planner + "
                                          "colour segmenter (no model; answers are marked so). "
                                          "false: the real backends (LLM endpoint + SAM 3)."),
        DeclareLaunchArgument("rviz", default_value="false", choices=["true", "false"],
                              description="true: also start rviz2 with config/sam3_agent.rviz "
                                          "(overlay, boxes, labels, target; needs rviz2)."),
        DeclareLaunchArgument("rviz_frame", default_value="camera_color_optical_frame",
                              description="rviz2's fixed frame: the colour camera's optical "
                                          "frame, or a robot's base frame when TF is published."),
        # In this order on the node's command line, the last value of a parameter winning.
        GroupAction([
            SetParametersFromFile(LaunchConfiguration("params_file")),
            SetParameter(name="llm.base_url", value=LaunchConfiguration("llm_base_url"),
                         condition=given("llm_base_url")),
            SetParameter(name="llm.model", value=LaunchConfiguration("llm_model"),
                         condition=given("llm_model")),
            *[SetParameter(name=name, value=value, condition=offline)
              for name, value in OFFLINE_BACKENDS.items()],
            node,
        ]),
        rviz,
    ])
