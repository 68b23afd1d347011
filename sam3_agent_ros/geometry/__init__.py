"""Pure 3D geometry (ROS-free: numpy + OpenCV): a mask + a registered depth image + the colour
intrinsics -> a 3D point and an oriented 3D box.

The depth image must be registered (aligned) to the colour camera, so that depth pixel (u, v)
measures the same ray as colour pixel (u, v); points are in the colour camera's optical frame
(x right, y down, z forward), in metres. Pixel centres are at integer coordinates (OpenCV / ROS
CameraInfo), so a pixel (u, v) at depth z back-projects to ``((u - cx) * z / fx, (v - cy) * z /
fy, z)``.

- ``camera_model``: a camera_info / calibration -> the colour image's ``Intrinsics``, only when
  it fits the image.
- ``depth_image``: depth messages and arrays -> metres at the colour image's resolution.
- ``locate``: a mask's depth, sampled robustly -> its 3D point (``locate_mask``).
- ``plane``: the dominant plane of a mask's depth points.
- ``box``: the oriented 3D box on that plane (``fit_box``).
- ``support``: the plane an object stands on (from the depth ring around its mask) and its box
  extended down to it (``reach_support``: ``size.z`` the object's height).
- ``scene_cloud``: the labelled depth points in a cube around the target (``scene_points``) and
  its PLY file.
- ``grasps``: parallel-jaw grasps of a box that reaches its support, clear of the support, the
  obstacle boxes and the scene's other points (``plan_grasps``).
- ``rotations``: rotation matrix <-> quaternion.
- ``measure``: the result JSON's 3D fields of a mask (``measure_mask``: point and box).
"""
