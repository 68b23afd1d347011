"""Generate the labelled sets that ship: data/eval_tabletop/ and data/eval_reasonseg_mini/.

Synthetic tabletop scenes (``sam3_agent_demo.scene``) with varied layouts, colours, sizes,
camera offsets, resolutions and lighting; each scene gets a few queries whose answer is decided
from the scene's own ground truth (visible-pixel centroids and areas), never from what any backend
does:

- a unique colour + shape ("the green triangle"), a unique colour ("the red object");
- relations with a clear margin: leftmost, rightmost, topmost, bottom, largest, smallest within
  a colour, a shape or the whole table; "the X next to the Y" (nearest by centroid distance);
- every object of a colour ("all the blue objects");
- absent objects: a colour, or a colour + shape, that the scene does not hold;
- sentences (``is_sentence``), as ReasonSeg has them ("Which object sits closest to the left
  edge of the table?").

Everything is deterministic given ``--seed``. Frames are JPEG, truth masks PNG (nonzero =
object); some jsonl samples give the truth as polygons instead. The ReasonSeg-layout set holds
polygons, one ``ignore`` region and a PNG frame, to exercise that reader.

    .venv/bin/python scripts/make_eval_set.py            # rewrites both folders
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(ROOT / "demo") not in sys.path:  # the demo package (sam3_agent_demo)
    sys.path.insert(1, str(ROOT / "demo"))

from sam3_agent_demo.scene import (  # noqa: E402
    CameraIntrinsics,
    CameraPose,
    Lighting,
    Scene,
    SceneObject,
    render_scene,
)

NOUNS = {"circle": ("cylinder", "disc", "can"), "ellipse": ("oval", "ellipse"),
         "rectangle": ("box", "block"), "triangle": ("triangle", "prism", "wedge")}
CHROMATIC = ("red", "orange", "yellow", "green", "cyan", "blue", "purple", "pink")
SELECTORS = {  # word -> (key over an object's truth, pick the largest?)
    "leftmost": ("x", False), "rightmost": ("x", True), "topmost": ("y", False),
    "bottom": ("y", True), "largest": ("area", True), "smallest": ("area", False)}
MARGIN_PX, AREA_RATIO, NEXT_TO_RATIO = 30.0, 1.35, 1.6
JPEG_QUALITY = 88


class Truth:
    """What a query can be decided from: an object's visible mask, centroid and area."""

    def __init__(self, obj: SceneObject, mask: np.ndarray):
        self.obj, self.mask = obj, mask
        ys, xs = np.nonzero(mask)
        self.x, self.y, self.area = float(xs.mean()), float(ys.mean()), int(xs.size)

    @property
    def color(self) -> str:
        return self.obj.color_name

    @property
    def shape(self) -> str:
        return self.obj.shape


def random_scene(rng: np.random.Generator, small: bool) -> tuple[Scene, CameraPose, Lighting]:
    k = CameraIntrinsics(480.0, 480.0, 256.0, 192.0, 512, 384) if small else CameraIntrinsics()
    half_w, half_h = 0.5 * k.width / k.fx * 0.9, 0.5 * k.height / k.fy * 0.85
    count = int(rng.integers(3, 8))
    palette = list(CHROMATIC) + (["white", "black", "gray", "brown"] if rng.random() < 0.4 else [])
    objects: list[SceneObject] = []
    attempts = 0
    while len(objects) < count and attempts < 400:
        attempts += 1
        shape = str(rng.choice(list(NOUNS)))
        base = float(rng.uniform(0.045, 0.16))
        size = (base, base * float(rng.uniform(0.55, 0.85))) if shape == "ellipse" else \
            (base, base * float(rng.uniform(0.7, 1.2)))
        radius = 0.6 * max(size)
        pos = (float(rng.uniform(-half_w + radius, half_w - radius)),
               float(rng.uniform(-half_h + radius, half_h - radius)))
        if any(math.dist(pos, o.position) < 1.15 * (radius + 0.6 * max(o.size)) + 0.02
               for o in objects):
            continue
        objects.append(SceneObject(f"obj{len(objects)}", str(rng.choice(palette)), shape, pos,
                                   size, float(rng.uniform(0.02, 0.1)),
                                   float(rng.uniform(-40, 40))))
    pose = CameraPose(float(rng.uniform(-0.02, 0.02)), float(rng.uniform(-0.02, 0.02)),
                      float(rng.uniform(-0.05, 0.05)))
    lighting = Lighting(brightness=float(rng.uniform(0.8, 1.15)),
                        gradient_x=float(rng.uniform(-0.1, 0.1)),
                        gradient_y=float(rng.uniform(-0.08, 0.08)),
                        noise_sigma=float(rng.uniform(1.0, 3.5)))
    return Scene(objects=tuple(objects), intrinsics=k), pose, lighting


def _pick(group: list[Truth], key: str, largest: bool) -> Truth | None:
    """The extreme of ``group`` by ``key`` when it wins by a clear margin, else None."""
    if len(group) < 2:
        return None
    ranked = sorted(group, key=lambda t: getattr(t, key), reverse=largest)
    first, second = getattr(ranked[0], key), getattr(ranked[1], key)
    if key == "area":
        clear = max(first, second) >= AREA_RATIO * min(first, second)
    else:
        clear = abs(first - second) >= MARGIN_PX
    return ranked[0] if clear else None


def candidate_queries(truths: list[Truth], rng: np.random.Generator) -> dict[str, list]:
    """Every query the scene supports, by category: (query, targets, is_sentence)."""
    out: dict[str, list] = {k: [] for k in ("simple", "relation", "next_to", "all", "absent",
                                            "sentence")}
    noun = {t.obj.name: str(rng.choice(NOUNS[t.shape])) for t in truths}
    by_color: dict[str, list[Truth]] = {}
    by_shape: dict[str, list[Truth]] = {}
    for t in truths:
        by_color.setdefault(t.color, []).append(t)
        by_shape.setdefault(t.shape, []).append(t)
    for t in truths:
        if sum(u.color == t.color and u.shape == t.shape for u in truths) == 1:
            out["simple"].append((f"the {t.color} {noun[t.obj.name]}", [t], False))
        if len(by_color[t.color]) == 1:
            out["simple"].append((f"the {t.color} object", [t], False))
    for word, (key, largest) in SELECTORS.items():
        for color, group in by_color.items():
            chosen = _pick(group, key, largest)
            if chosen:
                out["relation"].append((f"the {word} {color} object", [chosen], False))
        for shape, group in by_shape.items():
            chosen = _pick(group, key, largest)
            if chosen:
                out["relation"].append((f"the {word} {NOUNS[shape][0]}", [chosen], False))
        chosen = _pick(truths, key, largest)
        if chosen:
            out["relation"].append((f"the {word} object on the table", [chosen], False))
    for anchor in truths:
        if len(by_color[anchor.color]) > 1 and sum(
                u.color == anchor.color and u.shape == anchor.shape for u in truths) > 1:
            continue  # the anchor itself must be unambiguous
        anchor_name = (f"the {anchor.color} {noun[anchor.obj.name]}"
                       if len(by_color[anchor.color]) > 1 else f"the {anchor.color} object")
        for shape, group in by_shape.items():
            others = sorted((t for t in group if t is not anchor),
                            key=lambda t: math.dist((t.x, t.y), (anchor.x, anchor.y)))
            if len(others) < 2:
                continue
            d0, d1 = (math.dist((t.x, t.y), (anchor.x, anchor.y)) for t in others[:2])
            if d1 >= NEXT_TO_RATIO * d0:
                out["next_to"].append((f"the {NOUNS[shape][0]} next to {anchor_name}",
                                       [others[0]], False))
    for color, group in by_color.items():
        if len(group) >= 2:
            out["all"].append((f"all the {color} objects", list(group), False))
    missing = [c for c in CHROMATIC if c not in by_color]
    for color in missing:
        out["absent"].append((f"the {color} {rng.choice(NOUNS[str(rng.choice(list(NOUNS)))])}",
                              [], False))
    for color, group in by_color.items():
        shapes = {t.shape for t in group}
        for shape in NOUNS:
            if shape not in shapes and len(group) == 1:
                out["absent"].append((f"the {color} {NOUNS[shape][0]}", [], False))
    left = _pick(truths, "x", False)
    if left:
        out["sentence"].append(("Which object sits closest to the left edge of the table?",
                                [left], True))
    big = _pick(truths, "area", True)
    if big:
        out["sentence"].append(("If I could lift only the biggest thing on the table, which "
                                "one would it be?", [big], True))
    for t in truths:
        if t.shape in ("circle", "ellipse") and len(by_color[t.color]) == 1:
            out["sentence"].append((f"Something round and {t.color} is on the table; where is "
                                    "it?", [t], True))
    if missing:
        out["sentence"].append((f"Is there anything {missing[0]} I could pick up? Show it to "
                                "me.", [], True))
    return out


# Category mix of the jsonl set (per scene of 4 queries, drawn in this order of preference).
MIX = ("relation", "simple", "next_to", "absent", "relation", "sentence", "all", "relation")


def choose_queries(cands: dict[str, list], rng: np.random.Generator, count: int) -> list:
    chosen, used = [], set()
    start = int(rng.integers(0, len(MIX)))
    for step in range(len(MIX) * 3):
        if len(chosen) == count:
            break
        options = [c for c in cands[MIX[(start + step) % len(MIX)]] if c[0] not in used]
        if options:
            pick = options[int(rng.integers(0, len(options)))]
            chosen.append(pick)
            used.add(pick[0])
    return chosen


def polygons_of(mask: np.ndarray) -> list[list[list[int]]]:
    contours, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL,
                                   cv2.CHAIN_APPROX_SIMPLE)
    return [c.reshape(-1, 2).tolist() for c in contours if len(c) >= 3]


def render(rng: np.random.Generator, seed: int, small: bool):
    while True:
        scene, pose, lighting = random_scene(rng, small)
        frame = render_scene(scene, pose, lighting, seed=seed)
        truths = [Truth(o, frame.masks[o.name]) for o in scene.objects
                  if frame.masks[o.name].sum() >= 150]
        if len(truths) >= 3:
            return frame, truths


def write_jpeg(path: Path, rgb: np.ndarray) -> None:
    cv2.imwrite(str(path), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR),
                [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])


def make_tabletop(out: Path, scenes: int, per_scene: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    for sub in ("images", "masks"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    lines = []
    for index in range(scenes):
        frame, truths = render(rng, seed * 1000 + index, small=index % 4 == 3)
        image = f"images/scene{index:03d}.jpg"
        write_jpeg(out / image, frame.rgb)
        for k, (query, targets, is_sentence) in enumerate(
                choose_queries(candidate_queries(truths, rng), rng, per_scene)):
            sample = {"id": f"scene{index:03d}-q{k}", "image": image, "query": query,
                      "is_sentence": is_sentence}
            if targets:
                mask = np.zeros(frame.rgb.shape[:2], bool)
                for t in targets:
                    mask |= t.mask
                if len(lines) % 5 == 4:  # every fifth sample: the truth as polygons
                    sample["polygons"] = polygons_of(mask)
                else:
                    sample["mask"] = f"masks/{sample['id']}.png"
                    cv2.imwrite(str(out / sample["mask"]), mask.astype(np.uint8) * 255)
            lines.append(json.dumps(sample))
    (out / "annotations.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines)


def make_reasonseg(out: Path, seed: int) -> int:
    """Four images in ReasonSeg's own layout; one with an ignore polygon, one a PNG."""
    rng = np.random.default_rng(seed + 7)
    out.mkdir(parents=True, exist_ok=True)
    total = 0
    for index in range(4):
        frame, truths = render(rng, seed * 1000 + 500 + index, small=index == 2)
        cands = candidate_queries(truths, rng)
        pool = [c for c in cands["sentence"] if c[1]] if index % 2 == 0 else []
        pool = pool or cands["relation"] + cands["simple"]
        query, targets, is_sentence = pool[int(rng.integers(0, len(pool)))]
        texts = [query]
        if is_sentence is False and cands["relation"]:  # a second phrasing of the same answer
            same = [c for c in cands["relation"] + cands["simple"]
                    if c[1] == targets and c[0] != query]
            texts += [same[0][0]] if same else []
        shapes = [{"label": "target", "labels": ["target"], "shape_type": "polygon",
                   "image_name": "", "points": p, "group_id": None, "flags": {}}
                  for t in targets for p in polygons_of(t.mask)]
        if index == 1:  # an ignore region over an object the query does not name
            other = next(t for t in truths if t not in targets)
            shapes += [{"label": "ignore", "labels": ["ignore"], "shape_type": "polygon",
                        "image_name": "", "points": p, "group_id": None, "flags": {}}
                       for p in polygons_of(other.mask)]
        stem = f"tabletop_{index:02d}"
        suffix = ".png" if index == 3 else ".jpg"
        if suffix == ".png":
            cv2.imwrite(str(out / f"{stem}.png"), cv2.cvtColor(frame.rgb, cv2.COLOR_RGB2BGR))
        else:
            write_jpeg(out / f"{stem}.jpg", frame.rgb)
        record = {"text": texts, "is_sentence": bool(is_sentence), "shapes": shapes}
        (out / f"{stem}.json").write_text(json.dumps(record) + "\n", encoding="utf-8")
        total += len(texts)
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "data"), help="parent folder")
    parser.add_argument("--scenes", type=int, default=25)
    parser.add_argument("--per-scene", type=int, default=4)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args(argv)
    parent = Path(args.out)
    for name in ("eval_tabletop", "eval_reasonseg_mini"):
        shutil.rmtree(parent / name, ignore_errors=True)
    n = make_tabletop(parent / "eval_tabletop", args.scenes, args.per_scene, args.seed)
    m = make_reasonseg(parent / "eval_reasonseg_mini", args.seed)
    print(f"wrote {parent / 'eval_tabletop'} ({n} samples) and "
          f"{parent / 'eval_reasonseg_mini'} ({m} samples)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
