"""The dashboard's dgboost page: ``/dgboost/jobs`` on the scheduler's HTTP server (no new port;
the dashboard's address and TLS settings apply), read-only.

The page is one HTML document with its script inline (no assets to serve, nothing fetched from
elsewhere): every second it reads ``/dgboost/jobs.json?id=`` (the job table and, in the same
answer, the selected job's curves, thinned to 2000 points), redraws the table and draws the
curves (the first running job's, until one is clicked) as SVG polylines, one per eval set and metric, each
scaled to its own range, a NaN leaving a gap.
"""

from __future__ import annotations

import json
import math

from tornado import web

ROUTE = "/dgboost/jobs"


def add_routes(scheduler, registry) -> None:
    """Serve the page where the scheduler serves its dashboard (nothing without an HTTP server)."""
    application = getattr(scheduler, "http_application", None)
    if application is None:
        return
    application.add_handlers(r".*", [(ROUTE, _Page), (ROUTE + ".json", _Table, {"registry": registry})])


class _Page(web.RequestHandler):
    def get(self):
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.write(_HTML)


class _Table(web.RequestHandler):
    def initialize(self, registry):
        self.registry = registry

    def get(self):
        """The table (no curves); with ``?id=``, that job's curves too, each thinned to at most
        _CURVE_POINTS points (what a page draws; the whole curve is dgboost jobs show's)."""
        body = {"jobs": self.registry.list()}
        wanted = self.get_argument("id", None)
        if wanted and wanted in self.registry.jobs:
            curves = self.registry.jobs[wanted]["curves"]
            body["curves"] = {name: {metric: _thinned(values) for metric, values in metrics.items()}
                              for name, metrics in curves.items()}
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.write(json.dumps(_finite(body), allow_nan=False))


#: The most points of a curve the page's JSON carries.
_CURVE_POINTS = 2000


def _thinned(values: list) -> list:
    """Every k-th of ``values`` and the last, k the smallest keeping _CURVE_POINTS or fewer."""
    step = -(-len(values) // _CURVE_POINTS)
    return list(values) if step <= 1 else list(values[::step]) + ([values[-1]] if (len(values) - 1) % step else [])


def _finite(value):
    """``value`` with every non-finite float as None (JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


_HTML = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>dgboost jobs</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } table { border-collapse: collapse; margin-bottom: 1.5em; }
th, td { padding: 0.3em 0.8em; border-bottom: 1px solid #ddd; text-align: left; font-size: 0.9em; }
tr.job { cursor: pointer; } tr.selected { background: #eef4ff; }
.running { color: #0a6; } .queued { color: #a60; } .failed, .cancelled { color: #c22; }
svg { border: 1px solid #ddd; background: #fff; } .legend span { margin-right: 1.2em; font-size: 0.85em; }
</style></head>
<body>
<h1>dgboost jobs</h1>
<table id="jobs"><thead><tr><th>id</th><th>name</th><th>user</th><th>status</th><th>round</th>
<th>latest metric</th><th>started</th><th>ETA</th><th>workers</th><th>rows</th></tr></thead>
<tbody></tbody></table>
<h2 id="curve-title">Learning curves</h2>
<svg id="curves" width="720" height="300" viewBox="0 0 720 300"></svg>
<div class="legend" id="legend"></div>
<script>
"use strict";
const colours = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"];
let selected = null;

function cell(text) { const td = document.createElement("td"); td.textContent = text; return td; }
function time(seconds) { return seconds ? new Date(seconds * 1000).toLocaleTimeString() : ""; }
function duration(seconds) {
  if (seconds === null || seconds === undefined) return "";
  const s = Math.round(seconds); return s >= 60 ? Math.floor(s / 60) + " min " + (s % 60) + " s" : s + " s";
}
function latest(metrics) {
  for (const [set, values] of Object.entries(metrics || {}))
    for (const [metric, value] of Object.entries(values))
      return set + "-" + metric + " " + (value === null ? "nan" : Number(value).toFixed(5));
  return "";
}

function drawTable(jobs) {
  const body = document.querySelector("#jobs tbody");
  body.replaceChildren();
  for (const job of jobs) {
    const row = document.createElement("tr");
    row.className = "job" + (job.id === selected ? " selected" : "");
    row.dataset.id = job.id;
    const status = cell(job.status); status.className = "status " + job.status;
    const round = job.round === null ? "" : (job.round + 1) + " of " + job.rounds;
    row.append(cell(job.id), cell(job.name), cell(job.user || ""), status, cell(round), cell(latest(job.metrics)),
               cell(time(job.started)), cell(duration(job.eta)), cell((job.workers || []).length),
               cell(job.rows === null ? "" : job.rows));
    row.addEventListener("click", () => { selected = job.id; refresh(); });
    body.append(row);
  }
}

function drawCurves(job, curves) {
  const svg = document.getElementById("curves"), legend = document.getElementById("legend");
  svg.replaceChildren(); legend.replaceChildren();
  document.getElementById("curve-title").textContent = job ? "Learning curves: " + job.name + " (" + job.id + ")"
                                                            : "Learning curves";
  if (!job) return;
  const width = 720, height = 300, pad = 20;
  let index = 0;
  for (const [set, metrics] of Object.entries(curves || {})) {
    for (const [metric, values] of Object.entries(metrics)) {
      const finite = values.filter(Number.isFinite);
      if (finite.length === 0) continue;
      const low = finite.reduce((a, b) => Math.min(a, b)), high = finite.reduce((a, b) => Math.max(a, b));
      const span = high - low || 1;
      const points = values.map((v, i) => [v, pad + (width - 2 * pad) * i / Math.max(1, values.length - 1),
                                           height - pad - (height - 2 * pad) * (v - low) / span])
                           .filter(p => Number.isFinite(p[0])).map(p => [p[1], p[2]]);  // NaN: a gap
      const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
      line.setAttribute("points", points.map(p => p.join(",")).join(" "));
      line.setAttribute("fill", "none");
      line.setAttribute("stroke", colours[index % colours.length]);
      line.setAttribute("stroke-width", "2");
      line.setAttribute("class", "curve");
      line.dataset.name = set + "-" + metric;
      svg.append(line);
      const key = document.createElement("span");
      key.style.color = colours[index % colours.length];
      key.textContent = set + "-" + metric + " (" + low.toFixed(4) + " to " + high.toFixed(4) + ")";
      legend.append(key);
      index += 1;
    }
  }
}

async function table(id) {  // the table, and the curves of job `id` (one request)
  const query = id === null ? "" : "?id=" + encodeURIComponent(id);
  return (await fetch("jobs.json" + query, {cache: "no-store"})).json();
}

async function refresh() {
  try {
    let reply = await table(selected);
    if (selected === null || !reply.jobs.some(j => j.id === selected)) {
      const running = reply.jobs.find(j => j.status === "running") || reply.jobs[0];
      selected = running ? running.id : null;
      if (selected !== null) reply = await table(selected);  // a new selection: its curves
    }
    drawTable(reply.jobs);
    drawCurves(reply.jobs.find(j => j.id === selected), reply.curves || {});
    document.body.dataset.loaded = "true";
  } catch (error) {
    document.getElementById("curve-title").textContent = "Learning curves (the scheduler did not answer)";
  }
}
refresh();
setInterval(refresh, 1000);
</script>
</body></html>
"""
