// A self-contained HTML report: the data as inline JSON, a canvas timeline (one lane per thread,
// a row per nesting depth, boxes colored by op type, hover for details, wheel zoom, drag to pan;
// in accelerator sessions also lanes for CPU fallbacks in red, copies in orange and each GPU
// stream's device-timed kernels) and the summary table with copy and fallback totals.
// No network access: everything is inline.
#include <fmt/format.h>
#include <ingot/error.h>
#include <ingot/profiler.h>

#include <fstream>
#include <nlohmann/json.hpp>

namespace ingot::profiler {

namespace {

// Op colors, assigned to op types in order of total time. tests/profiler/check_screenshot.py
// counts these exact colors in the screenshot: keep the two lists in sync.
constexpr const char* kPalette[] = {"#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4",
                                    "#f032e6", "#bfef45", "#ffe119", "#469990", "#9a6324", "#800000"};
// Fallbacks and copies: colours outside the palette.
constexpr const char* kFallbackColor = "#ff0000";
constexpr const char* kCopyColor = "#ff8c00";
constexpr int kFallbackLane = -1;  // the lane of Fallback events (they share their thread's tid)

std::string escape_html(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// JSON inside <script>: "</" would end the script element early.
std::string script_safe(std::string json) {
  for (size_t i = 0; (i = json.find("</", i)) != std::string::npos; i += 3) json.replace(i, 2, "<\\/");
  return json;
}

constexpr const char* kPage = R"HTML(<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font: 13px system-ui, sans-serif; margin: 16px; color: #222; background: #fff; }}
h1 {{ font-size: 18px; margin: 0 0 8px; }}
#timeline {{ display: block; border: 1px solid #888; }}
#tip {{ position: fixed; display: none; background: #fffbe6; border: 1px solid #999; padding: 4px 8px;
        font: 12px monospace; white-space: pre; pointer-events: none; z-index: 2; }}
table {{ border-collapse: collapse; margin-top: 12px; }}
td, th {{ border-bottom: 1px solid #ddd; padding: 2px 10px; text-align: right; }}
td:first-child, th:first-child {{ text-align: left; }}
.sw {{ display: inline-block; width: 10px; height: 10px; margin-right: 6px; }}
.note {{ color: #555; margin: 4px 0; }}
</style></head>
<body>
<h1>{title}</h1>
<div class="note">{note}</div>
<canvas id="timeline"></canvas>
<div id="tip"></div>
<table id="summary"><tr><th>op type</th><th>count</th><th>total ms</th><th>mean ms</th><th>share</th>{gpu_th}</tr></table>
<div class="note">{alloc}</div>
<div class="note" id="copies">{copies}</div>
<div class="note" id="fallbacks">{fallbacks}</div>
<script>
const DATA = {data};
const PALETTE = {palette};
const FALLBACK = '{fallback_color}', COPY = '{copy_color}';
const color = {{}};
DATA.ops.forEach((o, i) => color[o.type] = PALETTE[i % PALETTE.length]);
const table = document.getElementById('summary');
for (const o of DATA.ops) {{
  const tr = table.insertRow();
  tr.innerHTML = `<td><span class="sw" style="background:${{color[o.type]}}"></span>${{o.type}}</td>` +
    `<td>${{o.count}}</td><td>${{o.total.toFixed(3)}}</td><td>${{o.mean.toFixed(4)}}</td>` +
    `<td>${{(o.share * 100).toFixed(1)}}%</td>` +
    (DATA.gpu ? `<td>${{o.dcount ? o.dtotal.toFixed(3) : '-'}}</td>` : '');
}}
// Layout: a label column, then per thread one row per nesting depth, then the live-bytes graph.
const canvas = document.getElementById('timeline');
const ROW = 22, LABEL = 90, MEM = 60, PAD = 6;
const lanes = [];
let y = PAD;
for (const t of DATA.threads) {{
  const depth = DATA.events.reduce((d, e) => e[0] === t[0] ? Math.max(d, e[1]) : d, 0);
  lanes.push({{tid: t[0], name: t[1], y: y, rows: depth + 1}});
  y += (depth + 1) * ROW + PAD;
}}
const memY = y + PAD;
const width = Math.max(600, document.documentElement.clientWidth - 40);
canvas.width = width;
canvas.height = memY + MEM + PAD;
// The visible time window [v0, v1] in us: the wheel zooms around the cursor, dragging pans,
// a double click shows everything again.
const t0 = DATA.t0, t1 = Math.max(DATA.t1, DATA.t0 + 1e-3);
let v0 = t0, v1 = t1;
const xOf = t => LABEL + (t - v0) / (v1 - v0) * (width - LABEL - PAD);
const ctx = canvas.getContext('2d');
const peak = DATA.mem.reduce((p, m) => Math.max(p, m[1]), 1);  // no spread: traces can be long
let boxes = [];
function draw() {{
  ctx.fillStyle = '#1e1e2e';  // the screenshot test finds the canvas by this color
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.font = '12px sans-serif';
  boxes = [];
  ctx.save();
  ctx.beginPath(); ctx.rect(LABEL, 0, width - LABEL, canvas.height); ctx.clip();
  for (const lane of lanes) {{
    for (const e of DATA.events) {{
      if (e[0] !== lane.tid || e[2] > v1 || e[2] + e[3] < v0) continue;
      const x0 = xOf(e[2]), x1 = Math.max(xOf(e[2] + e[3]), x0 + 1);
      const by = lane.y + e[1] * ROW;
      ctx.fillStyle = e[6] === 'op' ? color[e[5]] : e[6] === 'fallback' ? FALLBACK : e[6] === 'copy' ? COPY : '#7f849c';
      ctx.fillRect(x0, by + 1, x1 - x0, ROW - 2);
      if (x1 - x0 > 40) {{
        ctx.fillStyle = '#000';
        ctx.save(); ctx.beginPath(); ctx.rect(x0, by, x1 - x0, ROW); ctx.clip();
        ctx.fillText(e[4], Math.max(x0, LABEL) + 3, by + 15); ctx.restore();
      }}
      boxes.push({{x0, x1, y0: by, y1: by + ROW, e}});
    }}
  }}
  // Live bytes (allocations made while profiling) as a line.
  ctx.strokeStyle = '#a6adc8';
  ctx.beginPath();
  ctx.moveTo(xOf(t0), memY + MEM);
  for (const [t, b] of DATA.mem) ctx.lineTo(xOf(t), memY + MEM - b / peak * MEM);
  ctx.stroke();
  ctx.restore();
  ctx.fillStyle = '#cdd6f4';
  for (const lane of lanes) ctx.fillText(lane.name, 6, lane.y + 15);
  ctx.fillText('live bytes', 6, memY + 15);
  ctx.fillText(`${{(v0 - t0).toFixed(0)}} .. ${{(v1 - t0).toFixed(0)}} us`, 6, memY + MEM);
}}
draw();
canvas.addEventListener('wheel', ev => {{
  ev.preventDefault();
  const r = canvas.getBoundingClientRect();
  const at = v0 + (ev.clientX - r.left - LABEL) / (width - LABEL - PAD) * (v1 - v0);
  const f = ev.deltaY < 0 ? 0.8 : 1.25;
  v0 = Math.max(t0, at - (at - v0) * f); v1 = Math.min(t1, at + (v1 - at) * f);
  if (v1 - v0 < 1e-3) v1 = v0 + 1e-3;
  draw();
}}, {{passive: false}});
let drag = null;
canvas.addEventListener('mousedown', ev => drag = {{x: ev.clientX, v0, v1}});
window.addEventListener('mouseup', () => drag = null);
canvas.addEventListener('dblclick', () => {{ v0 = t0; v1 = t1; draw(); }});
const tip = document.getElementById('tip');
canvas.addEventListener('mousemove', ev => {{
  if (drag) {{
    const dt = (ev.clientX - drag.x) / (width - LABEL - PAD) * (drag.v1 - drag.v0);
    const shift = Math.min(Math.max(-dt, t0 - drag.v0), t1 - drag.v1);
    v0 = drag.v0 + shift; v1 = drag.v1 + shift;
    draw();
    return;
  }}
  const r = canvas.getBoundingClientRect(), mx = ev.clientX - r.left, my = ev.clientY - r.top;
  let hit = null;
  for (const b of boxes) if (mx >= b.x0 && mx <= b.x1 && my >= b.y0 && my <= b.y1) hit = b;
  if (!hit) {{ tip.style.display = 'none'; return; }}
  const e = hit.e;
  tip.textContent = `${{e[4]}}  (${{e[6] === 'op' ? e[5] : e[6]}})\nstart ${{(e[2] - t0).toFixed(1)}} us, ` +
    `duration ${{e[3].toFixed(1)}} us\n` + (e[7] ? 'inputs: ' + e[7] : '') + (e[8] ? '\n' + e[8] : '');
  tip.style.left = (ev.clientX + 12) + 'px';
  tip.style.top = (ev.clientY + 12) + 'px';
  tip.style.display = 'block';
}});
canvas.addEventListener('mouseleave', () => tip.style.display = 'none');
</script>
</body></html>
)HTML";

}  // namespace

std::string Trace::html_report(const std::string& title) const {
  using nlohmann::json;
  json evs = json::array(), mem = json::array(), ops = json::array(), ths = json::array();
  double t0 = 0, t1 = 0;
  bool first = true;
  for (const Event& e : events) {
    double start = double(e.start_ns) * 1e-3, dur = double(e.end_ns - e.start_ns) * 1e-3;
    if (e.kind == EventKind::Alloc || e.kind == EventKind::Free) {
      mem.push_back({start, e.live_bytes});
      continue;
    }
    std::string inputs, extra;
    for (size_t i = 0; i < e.inputs.size(); ++i) inputs += (i ? ", " : "") + e.inputs[i].str();
    int64_t lane = e.tid, row = e.depth;
    std::string name = e.name;
    if (e.kind == EventKind::Fallback) {
      lane = kFallbackLane;
      row = 0;
      extra = fmt::format("ran on the CPU: {}; {} bytes copied for it", e.op_type, e.bytes);
    } else if (e.kind == EventKind::Copy) {
      if (!e.value.empty()) name += " " + e.value;
      extra = fmt::format("{} bytes{}{}", e.bytes, e.blocking ? ", blocking" : "",
                          e.fallback.empty() ? "" : "; for fallback " + e.fallback);
    }
    if (e.on_device()) extra += (extra.empty() ? "" : "; ") + std::string("timed on the device");
    evs.push_back({lane, row, start, dur, name, e.op_type, std::string(kind_name(e.kind)), inputs, extra});
    if (first || start < t0) t0 = start;
    if (first || start + dur > t1) t1 = start + dur;
    first = false;
  }
  for (const OpStats& o : summary.ops) {
    ops.push_back({{"type", o.op_type},
                   {"count", o.count},
                   {"total", o.total_ms},
                   {"mean", o.mean_ms},
                   {"share", o.share},
                   {"dcount", o.device_count},
                   {"dtotal", o.device_ms}});
  }
  // Lanes: the host threads, then CPU fallbacks, then the copies and each GPU stream.
  bool fallback_lane = summary.fallback_count > 0;
  for (const auto& [tid, name] : threads) {
    if (fallback_lane && tid >= kCopiesTrack) {
      ths.push_back({kFallbackLane, "CPU fallbacks"});
      fallback_lane = false;
    }
    ths.push_back({tid, name});
  }
  if (fallback_lane) ths.push_back({kFallbackLane, "CPU fallbacks"});
  bool gpu = summary.device_events > 0;
  json data = {{"events", evs}, {"mem", mem}, {"ops", ops}, {"threads", ths}, {"t0", t0}, {"t1", t1}, {"gpu", gpu}};
  json palette = json::array();
  for (const char* c : kPalette) palette.push_back(c);
  const Summary& s = summary;
  std::string note = fmt::format("{} op events, {:.3f} ms of op time; {} session runs, {:.3f} ms", s.op_events, s.op_ms,
                                 s.session_runs, s.session_ms);
  std::string alloc = fmt::format("allocations: {} ({} bytes), frees: {} ({} bytes), peak live: {} bytes",
                                  s.alloc_count, s.alloc_bytes, s.free_count, s.freed_bytes, s.peak_live_bytes);
  if (gpu) note += fmt::format("; GPU: {} kernels, {:.3f} ms of device time", s.device_events, s.device_ms);
  std::string copies, fallbacks;
  if (gpu || s.copy_count > 0 || s.fallback_count > 0) {
    copies = fmt::format(
        "<span class=\"sw\" style=\"background:{}\"></span>copies: {} ({} bytes; H2D {}, D2H {}, D2D {} bytes), "
        "{:.3f} ms host, {:.3f} ms device",
        kCopyColor, s.copy_count, s.copy_bytes, s.h2d_bytes, s.d2h_bytes, s.d2d_bytes, s.copy_ms, s.copy_device_ms);
    fallbacks = fmt::format("<span class=\"sw\" style=\"background:{}\"></span>fallbacks (ran on the CPU): ",
                            kFallbackColor);
    if (s.fallbacks.empty()) fallbacks += "none";
    for (size_t i = 0; i < s.fallbacks.size(); ++i) {
      const FallbackStats& f = s.fallbacks[i];
      std::string nodes;
      for (const std::string& n : f.nodes) nodes += (nodes.empty() ? "" : " ") + n;
      fallbacks += escape_html(fmt::format("{}{} x{} ({:.3f} ms, {} bytes copied; nodes: {})", i ? ", " : "",
                                           f.op_type, f.count, f.total_ms, f.bytes, nodes));
    }
    if (!s.fallbacks.empty()) {
      fallbacks += fmt::format("; total {} ({} op type{}), {:.3f} ms, {} bytes copied for them", s.fallback_count,
                               s.fallbacks.size(), s.fallbacks.size() == 1 ? "" : "s", s.fallback_ms, s.fallback_bytes);
    }
  }
  return fmt::format(fmt::runtime(kPage), fmt::arg("title", escape_html(title)), fmt::arg("note", note),
                     fmt::arg("alloc", alloc), fmt::arg("copies", copies), fmt::arg("fallbacks", fallbacks),
                     fmt::arg("gpu_th", gpu ? "<th>gpu ms</th>" : ""), fmt::arg("data", script_safe(data.dump())),
                     fmt::arg("palette", palette.dump()), fmt::arg("fallback_color", kFallbackColor),
                     fmt::arg("copy_color", kCopyColor));
}

void Trace::write_html(const std::string& path, const std::string& title) const {
  std::ofstream f(path, std::ios::binary);
  if (!f) fail("cannot write the HTML report to '{}'", path);
  f << html_report(title);
  if (!f) fail("cannot write the HTML report to '{}'", path);
}

}  // namespace ingot::profiler
