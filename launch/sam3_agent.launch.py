"""Launch the sam3_agent lifecycle node (it drives itself to 'active' when autostart is true).

    ros2 launch sam3_agent_ros sam3_agent.launch.py image_topic:=/camera/color/image_raw
    ros2 launch sam3_agent_ros sam3_agent.launch.py namespace:=robot1 offline:=true
    ros2 launch sam3_agent_ros sam3_agent.launch.py params_file:=/path/to/my_params.yaml \\
        llm_base_url:=http://gpu-box:8000/v1 llm_model:=Qwen/Qwen3-VL-8B-Instruct

Parameters come from params_file (default: the installed config/sam3_agent.yaml: the real backends,
llm.backend openai and segmenter.backend sam3); the launch arguments llm_base_url and llm_model
are applied on top of it (their defaults are the package defaults). offline:=true switches to the
built-in demo backends (config.OFFLINE_BACKENDS: offline planner, colour segmenter; no model). The
real backends need an API key variable (OPENAI_API_KEY; any value for a server without
authentication, e.g. OPENAI_API_KEY=EMPTY for vLLM) and the SAM 3 weights (docs/sam3.md); the
node refuses to configure without them and says which is missing.

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
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition, UnlessCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode

from launch import LaunchDescription
from sam3_agent_ros.config import OFFLINE_BACKENDS, PARAMETERS_BY_NAME

PACKAGE = "sam3_agent_ros"
SIGTERM_TIMEOUT_S = "3"  # launch takes the timeouts as strings (substitutions)
SIGKILL_TIMEOUT_S = "2"


def generate_launch_description():
    default_params = os.path.join(get_package_share_directory(PACKAGE), "config",
                                  "sam3_agent.yaml")
    namespace = LaunchConfiguration("namespace")
    image_topic = LaunchConfiguration("image_topic")
    endpoint = {"llm.base_url": LaunchConfiguration("llm_base_url"),
                "llm.model": LaunchConfiguration("llm_model")}
    remappings = [("image", image_topic), ("image/compressed", [image_topic, "/compressed"]),
                  ("query", LaunchConfiguration("query_topic"))]

    parameters = [LaunchConfiguration("params_file"), endpoint]

    def agent_node(parameters, condition):
        return LifecycleNode(
            package=PACKAGE, executable="sam3_agent_node", name="sam3_agent",
            namespace=namespace, output="screen", remappings=remappings, condition=condition,
            parameters=parameters, sigterm_timeout=SIGTERM_TIMEOUT_S,
            sigkill_timeout=SIGKILL_TIMEOUT_S)

    offline = LaunchConfiguration("offline")
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
        DeclareLaunchArgument("llm_base_url",
                              default_value=PARAMETERS_BY_NAME["llm.base_url"].default,
                              description="OpenAI-compatible endpoint (overrides params_file)."),
        DeclareLaunchArgument("llm_model", default_value=PARAMETERS_BY_NAME["llm.model"].default,
                              description="Model name (overrides params_file)."),
        DeclareLaunchArgument("offline", default_value="false", choices=["true", "false"],
                              description="true: the built-in demo backends, offline planner + "
                                          "colour segmenter (no model; answers are marked so). "
                                          "false: the real backends (LLM endpoint + SAM 3)."),
        agent_node(parameters + [OFFLINE_BACKENDS], IfCondition(offline)),
        agent_node(parameters, UnlessCondition(offline)),
    ])
