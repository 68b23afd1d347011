"""The parameter table: every parameter declared once (``PARAMETERS``), the one source of names,
defaults, descriptions and ranges for the node, the YAML files, the CLI and the config sections."""

from __future__ import annotations

import difflib

from sam3_agent_ros.config.parameter import Parameter

NODE_NAME = "sam3_agent"

# Which parameters are ``read_only`` (any peer on the DDS domain can call a node's parameter
# services, so a runtime change must never decide where data goes or what runs):
# 1. every parameter that chooses where data is sent, which secret is sent, or which code,
#    weights or files the node loads: a backend, an endpoint URL or host, the NAME of the key's
#    variable, a plugin 'module:factory', a checkpoint, a vocabulary, a prompts folder;
# 2. every limit that protects the node against a peer: the size of what a peer sends or makes
#    the node hold (query length, queue length, image pixels, finished action results) and the
#    per-query budgets a steered model could exhaust (verifier calls).
# Tuning parameters (bounded ranges, behaviour only) stay dynamic: a set is validated and logged
# with its old and new value. A read-only parameter is changed by restarting the node with a new
# params file, launch argument or -p NAME:=VALUE; a lifecycle cycle re-reads the start-up value.
READ_ONLY_NOTE = "read-only: set at start-up"


PARAMETERS: tuple[Parameter, ...] = (
    # --- LLM -------------------------------------------------------------------------------------
    Parameter("llm.backend", "openai",
              "'openai': any OpenAI-compatible endpoint (vLLM, OpenAI, ...). 'offline': the "
              "built-in deterministic demo planner (no model: its answers are not a model's; for "
              "tests and trying the package, e.g. launch offline:=true or sam3-agent --offline).",
              choices=("openai", "offline"), read_only=True),
    Parameter("llm.base_url", "http://127.0.0.1:8000/v1",
              "Base URL of the OpenAI-compatible Chat Completions endpoint.", read_only=True),
    Parameter("llm.model", "Qwen/Qwen3-VL-8B-Instruct", "Model name sent with every request."),
    Parameter("llm.api_key_env", "OPENAI_API_KEY",
              "NAME of the environment variable holding the API key (the key is never a parameter, "
              "never logged). It must be set when llm.backend is 'openai'; a server without "
              "authentication (vLLM) accepts any value, e.g. OPENAI_API_KEY=EMPTY. Empty name: no "
              "variable is read (a placeholder key is sent).",
              read_only=True),
    Parameter("llm.timeout_s", 60.0, "Timeout of one LLM request in seconds.", min=0.1, max=3600.0),
    Parameter("llm.max_retries", 2,
              "Retries (with backoff) of one request on 429, 5xx and connection errors.",
              min=0, max=10),
    Parameter("llm.temperature", 0.0, "Sampling temperature.", min=0.0, max=2.0),
    Parameter("llm.max_tokens", 8192,
              "Most completion tokens per request, thinking included (a thinking model needs "
              "thousands; too few and replies are cut off). 0: leave it to the server.",
              min=0, max=262144),
    Parameter("llm.protocol", "text",
              "'text': the model writes <tool>{json}</tool> in its reply (any chat model). "
              "'tools': native function calling (OpenAI 'tools'; vLLM needs "
              "--enable-auto-tool-choice --tool-call-parser hermes for Qwen).",
              choices=("text", "tools")),
    Parameter("llm.offline_think_s", 0.0,
              "llm.backend 'offline' only: seconds each call of the offline planner takes before "
              "it answers, as a real model's 1-10 s per call (a REHEARSAL of real timing for "
              "demos and tests, not a model; sam3-agent demo --think-s). A cancel ends the wait "
              "at once; the query's time limit applies as to a real request. 0: at once.",
              min=0.0, max=600.0),
    # --- LLM: a fleet on one model server (interface §14; all off by default) -------------------
    Parameter("llm.priority", 0,
              "Scheduling priority sent as the request body's 'priority' (vLLM with "
              "--scheduling-policy priority serves lower values first; a server without it "
              "refuses any non-zero value). 0: no 'priority' field is sent.",
              min=-1000000, max=1000000, read_only=True),
    Parameter("llm.extra_body", "",
              "JSON object merged into every request body, at most 4096 bytes, e.g. "
              "'{\"cache_salt\": \"tenant-a\"}' (vLLM's prefix-cache isolation: one salt per "
              "tenant, not per robot) or a router's hints. Keys the client sets itself (model, "
              "messages, max_tokens, max_completion_tokens, temperature, tools, tool_choice, "
              "priority, stream, stream_options) are refused. Empty: nothing added.",
              read_only=True),
    Parameter("llm.extra_headers", "",
              "JSON object of string values sent as HTTP headers with every request, at most "
              "4096 bytes, e.g. '{\"X-Tenant\": \"lab-a\"}' (a router's fairness id or "
              "affinity key). Authorization (the key comes from llm.api_key_env), Content-* and "
              "hop-by-hop headers are refused. Empty: none.",
              read_only=True),
    Parameter("llm.max_in_flight", 8,
              "Most model calls of this node in flight at once, main loop and verifier "
              "together; a call waits for a slot (within its query's time).",
              min=1, max=1024, read_only=True),
    Parameter("llm.retry_jitter", 0.5,
              "Spread of the retries: a Retry-After of t seconds waits t x (1 + U[0, jitter]); "
              "without one, exponential backoff with full jitter (U[0, delay]). 0: Retry-After "
              "exactly and the backoff without jitter.",
              min=0.0, max=10.0, read_only=True),
    # --- Segmenter -------------------------------------------------------------------------------
    Parameter("segmenter.backend", "sam3",
              "'sam3': Meta's SAM 3. 'color': the built-in offline demo segmenter (HSV colours, "
              "no model). Or a plugin 'package.module:factory'.",
              choices=("sam3", "color"), free_form_hint="plugin", read_only=True),
    Parameter("segmenter.checkpoint", "",
              "SAM 3 weights file (.pt/.safetensors). Empty: facebook/sam3 from the Hugging Face "
              "cache, else downloaded from the hub (gated: accept the license, then 'hf auth "
              "login'; docs/sam3.md).",
              read_only=True),
    Parameter("segmenter.device", "",
              "Torch device for SAM 3: 'cuda', 'cuda:N' or 'cpu'. Empty: cuda when available."),
    Parameter("segmenter.dtype", "",
              "SAM 3 compute dtype: 'bfloat16', 'float16' (older Jetsons) or 'float32'. "
              "Empty: bfloat16 on CUDA, float32 on CPU.",
              choices=("", "bfloat16", "float16", "float32")),
    Parameter("segmenter.engine", "torch",
              "SAM 3 engine: 'torch' (eager PyTorch) or 'onnxruntime': the parts of SAM 3 that "
              "export to ONNX (the image encoder, the text encoder; docs/sam3.md) run in ONNX "
              "Runtime with the TensorRT, CUDA and CPU execution providers where available "
              "(segmenter.device 'cpu': CPU only), the rest in torch. The result's backends name "
              "the engine and providers used.",
              choices=("torch", "onnxruntime"), read_only=True),
    Parameter("segmenter.engine_dir", "",
              "Folder of an ONNX export for segmenter.engine 'onnxruntime' (sam3-agent "
              "export-engine --out DIR); an export whose manifest does not match the weights is "
              "refused. Empty: ~/.cache/sam3_agent_ros/engines/<weights hash>/, exported there "
              "on first use (minutes: 1.5-3 on 2 busy CPU cores; time, size, memory logged).",
              read_only=True),
    Parameter("segmenter.confidence_threshold", 0.5,
              "Masks scoring below this are dropped.", min=0.0, max=1.0),
    Parameter("segmenter.overlap_threshold", 0.8,
              "Greedy overlap removal: a mask whose IoU with a higher-scoring kept mask exceeds "
              "this is dropped (1.0 disables).", min=0.0, max=1.0),
    Parameter("segmenter.min_mask_area", 16, "Masks with fewer pixels are dropped.", min=0),
    Parameter("segmenter.bpe_path", "",
              "SAM 3 BPE vocabulary file. Empty: the byte-identical copy shipped by "
              "open_clip_torch.", read_only=True),
    Parameter("segmenter.random_weights", False,
              "TESTS/BENCHMARKS ONLY: build SAM 3 with random weights (no checkpoint). Results are "
              "meaningless and marked as such.", read_only=True),
    # --- Agent -----------------------------------------------------------------------------------
    Parameter("agent.max_rounds", 16, "Most main-loop LLM calls per query.", min=1, max=200),
    Parameter("agent.max_context_messages", 10,
              "Hard bound on the messages of every main-loop request.", min=4, max=200),
    Parameter("agent.max_image_side", 1008,
              "Longest side (px) of any image sent to the LLM; larger images are downscaled.",
              min=64, max=8192),
    Parameter("agent.examine_concurrency", 8,
              "Verifier (examine_each_mask) calls in flight at once.", min=1, max=64),
    Parameter("agent.query_timeout_s", 120.0, "Wall-clock bound per query in seconds.",
              min=0.1, max=86400.0),
    Parameter("agent.max_consecutive_mistakes", 3,
              "Malformed or invalid model replies in a row before the query fails.", min=1, max=50),
    Parameter("agent.verifier_retries", 2,
              "Extra attempts of one verifier call whose reply has no verdict; then the mask is "
              "rejected.", min=0, max=10),
    Parameter("agent.max_masks_in_table", 30,
              "Most masks listed in the mask table given to the model (highest scores first).",
              min=1, max=500),
    Parameter("agent.status_reasoning_chars", 400,
              "How much of each round's reasoning (its end) the status events carry; 0: none.",
              min=0, max=100000),
    Parameter("agent.max_verifier_calls", 100,
              "Most verifier (examine_each_mask) LLM calls per query, retries included; an "
              "examine that would need more than are left ends the query failed.",
              min=1, max=100000, read_only=True),
    Parameter("agent.max_text_prompt_chars", 200,
              "Longest text_prompt the model may give segment_phrase; a longer one is refused "
              "(the model is told to use a short noun phrase).", min=1, max=100000, read_only=True),
    Parameter("agent.prompts_dir", "",
              "Directory with system.md and verifier.md. Empty: the installed share directory.",
              read_only=True),
    # --- ROS node --------------------------------------------------------------------------------
    Parameter("autostart", True,
              "Drive the lifecycle node to 'active' by itself after start-up."),
    Parameter("image_transport", "raw",
              "'raw': subscribe to 'image' (sensor_msgs/Image). 'compressed': subscribe to "
              "'image/compressed' (sensor_msgs/CompressedImage, JPEG/PNG).",
              choices=("raw", "compressed")),
    Parameter("image_qos", "sensor_data",
              "'sensor_data': best effort, keep last 1 (real cameras). 'reliable': reliable, keep "
              "last 1 (bag players and reliable publishers both connect).",
              choices=("sensor_data", "reliable")),
    Parameter("max_frame_age_s", 2.0,
              "A query needs a frame received at most this long ago (0 disables the check).",
              min=0.0),
    Parameter("frame_wait_s", 3.0,
              "How long a query waits for a (fresh) frame before failing.", min=0.0, max=600.0),
    Parameter("query_policy", "preempt",
              "'preempt': a new query cancels the running one. 'queue': FIFO queue.",
              choices=("preempt", "queue")),
    Parameter("queue_size", 8, "Most queries waiting when query_policy is 'queue'.", min=1,
              max=1000, read_only=True),
    Parameter("max_query_chars", 2000, "Longer query messages are rejected.", min=1,
              read_only=True),
    Parameter("publish_overlay", True,
              "Publish the overlays: ~/overlay (rgb8), ~/overlay/compressed (JPEG) and "
              "~/follow/overlay/compressed, each drawn only when somebody subscribes."),
    Parameter("max_image_pixels", 40_000_000,
              "Largest frame (width*height) converted: raw frames are refused from their header, "
              "compressed ones from their PNG/JPEG header before decoding (a query on a larger "
              "frame fails). 40 M covers 8K UHD (7680x4320 = 33.2 M); the decoded RGB frame is "
              "then at most 120 MB.", min=1, max=2**40, read_only=True),
    # --- Action ~/segment ------------------------------------------------------------------------
    Parameter("action.result_timeout_s", 10,
              "How long (s) the action server keeps a finished goal's result (with its mask and "
              "labels images) for clients that ask for it late.", min=1, max=86400, read_only=True),
    Parameter("action.max_results_with_images", 16,
              "Most finished goals whose kept result still holds its mask and labels images; "
              "older ones keep the rest (status, error, masks, result_json) until "
              "action.result_timeout_s. A client waiting for its result gets it whole.",
              min=1, max=100000, read_only=True),
    # --- Refinement ("no, the other one": a query that corrects an earlier answer) ---------------
    Parameter("refine.keep_answers", 8,
              "Most recent answers kept for refinement (a query with 'refines': <query_id>), "
              "each with its frame and selected masks (at 1080p about 6 MB), within "
              "refine.max_kept_mib; older ones expire. 0: refinement off.", min=0, max=1000,
              read_only=True),
    Parameter("refine.max_kept_mib", 256,
              "Most memory (MiB) the answers kept for refinement hold together: their frames "
              "(3 bytes a pixel: 6.2 MB at 1080p, 120 MB at the max_image_pixels cap) and "
              "selected masks (bit-packed). The oldest expire first; an answer larger than this "
              "is not kept (refining it fails with that reason).", min=1, max=1_048_576,
              read_only=True),
    # --- Published overlays (publish_overlay) ----------------------------------------------------
    Parameter("overlay.max_side", 960,
              "Longest side (px) of the published overlays (~/overlay, ~/overlay/compressed, "
              "~/follow/overlay/compressed): larger frames are downscaled before the masks are "
              "drawn. 0: the frame's own size. ~/mask and ~/labels are always full size.",
              min=0, max=16384),
    Parameter("overlay.jpeg_quality", 80,
              "JPEG quality of ~/overlay/compressed and ~/follow/overlay/compressed.",
              min=1, max=100),
    # --- 3D from aligned depth -------------------------------------------------------------------
    Parameter("depth.enabled", False,
              "Subscribe to 'depth' and 'camera_info'; publish ~/target, ~/targets (box poses) "
              "and ~/markers, and a position and box per mask in the result."),
    Parameter("depth.max_stamp_diff_s", 0.05,
              "Largest stamp difference between the colour frame and the depth frame used.",
              min=0.0, max=10.0),
    Parameter("depth.min_m", 0.1, "Depth below this (m) is invalid.", min=0.0),
    Parameter("depth.max_m", 10.0, "Depth above this (m) is invalid.", min=0.0),
    Parameter("depth.erode_px", 3, "Mask erosion (px) before sampling depth.", min=0, max=100),
    Parameter("depth.min_valid_pixels", 20, "Fewer valid depth pixels: no position.", min=1),
    Parameter("depth.statistic", "median", "Robust depth statistic over the mask.",
              choices=("median", "trimmed_mean", "min_cluster")),
    Parameter("depth.rectified", True,
              "The colour and depth images are rectified (and registered), as depth_image_proc "
              "assumes: 3D from camera_info P (K only where P is all zero). false: raw images; "
              "3D from K with the mask pixels undistorted by D (plumb_bob, "
              "rational_polynomial, equidistant)."),
    Parameter("depth.buffer_size", 30, "Depth frames kept (by reference) for stamp matching.",
              min=1, max=1000),
    Parameter("depth.buffer_mib", 256,
              "Most memory (MiB) the buffered depth frames hold together, checked as each one "
              "arrives: the oldest go first, a frame larger than this alone is refused (said "
              "once). A query binds its depth frame when it takes its colour frame, so a slow "
              "answer keeps its 3D whatever this buffer holds by then.", min=1, max=1_048_576,
              read_only=True),
    Parameter("depth.cloud_max_points", 20000,
              "Most points of ~/target/points (the selected masks' valid depth points, "
              "subsampled evenly) and of 'sam3-agent run --out' points.ply.",
              min=1, max=10_000_000),
    # --- The grasp scene (CONTRACTS §12: what grasp detectors and MoveIt take) --------------------
    Parameter("scene.enabled", True,
              "With depth.enabled: boxes reach their support, and ~/collision_objects, "
              "~/scene/points (the labelled cloud around the target) and ~/grasps are published "
              "(run --depth --out writes scene.ply). false: none of them (boxes stay top faces)."),
    Parameter("scene.crop_scale", 2.0,
              "~/scene/points holds the valid depth points in a cube centred on the target, of "
              "this times its box's longest side (at least scene.crop_min_m).",
              min=1.0, max=20.0),
    Parameter("scene.crop_min_m", 0.3,
              "Smallest side (m) of the ~/scene/points cube around the target.",
              min=0.0, max=10.0),
    Parameter("grasp.max_width_m", 0.08,
              "Widest opening (m) of the parallel-jaw gripper: a grasp closes across a box side "
              "no wider than this.", min=0.001, max=1.0),
    Parameter("grasp.clearance_m", 0.01,
              "Every grasp's fingers and palm stay at least this far (m) from the support, from "
              "every obstacle box and from every depth point of the crop that is neither the "
              "target nor the support.", min=0.0, max=0.5),
    # --- The robot's frame (TF) -------------------------------------------------------------------
    Parameter("target_frame", "",
              "Frame every 3D output is published in (e.g. 'base_link'), transformed through TF "
              "at the colour frame's stamp. Empty: the colour camera's frame. Without the "
              "transform an answer publishes no pose in another frame and says what is missing.",
              read_only=True),
    Parameter("tf.timeout_s", 0.2,
              "How long a transform lookup waits for a transform at the colour frame's stamp.",
              min=0.0, max=10.0),
    # --- Follow mode (keep the answer's masks current on new frames) ------------------------------
    Parameter("follow.default", False,
              "Follow every successful query's answer on new frames (a query may also ask with "
              "'follow': true)."),
    Parameter("follow.mode", "flow",
              "'flow': propagate the masks with dense optical flow (CPU), re-detecting every "
              "follow.redetect_every frames. 'redetect': run the segmenter with the query's final "
              "text prompt on every followed frame and associate its masks to the followed ones.",
              choices=("flow", "redetect")),
    Parameter("follow.lost_timeout_s", 1.0,
              "Following reports 'lost' after no followed object was seen for this long (a "
              "flow mask counts as seen only while a re-detection confirmed it within this "
              "time and none missed it since).",
              min=0.0, max=3600.0),
    Parameter("follow.redetect_every", 10,
              "In 'flow' mode, re-detect (segmenter + association) every N frames to correct "
              "drift (0: only when follow.redetect_on_drop asks, an object is unseen, or a flow "
              "mask would go follow.lost_timeout_s unconfirmed).",
              min=0, max=10000),
    Parameter("follow.reground_on_lost", False,
              "When lost, ask for the whole query to be re-run (LLM included), at most once per "
              "follow.lost_timeout_s."),
    Parameter("follow.flow_max_side", 320,
              "Longest side (px) of the grayscale frames optical flow runs on (smaller: faster, "
              "coarser).", min=32, max=8192),
    Parameter("follow.redetect_on_drop", 0.5,
              "In 'flow' mode, re-detect on the same frame when flow has brought an object's "
              "confidence below this fraction of its value at the last detection, or when an "
              "object went out of view (0: only out of view).", min=0.0, max=1.0),
    Parameter("follow.match_min_iou", 0.1,
              "Re-detection: a detection matches a followed object only with at least this IoU "
              "with its predicted mask, or a centroid within follow.match_max_shift.",
              min=0.0, max=1.0),
    Parameter("follow.match_max_shift", 0.1,
              "Re-detection: largest centroid shift, as a fraction of the image diagonal, for a "
              "match without overlap.", min=0.0, max=1.0),
    # --- Standing concepts (every concept segmented on the newest frame; docs/concepts.md) -------
    Parameter("concepts.prompts", (),
              "Standing concepts: text prompts segmented together on the newest frame at "
              "concepts.rate_hz, published on ~/concepts/* with instance ids stable across "
              "frames, e.g. ['person', 'cup']. Empty: off. Settable at runtime (applied at once; "
              "the ids restart at 1).", live=True),
    Parameter("concepts.rate_hz", 5.0,
              "Most concept passes per second (a slower segmenter gives fewer; frames it has no "
              "time for are dropped, never queued). Settable at runtime.",
              min=0.1, max=100.0, live=True),
    Parameter("concepts.max_prompts", 8,
              "Most entries of concepts.prompts (each costs a grounding pass per frame).",
              min=1, max=64, read_only=True),
    Parameter("concepts.max_prompt_chars", 100,
              "Longest entry of concepts.prompts, in characters.", min=1, max=1000,
              read_only=True),
)

PARAMETERS_BY_NAME: dict[str, Parameter] = {p.name: p for p in PARAMETERS}

# The built-in demo backends (no model), the one table used by the launch file (offline:=true),
# the CLI (--offline), the demos, tests and benchmarks. They run only when chosen.
OFFLINE_BACKENDS: dict[str, str] = {"llm.backend": "offline", "segmenter.backend": "color"}


def unknown_parameter_message(name: str) -> str:
    """``unknown parameter 'llm.backnd' (did you mean 'llm.backend'?)``: the CLI's and the
    node's words for a name that is not in the table."""
    close = difflib.get_close_matches(name, PARAMETERS_BY_NAME, n=1)
    return f"unknown parameter {name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
