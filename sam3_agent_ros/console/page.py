"""The console's one page: HTML, CSS and JavaScript inline (no build step, nothing fetched from
anywhere but this console). Every control and region carries the accessible name of interface
§10; text from the node is written with ``textContent`` only (never parsed as markup).
"""

from __future__ import annotations

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>sam3_agent console</title>
<style nonce="NONCE">
body{font:14px/1.4 system-ui,sans-serif;margin:0;background:#f4f4f4;color:#111}
header{background:#1d3557;color:#fff;padding:6px 12px;display:flex;gap:16px;align-items:center}
header h1{font-size:16px;margin:0}
main{display:grid;grid-template-columns:minmax(320px,2fr) minmax(280px,1fr);gap:10px;padding:10px}
section{background:#fff;border:1px solid #ccc;border-radius:4px;padding:8px}
h2{font-size:14px;margin:0 0 6px}
#camera{width:100%;background:#222;min-height:240px;max-height:58vh;display:block;
object-fit:contain}
form{display:flex;gap:6px;margin:6px 0;align-items:center;flex-wrap:wrap}
input[type=text]{flex:1;min-width:160px;padding:4px}
button{padding:4px 10px}
:focus-visible{outline:3px solid #e63946;outline-offset:1px}
.lvl{font-weight:bold;display:inline-block;min-width:4.5em}
.OK{color:#2a7d2a}.WARN{color:#b36b00}.ERROR{color:#c1121f}.STALE{color:#666}
.reasoning{white-space:pre-wrap;max-height:9em;overflow:auto;color:#444;font-size:12px}
ul{margin:0;padding-left:18px}
.note{color:#b36b00;margin:2px 0}.note:empty{display:none}
</style></head><body>
<header><h1>sam3_agent console</h1>
<p id="connection" role="status" aria-label="Connection">connecting to the console</p>
<p id="notice" role="status" aria-label="Notice"></p></header>
<main>
<div>
<section aria-labelledby="h-camera"><h2 id="h-camera">Camera</h2>
<img id="camera" alt="Camera">
<form id="view-form"><label for="view">View</label>
<select id="view"><option value="auto">auto</option><option value="live">live frame</option>
<option value="answer">answer</option><option value="follow">follow</option>
<option value="concepts">concepts</option></select><span id="shown"></span></form>
</section>
<section aria-labelledby="h-ask"><h2 id="h-ask">Ask</h2>
<form id="ask-form"><label for="query">Query</label>
<input id="query" type="text" maxlength="2000" autocomplete="off"
placeholder="the leftmost blue object">
<input id="follow" type="checkbox"><label for="follow">Follow</label>
<button id="ask" type="submit">Ask</button>
<button id="cancel" type="button">Cancel</button></form>
<form id="correct-form"><label for="correction">Correction</label>
<input id="correction" type="text" maxlength="2000" autocomplete="off"
placeholder="no, the other one"><button id="correct" type="submit">Correct</button></form>
<form id="follow-form"><button id="stop-follow" type="button">Stop following</button>
<span id="follow-state"></span></form>
</section>
</div>
<div>
<section id="status" aria-labelledby="h-status"><h2 id="h-status">Status</h2>
<p id="phase">idle</p><p id="phases"></p><div id="reasoning" class="reasoning"></div></section>
<section id="result" aria-labelledby="h-result"><h2 id="h-result">Result</h2>
<p id="result-status">no answer yet</p><p id="result-note" class="note"></p><ul id="masks"></ul>
</section>
<section aria-labelledby="h-concepts"><h2 id="h-concepts">Standing concepts</h2>
<form id="concepts-form"><label for="concepts">Concepts</label>
<input id="concepts" type="text" maxlength="2000" autocomplete="off" placeholder="cup, red ball">
<button id="apply-concepts" type="submit">Apply concepts</button></form>
<div id="detections" role="region" aria-label="Concept detections">
<p id="detections-note" class="note"></p><ul id="detection-list"></ul></div></section>
<section id="health" aria-labelledby="h-health"><h2 id="h-health">Health</h2>
<ul id="health-list"><li>no diagnostics yet</li></ul></section>
</div>
</main>
<script nonce="NONCE">
"use strict";
const $ = (id) => document.getElementById(id);
const SOURCES = ["live", "answer", "follow", "concepts"];
const HOLD_MS = {answer: 10000, follow: 2000, concepts: 2000};
const images = {}; const imageAt = {};
let socket = null; let shownAnswer = null; let answerCurrent = false;
let camera = {state: "none", message: ""};
function li(text, cls) { const e = document.createElement("li"); e.textContent = text;
  if (cls) e.className = cls; return e; }
function fill(list, items) { list.replaceChildren(...items); }
function num(v, d) { return typeof v === "number" ? v.toFixed(d) : String(v); }
function box(b) { return Array.isArray(b) ? "[" + b.map((v) => num(v, 0)).join(", ") + "]" : "?"; }
function xyz(p) { return p ? "(" + ["x", "y", "z"].map((k) => num(p[k], 3)).join(", ") + ") m"
  : null; }
function send(message) {
  if (socket && socket.readyState === 1) socket.send(JSON.stringify(message));
  else $("notice").textContent = "not sent: the console is not connected";
}
function pick() {
  const view = $("view").value; const now = Date.now();
  if (view !== "auto") return view;
  for (const s of ["follow", "concepts", "answer"])
    if (images[s] && now - imageAt[s] < HOLD_MS[s] && (s !== "answer" || answerCurrent))
      return s;
  return images.live ? "live" : null;
}
// What the image is, in words: "live" only while frames come (the console's word and this
// page's own clock agree), else how old the last frame is.
function label(s) {
  if (!s) return camera.message || "no image yet";
  if (!images[s]) return "no " + s + " image now";
  if (s !== "live") return "showing: " + s + (s === "answer" && !answerCurrent
    ? " (not the current query's)" : "");
  const age = (Date.now() - imageAt.live) / 1000;
  if (camera.state === "live" && age < 3) return "showing: live";
  return "showing: last frame, " + age.toFixed(0) + " s old" +
    (camera.message ? " (" + camera.message + ")" : "");
}
function showImage() {
  const s = pick();
  if (s && images[s] && $("camera").src !== images[s]) $("camera").src = images[s];
  if (!s || !images[s]) $("camera").removeAttribute("src");
  $("shown").textContent = label(s);
}
setInterval(showImage, 500);
function onImage(data) {
  const bytes = new Uint8Array(data); const source = SOURCES[bytes[0]];
  if (!source) return;
  const old = images[source];
  if (bytes.length === 1) {  // no longer current: forget it
    delete images[source]; showImage();
    if (old) setTimeout(() => URL.revokeObjectURL(old), 1000);
    return;
  }
  const url = URL.createObjectURL(new Blob([bytes.subarray(1)], {type: "image/jpeg"}));
  images[source] = url; imageAt[source] = Date.now();
  showImage();
  if (old) setTimeout(() => URL.revokeObjectURL(old), 1000);
}
const render = {
  connection(c) { $("connection").textContent = c.message; },
  notice(n) { $("notice").textContent = n.text; },
  status(s) {
    const parts = [s.phase || "?"];
    if (s.round) parts.push("round " + s.round);
    if (s.tool) parts.push("tool " + s.tool);
    if (s.text_prompt) parts.push('prompt "' + s.text_prompt + '"');
    if (s.num_masks !== null && s.num_masks !== undefined) parts.push(s.num_masks + " masks");
    $("phase").textContent = parts.join(", ") + (s.query_id ? " (" + s.query_id + ")" : "");
    $("phases").textContent = "phases: " + (s.phases || []).join(" > ");
    $("reasoning").textContent = s.reasoning || "";  // a new query: none yet, never the last
  },
  result(r) {
    if (r.query_id) shownAnswer = r.query_id;
    answerCurrent = r.status === "succeeded" && r.masks.length > 0 && !r.stale;
    let head = (r.status || "?") + (r.error ? ": " + r.error : "");
    if (r.query_id) head += ' for "' + r.query + '" (' + r.query_id + ")";
    if (r.refines) head += ", correcting " + r.refines;
    $("result-status").textContent = head;
    $("result-note").textContent = [r.stale, r.warning].filter(Boolean).join("; ");
    fill($("masks"), r.masks.map((m) => {
      let t = "mask " + m.id + ": score " + num(m.score, 2) + ", box " + box(m.bbox);
      const p = xyz(m.position);
      t += p ? ", position " + p + (r.frame_id ? " in " + r.frame_id : "")
        : (m.position_error ? ", no position: " + m.position_error : "");
      if (m.target) t += ", in " + m.target.frame_id + ": " + xyz(m.target.position);
      else if (m.target_error) t += ", not in the target frame: " + m.target_error;
      if (m.grasp) t += ", best grasp: width " + num(m.grasp.width, 3) + " m, score "
        + num(m.grasp.score, 2) + ", at " + xyz(m.grasp.position) + " (" + m.grasp.count
        + " clear)";
      else if (m.grasp_error) t += ", no grasp: " + m.grasp_error;
      return li(t);
    }));
    showImage();
  },
  camera(c) { camera = c; showImage(); },
  follow(f) { $("follow-state").textContent = "follow: " + f.state + " (" + f.query_id + ")"; },
  concepts(list) { if (document.activeElement !== $("concepts"))
    $("concepts").value = list.join(", "); },
  detections(d) {
    $("detections-note").textContent = d.message || "";
    fill($("detection-list"), d.detections.length ? d.detections.map((x) =>
      li(x.concept + " #" + x.id + ": score " + num(x.score, 2) + ", box " + box(x.bbox) +
         (x.position ? ", position " + xyz(x.position) : ""))) : [li("no detections")]);
  },
  health(list) {
    fill($("health-list"), list.map((s) => { const e = li(""); const l =
      document.createElement("span"); l.className = "lvl " + s.level; l.textContent = s.level;
      e.append(l, " " + s.name + ": " + s.message); return e; }));
  },
};
// A message that cannot be read or shown is said on the page, never dropped in silence, and
// never stops the other regions from being drawn.
function onText(text) {
  let message;
  try { message = JSON.parse(text); } catch (error) {
    $("notice").textContent = "the console sent a message this page cannot read (" +
      error.message + ")";
    return;
  }
  if (message.notice) render.notice(message.notice);
  for (const [key, value] of Object.entries(message.state || {})) {
    if (!render[key] || value === null) continue;
    try { render[key](value); } catch (error) {
      $("notice").textContent = "could not show " + key + ": " + error.message;
    }
  }
}
function connect() {
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  socket = new WebSocket(scheme + location.host + "/ws" + location.search);
  socket.binaryType = "arraybuffer";
  socket.onmessage = (e) => typeof e.data === "string" ? onText(e.data) : onImage(e.data);
  socket.onclose = () => { $("connection").textContent =
    "the console is not reachable: reconnecting"; setTimeout(connect, 1000); };
}
$("ask-form").addEventListener("submit", (e) => { e.preventDefault();
  send({type: "ask", query: $("query").value, follow: $("follow").checked}); });
$("correct-form").addEventListener("submit", (e) => { e.preventDefault();
  send({type: "correct", query: $("correction").value, refines: shownAnswer}); });
$("concepts-form").addEventListener("submit", (e) => { e.preventDefault();
  send({type: "concepts", text: $("concepts").value}); });
$("view-form").addEventListener("submit", (e) => e.preventDefault());
$("view").addEventListener("change", showImage);
$("cancel").addEventListener("click", () => send({type: "cancel"}));
$("stop-follow").addEventListener("click", () => send({type: "stop_follow"}));
connect();
</script></body></html>
"""


def page_html(nonce: str) -> str:
    return _PAGE.replace("NONCE", nonce)
