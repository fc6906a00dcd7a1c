// The attention viewer's page: CSS, body and script (plain DOM, SVG and canvas; no libraries).
//
// Element ids and classes the browser test drives (tests/viz/attention_page_browser.py):
//   #attn-set (select), #layer (select), #heads button.head[data-head] (toggle, .off when hidden),
//   nav button.tab[data-view=head|model|matrix|positional], #head-svg text.tok.q/.k[data-i],
//   #head-svg line (one per drawn weight), #model-grid canvas.thumb[data-layer][data-head],
//   #enlarged (overlay; .open when shown), #matrix-head (select), #matrix-canvas, #matrix-value,
//   #status (the state as data-* attributes).
#include "attention_page_assets.h"

namespace qkv::viz::detail {

const char* const kAttentionPageCss = R"CSS(
body { font: 14px/1.35 system-ui, sans-serif; margin: 0; color: #222; background: #fafafa; }
header { padding: 10px 16px; background: #fff; border-bottom: 1px solid #ddd; }
h1 { font-size: 17px; margin: 0 0 6px 0; }
table.info td { padding: 1px 10px 1px 0; vertical-align: top; }
table.info td:first-child { color: #666; white-space: nowrap; }
.notes { color: #a34; margin: 4px 0 0 0; }
.controls { padding: 8px 16px; display: flex; flex-wrap: wrap; gap: 14px; align-items: center; background: #fff;
            border-bottom: 1px solid #ddd; }
nav button.tab { border: 1px solid #bbb; background: #f3f3f3; padding: 4px 10px; cursor: pointer; border-radius: 4px; }
nav button.tab.active { background: #346; color: #fff; border-color: #346; }
#heads button.head { width: 26px; height: 22px; border: 2px solid #333; margin: 0 2px; cursor: pointer; color: #fff;
                     font-size: 11px; border-radius: 3px; }
#heads button.head.off { opacity: 0.18; }
section.view { display: none; padding: 12px 16px; }
section.view.active { display: block; }
#head-svg text.tok { cursor: default; font-size: 13px; }
#head-svg text.tok.hover { font-weight: bold; }
#head-svg rect.tokbg { fill: #36c; }
#model-grid { display: inline-grid; gap: 6px; align-items: start; }
#model-grid .cell { text-align: center; font-size: 11px; color: #555; }
#model-grid canvas.thumb { border: 1px solid #ccc; cursor: zoom-in; image-rendering: pixelated; display: block; }
.rowlabel { font-size: 12px; color: #555; align-self: center; white-space: nowrap; }
#enlarged { display: none; position: fixed; inset: 0; background: rgba(0,0,0,0.45); align-items: center;
            justify-content: center; }
#enlarged.open { display: flex; }
#enlarged .box { background: #fff; padding: 12px; border-radius: 6px; max-width: 95vw; max-height: 95vh; overflow: auto; }
.hoverval { min-height: 20px; font-family: ui-monospace, monospace; margin: 6px 0; }
canvas.matrix { border: 1px solid #ddd; background: #fff; }
.small { color: #666; font-size: 12px; }
)CSS";

const char* const kAttentionPageBody = R"HTML(
<header><h1 id="title"></h1><table class="info" id="info"></table><div class="notes" id="notes"></div></header>
<div class="controls">
  <nav id="tabs"><button class="tab" data-view="head">head view</button> <button class="tab" data-view="model">model view</button>
    <button class="tab" data-view="matrix">matrix view</button> <button class="tab" data-view="positional" id="tab-positional">positional encoding</button></nav>
  <label>attention <select id="attn-set"></select></label>
  <label>layer <select id="layer"></select></label>
  <span id="heads-label">heads <span id="heads"></span></span>
</div>
<div id="status" hidden></div>
<section class="view" id="view-head"><div class="small">Left: the attending (query) tokens; right: the attended (key) tokens.
  Line opacity is the weight (weights under 0.01 are not drawn). Hover a token to show only its lines; click a head's colour to show or hide it.</div>
  <svg id="head-svg" xmlns="http://www.w3.org/2000/svg"></svg></section>
<section class="view" id="view-model"><div class="small" id="model-note">One heatmap per layer (rows) and head (columns): rows are queries, columns keys. Click one to enlarge.</div>
  <div id="model-grid"></div></section>
<section class="view" id="view-matrix"><label>head <select id="matrix-head"></select></label>
  <div class="hoverval" id="matrix-value">hover a cell</div><canvas class="matrix" id="matrix-canvas"></canvas></section>
<section class="view" id="view-positional"><div id="pe-name"></div>
  <div class="hoverval" id="pe-value">hover a cell</div>
  <div><b>table</b> <span class="small">(position x dimension; blue negative, red positive)</span></div><canvas class="matrix" id="pe-table"></canvas>
  <div><b>dot products</b> <span class="small">PE[i] . PE[j]</span></div><canvas class="matrix" id="pe-dots"></canvas></section>
<div id="enlarged"><div class="box"><div><b id="enlarged-title"></b> <button id="enlarged-close">close</button></div>
  <div class="hoverval" id="enlarged-value"></div><canvas class="matrix" id="enlarged-canvas"></canvas></div></div>
)HTML";

const char* const kAttentionPageJs = R"JS(
"use strict";
const D = JSON.parse(document.getElementById("qkv-data").textContent);
const $ = (id) => document.getElementById(id);
const MODEL_CELLS = 48;  // viz::kModelViewMaxCells
const HEAD_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                     "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd"];
const S = { set: 0, layer: 0, hidden: new Set(), view: "head", focus: null, mhead: 0 };

// Viridis, sampled at 9 points and interpolated linearly.
const VIRIDIS = [[68,1,84],[71,44,122],[59,81,139],[44,113,142],[33,144,141],[39,173,129],[92,200,99],[170,220,50],[253,231,37]];
function viridis(t) {
  t = Math.min(1, Math.max(0, t)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(t)), f = t - i, a = VIRIDIS[i], b = VIRIDIS[i + 1];
  return [0, 1, 2].map((c) => Math.round(a[c] + f * (b[c] - a[c])));
}
function diverging(t) {  // t in [-1, 1]: blue - white - red
  t = Math.min(1, Math.max(-1, t));
  return t < 0 ? [Math.round(255 * (1 + t)), Math.round(255 * (1 + t)), 255] : [255, Math.round(255 * (1 - t)), Math.round(255 * (1 - t))];
}
function el(tag, attrs, parent, ns) {
  const e = ns ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}
const cur = () => D.sets[S.set];
const toks = (name) => D.sequences[name];
// Weight of (layer index, head index, query, key) in the current set.
function w(set, li, hi, i, j) { return set.weights[((li * set.heads.length + hi) * set.tq + i) * set.tk + j]; }
function label(set, side, i) {
  const name = side === "q" ? set.queries : set.keys, seg = D.segments[name];
  return toks(name)[i] + (seg ? " \u00b7" + "AB"[seg[i]] : "");
}

function status() {  // the state, for tests and for reading at a glance
  const st = $("status");
  st.dataset.view = S.view; st.dataset.set = S.set; st.dataset.layer = cur().layers[S.layer];
  st.dataset.hidden = [...S.hidden].sort((a, b) => a - b).join(",");
  st.dataset.focus = S.focus ? S.focus.side + S.focus.i : "";
  st.dataset.lines = $("head-svg").querySelectorAll("line").length;
}

// ---------------------------------------------------------------- head view
function drawHead() {
  const set = cur(), svg = $("head-svg"), q = toks(set.queries), k = toks(set.keys);
  svg.innerHTML = "";
  const rowH = 20, colW = 170, gap = 260, top = 40, n = Math.max(q.length, k.length);
  svg.setAttribute("width", 2 * colW + gap + 20); svg.setAttribute("height", top + n * rowH + 10);
  el("text", { x: colW - 4, y: 14, "text-anchor": "end", class: "small" }, svg, true).textContent = set.queries;
  el("text", { x: colW + gap + 4, y: 14, class: "small" }, svg, true).textContent = set.keys;
  const lines = el("g", {}, svg, true);
  const f = S.focus;
  // Shade the other side's tokens by the focused token's weights (averaged over the shown heads).
  const shown = set.heads.map((h, hi) => hi).filter((hi) => !S.hidden.has(hi));
  for (const side of ["q", "k"]) {
    const list = side === "q" ? q : k;
    for (let i = 0; i < list.length; ++i) {
      const y = top + i * rowH, x = side === "q" ? colW - 4 : colW + gap + 4;
      if (f && f.side !== side && shown.length) {
        let s = 0;
        for (const hi of shown) s += side === "k" ? w(set, S.layer, hi, f.i, i) : w(set, S.layer, hi, i, f.i);
        s /= shown.length;
        el("rect", { class: "tokbg", x: side === "q" ? 4 : colW + gap, y: y - 14, width: colW - 4, height: rowH - 2,
                     "fill-opacity": (0.6 * s).toFixed(3) }, svg, true);
      }
      const t = el("text", { x, y, "text-anchor": side === "q" ? "end" : "start", class: "tok " + side, "data-i": i }, svg, true);
      t.textContent = label(set, side, i);
      if (f && f.side === side && f.i === i) t.classList.add("hover");
    }
  }
  for (const hi of shown) {
    const color = HEAD_COLORS[set.heads[hi] % HEAD_COLORS.length];
    for (let i = 0; i < q.length; ++i) {
      if (f && f.side === "q" && f.i !== i) continue;
      for (let j = 0; j < k.length; ++j) {
        if (f && f.side === "k" && f.i !== j) continue;
        const v = w(set, S.layer, hi, i, j);
        if (!(v >= 0.01)) continue;
        el("line", { x1: colW, y1: top + i * rowH - 4, x2: colW + gap, y2: top + j * rowH - 4, stroke: color,
                     "stroke-width": 2, "stroke-opacity": v.toFixed(3), "data-head": set.heads[hi] }, lines, true);
      }
    }
  }
  status();
}

// ---------------------------------------------------------------- heatmaps on canvas
// Draws set (layer index li, head index hi) into canvas c. cell: px per cell; labels: token labels
// on both axes. Past `maxCells` tokens per axis the matrix is max-pooled to maxCells bins.
function drawMatrix(c, set, li, hi, cell, labels, maxCells) {
  const bq = maxCells && set.tq > maxCells ? maxCells : set.tq, bk = maxCells && set.tk > maxCells ? maxCells : set.tk;
  const ctx0 = c.getContext("2d");
  ctx0.font = "12px sans-serif";
  let lw = 0, lh = 0;
  if (labels) {
    for (let i = 0; i < set.tq; ++i) lw = Math.max(lw, ctx0.measureText(label(set, "q", i)).width);
    for (let j = 0; j < set.tk; ++j) lh = Math.max(lh, ctx0.measureText(label(set, "k", j)).width);
    lw = Math.min(lw, 160) + 8; lh = Math.min(lh, 160) + 8;
  }
  c.width = Math.ceil(lw + bk * cell + 1); c.height = Math.ceil(lh + bq * cell + 1);
  const ctx = c.getContext("2d");
  const img = ctx.createImageData(bk * cell, bq * cell);
  for (let a = 0; a < bq; ++a) for (let b = 0; b < bk; ++b) {
    let v = 0;
    const i0 = Math.floor(a * set.tq / bq), i1 = Math.floor((a + 1) * set.tq / bq);
    const j0 = Math.floor(b * set.tk / bk), j1 = Math.floor((b + 1) * set.tk / bk);
    for (let i = i0; i < i1; ++i) for (let j = j0; j < j1; ++j) v = Math.max(v, w(set, li, hi, i, j));
    const rgb = viridis(v);
    for (let y = 0; y < cell; ++y) for (let x = 0; x < cell; ++x) {
      const p = 4 * ((a * cell + y) * bk * cell + b * cell + x);
      img.data[p] = rgb[0]; img.data[p + 1] = rgb[1]; img.data[p + 2] = rgb[2]; img.data[p + 3] = 255;
    }
  }
  ctx.putImageData(img, lw, lh);
  if (labels) {
    ctx.fillStyle = "#222"; ctx.font = "12px sans-serif"; ctx.textBaseline = "middle";
    ctx.textAlign = "right";
    for (let i = 0; i < set.tq; ++i) ctx.fillText(label(set, "q", i), lw - 4, lh + (i + 0.5) * cell, 156);
    ctx.save(); ctx.translate(lw, lh - 4); ctx.rotate(-Math.PI / 2); ctx.textAlign = "left";
    for (let j = 0; j < set.tk; ++j) ctx.fillText(label(set, "k", j), 0, (j + 0.5) * cell, 156);
    ctx.restore();
  }
  c.dataset.ox = lw; c.dataset.oy = lh; c.dataset.cell = cell;
}
function hoverMatrix(c, out, set, li, hi) {
  c.onmousemove = (e) => {
    const r = c.getBoundingClientRect(), cell = +c.dataset.cell;
    const j = Math.floor((e.clientX - r.left - c.dataset.ox) / cell), i = Math.floor((e.clientY - r.top - c.dataset.oy) / cell);
    if (i < 0 || j < 0 || i >= set.tq || j >= set.tk) { out.textContent = ""; return; }
    out.textContent = set.queries + " " + i + " \u201c" + label(set, "q", i) + "\u201d \u2192 " + set.keys + " " + j +
      " \u201c" + label(set, "k", j) + "\u201d: " + w(set, li, hi, i, j).toFixed(4);
  };
}
const fitCell = (n) => Math.max(4, Math.min(28, Math.floor(640 / n)));

// ---------------------------------------------------------------- model view
function drawModel() {
  const set = cur(), grid = $("model-grid");
  grid.innerHTML = "";
  grid.style.gridTemplateColumns = "auto repeat(" + set.heads.length + ", auto)";
  const pooled = set.tq > MODEL_CELLS || set.tk > MODEL_CELLS;
  $("model-note").textContent = "One heatmap per layer (rows) and head (columns): rows are queries, columns keys. Click one to enlarge." +
    (pooled ? " The sequences are longer than " + MODEL_CELLS + " tokens: thumbnails are max-pooled to " + MODEL_CELLS +
      " cells per axis (enlarge one for the exact weights)." : "");
  const cell = Math.max(1, Math.floor(72 / Math.max(Math.min(set.tq, MODEL_CELLS), Math.min(set.tk, MODEL_CELLS))));
  el("div", {}, grid);
  set.heads.forEach((h) => { el("div", { class: "cell" }, grid).textContent = "head " + h; });
  set.layers.forEach((l, li) => {
    el("div", { class: "rowlabel" }, grid).textContent = "layer " + l;
    set.heads.forEach((h, hi) => {
      const d = el("div", { class: "cell" }, grid);
      const c = el("canvas", { class: "thumb", "data-layer": l, "data-head": h, title: "layer " + l + " head " + h }, d);
      drawMatrix(c, set, li, hi, cell, false, MODEL_CELLS);
      c.addEventListener("click", () => enlarge(li, hi));
    });
  });
}
function enlarge(li, hi) {
  const set = cur(), c = $("enlarged-canvas");
  $("enlarged-title").textContent = set.name + ": layer " + set.layers[li] + " head " + set.heads[hi];
  drawMatrix(c, set, li, hi, fitCell(Math.max(set.tq, set.tk)), true, 0);
  hoverMatrix(c, $("enlarged-value"), set, li, hi);
  $("enlarged").classList.add("open");
  $("enlarged").dataset.layer = set.layers[li]; $("enlarged").dataset.head = set.heads[hi];
}

// ---------------------------------------------------------------- matrix view
function drawMatrixView() {
  const set = cur(), c = $("matrix-canvas");
  drawMatrix(c, set, S.layer, S.mhead, fitCell(Math.max(set.tq, set.tk)), true, 0);
  hoverMatrix(c, $("matrix-value"), set, S.layer, S.mhead);
  c.dataset.layer = set.layers[S.layer]; c.dataset.head = set.heads[S.mhead];
}

// ---------------------------------------------------------------- positional encodings
function drawPositional() {
  const pe = D.positional;
  if (!pe) return;
  $("pe-name").textContent = pe.name;
  const paint = (c, rows, cols, vals, color, px) => {
    c.width = cols * px; c.height = rows * px;
    const ctx = c.getContext("2d"), img = ctx.createImageData(cols * px, rows * px);
    let m = 0;
    for (const v of vals) m = Math.max(m, Math.abs(v));
    for (let r = 0; r < rows; ++r) for (let q = 0; q < cols; ++q) {
      const rgb = color(vals[r * cols + q], m);
      for (let y = 0; y < px; ++y) for (let x = 0; x < px; ++x) {
        const p = 4 * ((r * px + y) * cols * px + q * px + x);
        img.data[p] = rgb[0]; img.data[p + 1] = rgb[1]; img.data[p + 2] = rgb[2]; img.data[p + 3] = 255;
      }
    }
    ctx.putImageData(img, 0, 0);
    c.onmousemove = (e) => {
      const b = c.getBoundingClientRect(), q = Math.floor((e.clientX - b.left) / px), r = Math.floor((e.clientY - b.top) / px);
      if (r >= 0 && q >= 0 && r < rows && q < cols) $("pe-value").textContent = (c.id === "pe-table" ? "position " + r + ", dimension " + q :
        "positions " + r + " . " + q) + ": " + vals[r * cols + q].toFixed(4);
    };
  };
  paint($("pe-table"), pe.positions, pe.dim, pe.table, (v, m) => diverging(v / (m || 1)), Math.max(2, Math.min(8, Math.floor(640 / pe.dim))));
  paint($("pe-dots"), pe.positions, pe.positions, pe.dots, (v, m) => diverging(v / (m || 1)), Math.max(2, Math.min(8, Math.floor(480 / pe.positions))));
}

// ---------------------------------------------------------------- controls
function fillLayerHead() {
  const set = cur();
  if (S.layer >= set.layers.length) S.layer = 0;
  if (S.mhead >= set.heads.length) S.mhead = 0;
  $("layer").innerHTML = "";
  set.layers.forEach((l, li) => { const o = el("option", { value: li }, $("layer")); o.textContent = l; });
  $("layer").value = S.layer;
  $("matrix-head").innerHTML = "";
  set.heads.forEach((h, hi) => { const o = el("option", { value: hi }, $("matrix-head")); o.textContent = h; });
  $("matrix-head").value = S.mhead;
  $("heads").innerHTML = "";
  set.heads.forEach((h, hi) => {
    const b = el("button", { class: "head" + (S.hidden.has(hi) ? " off" : ""), "data-head": h, title: "head " + h }, $("heads"));
    b.style.background = HEAD_COLORS[h % HEAD_COLORS.length];
    b.textContent = h;
    b.addEventListener("click", () => {
      if (S.hidden.has(hi)) S.hidden.delete(hi); else S.hidden.add(hi);
      b.classList.toggle("off", S.hidden.has(hi));
      render();
    });
  });
}
function render() {
  document.querySelectorAll("nav button.tab").forEach((b) => b.classList.toggle("active", b.dataset.view === S.view));
  document.querySelectorAll("section.view").forEach((s) => s.classList.toggle("active", s.id === "view-" + S.view));
  $("heads-label").style.visibility = S.view === "head" ? "visible" : "hidden";
  if (S.view === "head") drawHead();
  else if (S.view === "model") drawModel();
  else if (S.view === "matrix") drawMatrixView();
  else drawPositional();
  status();
}
function init() {
  $("title").textContent = D.title;
  document.title = D.title;
  for (const [k, v] of D.info) {
    const tr = el("tr", {}, $("info"));
    el("td", {}, tr).textContent = k;
    el("td", { id: "info-" + k.replace(/[^a-z0-9]+/gi, "-") }, tr).textContent = v;
  }
  $("notes").textContent = D.notes.join(" ");
  D.sets.forEach((s, i) => { const o = el("option", { value: i }, $("attn-set")); o.textContent = s.name; });
  if (!D.positional) $("tab-positional").style.display = "none";
  $("attn-set").addEventListener("change", () => { S.set = +$("attn-set").value; S.hidden.clear(); S.focus = null; fillLayerHead(); render(); });
  $("layer").addEventListener("change", () => { S.layer = +$("layer").value; S.focus = null; render(); });
  $("matrix-head").addEventListener("change", () => { S.mhead = +$("matrix-head").value; render(); });
  document.querySelectorAll("nav button.tab").forEach((b) => b.addEventListener("click", () => { S.view = b.dataset.view; render(); }));
  // Hover: delegated to the svg, which outlives its redrawn tokens (a redraw replaces the element
  // under the pointer, so per-token mouseleave would never come).
  const focusOn = (f) => {
    const same = (f === null && S.focus === null) || (f && S.focus && f.side === S.focus.side && f.i === S.focus.i);
    if (!same) { S.focus = f; drawHead(); }
  };
  $("head-svg").addEventListener("mouseover", (e) => {
    const t = e.target.closest ? e.target.closest("text.tok") : null;
    focusOn(t ? { side: t.classList.contains("q") ? "q" : "k", i: +t.dataset.i } : null);
  });
  $("head-svg").addEventListener("mouseleave", () => focusOn(null));
  $("enlarged-close").addEventListener("click", () => $("enlarged").classList.remove("open"));
  $("enlarged").addEventListener("click", (e) => { if (e.target === $("enlarged")) $("enlarged").classList.remove("open"); });
  fillLayerHead();
  render();
}
init();
)JS";

}  // namespace qkv::viz::detail
