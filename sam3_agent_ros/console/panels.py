"""What each region of the page shows, and when it is no longer current (pure; the ROS side
calls it, tests drive it with a fake clock).

The console tells the truth: a region that shows something which has stopped being current is
reset or says so.

- **Status**: a new query starts with no reasoning (``views.status_view``); the Result of an
  earlier query is marked as such while a newer one runs. Once a query's result is in, the
  model's candidate numbers in its reasoning are written as the result's mask ids (one
  numbering on the page: ``views.renumbered``, from the masks' ``candidate``).
- **Result / the answer's overlay**: the overlay shown is the one of the answer shown, matched
  by the frame's stamp (the node draws it on that frame); a result without masks (cancelled,
  failed, no_mask) drops the previous overlay; a result the console cannot read is an error
  line.
- **Concept detections**: concepts switched off (by any client: the parameter is watched) clear
  the detections and the concepts overlay, for pages opened later too; detections that stop
  coming are marked stale.
- **Camera**: the preview's topic is the node's own (``camera``, from its graph), said when it
  has none; a preview with no new frame for ``LIVE_STALE_S`` is no longer "live".
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sam3_agent_ros.console import views
from sam3_agent_ros.console.hub import Hub

LIVE_STALE_S = 3.0  # previews come at 4 Hz: 3 s without one is a camera that stopped
DETECTIONS_STALE_S = 5.0
KEPT_OVERLAYS = 4  # answer overlays waiting for their result (or kept for a correction's)


class Panels:
    def __init__(self, hub: Hub, clock: Callable[[], float] = time.monotonic) -> None:
        self.hub = hub
        self._clock = clock
        self._overlays: list[tuple[tuple, bytes]] = []  # (stamp, jpeg), unused, oldest first
        self._awaiting: tuple | None = None  # the stamp of the shown answer without its overlay
        self._concepts_on: bool | None = None  # None: not known yet
        self._detections_at: float | None = None
        self._camera: dict = {"state": "none", "topic": "", "kind": "",
                              "message": "looking for the node's camera topic"}
        self._live_at: float | None = None
        self._status: dict | None = None
        self._numbering: tuple[str, dict[int, int]] = ("", {})  # a result's candidate ids
        hub.set("camera", dict(self._camera))

    # --- Status and Result ---

    def status(self, status: dict) -> None:
        view = views.status_view(status, self._status)
        self._status = view  # the model's own words; the page gets them renumbered
        self.hub.set("status", self._shown_status(view))
        result = self.hub.get("result")
        query_id = view.get("query_id")
        if (result and query_id and query_id != result.get("query_id")
                and view.get("phase") != "done" and not result.get("stale")):
            self.hub.set("result", dict(result, stale=f"a newer query ({query_id}) is running: "
                                                      "this is the answer before it"))

    def result_text(self, text: str) -> None:
        value, problem, non_finite = views.read_json(text)
        if value is None:
            self._show_result(views.unreadable_result(problem or "?", text))
        else:
            self._show_result(views.result_view(value, non_finite))

    def _shown_status(self, view: dict) -> dict:
        """The status with the reasoning in the result's mask ids once its result is in."""
        query_id, candidates = self._numbering
        if view.get("query_id") != query_id or not candidates:
            return view
        return dict(view, reasoning=views.renumbered(view["reasoning"], candidates))

    def _show_result(self, view: dict) -> None:
        self.hub.set("result", view)
        self._numbering = (view["query_id"], views.candidate_ids(view))
        if self._status is not None and self._status.get("query_id") == view["query_id"]:
            self.hub.set("status", self._shown_status(self._status))
        if not views.answered(view):
            self._awaiting = None
            self.hub.drop_image("answer")  # a cancelled / failed / empty answer has none
            return
        stamp = tuple(view["stamp"])
        for index in range(len(self._overlays) - 1, -1, -1):  # the newest unused one first
            if self._overlays[index][0] == stamp:
                self._awaiting = None
                self.hub.put_image("answer", self._overlays.pop(index)[1])
                return
        self._awaiting = stamp  # its overlay is still on its way
        self.hub.drop_image("answer")

    def answer_overlay(self, stamp: tuple, jpeg: bytes) -> None:
        """An overlay on ``~/overlay/compressed`` (``stamp``: its header's ``(sec, nanosec)``,
        the answer's frame)."""
        if self._awaiting is not None and tuple(stamp) == self._awaiting:
            self._awaiting = None
            self.hub.put_image("answer", jpeg)
            return
        self._overlays.append((tuple(stamp), jpeg))
        del self._overlays[:-KEPT_OVERLAYS]

    # --- Concepts ---

    def concepts(self, prompts: list[str]) -> None:
        """The node's ``concepts.prompts`` (read, set by this console, or changed by anyone)."""
        self.hub.set("concepts", list(prompts))
        self._concepts_on = bool(prompts)
        if not prompts:
            self._detections_at = None
            self.hub.set("detections", {"frame_id": "", "detections": [], "state": "off",
                                        "message": "concepts off"})
            self.hub.drop_image("concepts")

    def detections(self, view: dict) -> None:
        if self._concepts_on is False:
            return  # one still on its way when concepts went off
        self._detections_at = self._clock()
        self.hub.set("detections", dict(view, state="current", message=""))

    def concepts_overlay(self, jpeg: bytes) -> None:
        if self._concepts_on is not False:
            self.hub.put_image("concepts", jpeg)

    # --- Follow ---

    def follow(self, follow: dict) -> None:
        self.hub.set("follow", follow)
        if follow.get("state") == "stopped":
            self.hub.drop_image("follow")

    # --- Camera ---

    def camera_topic(self, topic: str, kind: str, problem: str = "") -> None:
        """The preview's topic as found on the node's graph (``""`` and ``problem``: none)."""
        if topic == self._camera["topic"] and kind == self._camera["kind"] and not problem:
            return
        if not topic:
            self._live_at = None
            self.hub.drop_image("live")
            self._set_camera("none", "", "", problem or "the node subscribes no image topic")
        else:
            self._live_at = None
            self._set_camera("waiting", topic, kind, f"waiting for a frame on {topic}")

    def live_frame(self, jpeg: bytes) -> None:
        self._live_at = self._clock()
        self.hub.put_image("live", jpeg)
        if self._camera["state"] != "live":
            topic = self._camera["topic"]
            self._set_camera("live", topic, self._camera["kind"], f"live from {topic}")

    def _set_camera(self, state: str, topic: str, kind: str, message: str) -> None:
        self._camera = {"state": state, "topic": topic, "kind": kind, "message": message}
        self.hub.set("camera", dict(self._camera))

    # --- what goes stale with time ---

    def tick(self) -> None:
        now = self._clock()
        camera = self._camera
        if camera["state"] in ("live", "stale") and self._live_at is not None:
            age = now - self._live_at
            if age > LIVE_STALE_S:
                self._set_camera("stale", camera["topic"], camera["kind"],
                                 f"no frame from {camera['topic']} for {age:.0f} s: the last "
                                 "one is shown")
        shown = self.hub.get("detections")
        if (self._concepts_on and self._detections_at is not None and shown
                and now - self._detections_at > DETECTIONS_STALE_S):
            age = now - self._detections_at
            self.hub.set("detections", dict(shown, state="stale",
                                            message=f"no detections for {age:.0f} s (no new "
                                                    "frame?): the last ones are shown"))
