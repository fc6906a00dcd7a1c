#!/usr/bin/env python3
"""Drives an attention viewer page (qkv viz) in headless Chromium through the DevTools protocol.

usage: attention_view_browser.py PAGE.html OUT_DIR

Opens the file from disk, then through the page's own controls (real mouse and key events):
picks layer 1 in the layer picker, hides every head but one, hovers a query token, opens the model
view and clicks a thumbnail, opens the matrix view and hovers a cell, switches the attention set.
Checks the DOM state after each step against the JSON embedded in the page, and that the console
saw no error. Writes a screenshot of each view to OUT_DIR. Standard library only (a minimal
WebSocket client). Exit 0: all checks passed; 1: a check failed (the reason on stderr); 77:
Chromium is not installed (the caller skips, saying so).
"""
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


class WebSocket:
    """Just enough of RFC 6455 for the DevTools protocol: text frames, client masking."""

    def __init__(self, url):
        assert url.startswith("ws://")
        hostport, path = url[5:].split("/", 1)
        host, port = hostport.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        req = (f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
        self.sock.sendall(req.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                fail("DevTools closed the WebSocket handshake")
            head += chunk
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            fail("DevTools refused the WebSocket: " + head.split(b"\r\n", 1)[0].decode())
        self.buf = head.split(b"\r\n\r\n", 1)[1]

    def send(self, text):
        data = text.encode()
        hdr = bytearray([0x81])
        n = len(data)
        if n < 126:
            hdr.append(0x80 | n)
        elif n < 65536:
            hdr.append(0x80 | 126)
            hdr += struct.pack(">H", n)
        else:
            hdr.append(0x80 | 127)
            hdr += struct.pack(">Q", n)
        mask = os.urandom(4)
        hdr += mask
        self.sock.sendall(bytes(hdr) + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                fail("DevTools closed the WebSocket")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self):
        message = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(n)
            if b0 & 0x0F == 0x8:
                fail("DevTools closed the WebSocket")
            message += payload
            if b0 & 0x80:
                return message.decode()


class Page:
    def __init__(self, ws):
        self.ws, self.next_id, self.events = ws, 0, []

    def call(self, method, **params):
        self.next_id += 1
        my = self.next_id
        self.ws.send(json.dumps({"id": my, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my:
                if "error" in msg:
                    fail(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, method, timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            for i, e in enumerate(self.events):
                if e.get("method") == method:
                    return self.events.pop(i)
            self.events.append(json.loads(self.ws.recv()))
        fail(f"no {method} within {timeout} s")

    def js(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True)
        if "exceptionDetails" in r:
            fail(f"evaluating {expr!r}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def center(self, selector):
        r = self.js(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
                    f" e.scrollIntoView({{block: 'center'}}); const b = e.getBoundingClientRect();"
                    f" return [b.left + b.width / 2, b.top + b.height / 2]; }})()")
        if r is None:
            fail(f"no element {selector}")
        return r

    def mouse(self, kind, x, y, **kw):
        self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, **kw)

    def click(self, selector):
        x, y = self.center(selector)
        self.mouse("mouseMoved", x, y)
        self.mouse("mousePressed", x, y, button="left", clickCount=1)
        self.mouse("mouseReleased", x, y, button="left", clickCount=1)

    def hover(self, selector):
        x, y = self.center(selector)
        self.mouse("mouseMoved", x, y)

    def key_down_arrow(self, selector):
        self.js(f"document.querySelector({json.dumps(selector)}).focus()")
        for kind in ("rawKeyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", type=kind, key="ArrowDown", code="ArrowDown",
                      windowsVirtualKeyCode=40, nativeVirtualKeyCode=40)

    def status(self):
        return self.js("Object.assign({}, document.getElementById('status').dataset)")

    def screenshot(self, path):
        r = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(r["data"]))


def embedded_json(html):
    start = html.index('<script type="application/json" id="qkv-data">')
    start = html.index(">", start) + 1
    return json.loads(html[start:html.index("</script>", start)])


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    page_path, out_dir = os.path.abspath(sys.argv[1]), sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("chromium is not installed (Debian package `chromium`; scripts/install.sh --tests installs it)")
        return 77
    with open(page_path, encoding="utf-8") as f:
        data = embedded_json(f.read())

    profile = tempfile.mkdtemp(prefix="qkv_chromium_")
    log_path = os.path.join(profile, "chromium.log")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                 "--disable-extensions", "--remote-debugging-port=0", f"--user-data-dir={profile}",
                                 "--window-size=1400,1000", "about:blank"],
                                stdout=log, stderr=subprocess.STDOUT,
                                env=dict(os.environ, TMPDIR=profile))  # its own temporary files go with the profile
    try:
        # A warm start opens the port in under 2 s; a cold one (the browser's 200+ MB not in the page
        # cache, other tests loading both cores) once took 34 s here, so allow 120 s, and stop at
        # once if the browser exits.
        port_file = os.path.join(profile, "DevToolsActivePort")
        deadline = time.monotonic() + 120
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if proc.poll() is not None or time.monotonic() > deadline:
                with open(log_path, errors="replace") as f:
                    tail = f.read()[-2000:]
                what = f"exited with status {proc.returncode}" if proc.poll() is not None else \
                    "did not open its DevTools port within 120 s"
                fail(f"Chromium {what}; its output ends:\n{tail}")
            time.sleep(0.1)
        port = int(open(port_file).read().split()[0])
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
        ws_url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
        p = Page(WebSocket(ws_url))
        for domain in ("Page", "Runtime", "Log"):
            p.call(domain + ".enable")
        p.call("Page.navigate", url="file://" + page_path)
        p.wait_event("Page.loadEventFired")
        run_checks(p, data, out_dir)
        errors = [e for e in p.events if
                  (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert")) or
                  e.get("method") == "Runtime.exceptionThrown" or
                  (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")]
        if errors:
            fail("console errors: " + json.dumps(errors)[:2000])
        print("ok: all checks passed; screenshots in " + out_dir)
        return 0
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(profile, ignore_errors=True)


def weight(s, li, hi, i, j):
    return s["weights"][((li * len(s["heads"]) + hi) * s["tq"] + i) * s["tk"] + j]


def run_checks(p, data, out_dir):
    st = p.status()
    if st.get("view") != "head" or int(st.get("lines", 0)) == 0:
        fail(f"the head view did not draw: {st}")
    s = data["sets"][0]
    if len(s["layers"]) < 2 or len(s["heads"]) < 2:
        fail("the test page needs at least 2 layers and 2 heads")
    # The layer picker: one key press down selects the second layer.
    p.key_down_arrow("#layer")
    st = p.status()
    if st.get("layer") != str(s["layers"][1]):
        fail(f"picking layer {s['layers'][1]} did not take: {st}")
    # Hide every head but the second, by clicking their colours.
    keep = 1
    for hi, h in enumerate(s["heads"]):
        if hi != keep:
            p.click(f"#heads button.head[data-head='{h}']")
    st = p.status()
    hidden = ",".join(str(hi) for hi in range(len(s["heads"])) if hi != keep)
    if st.get("hidden") != hidden:
        fail(f"hiding heads: expected hidden {hidden}, status {st}")
    if p.js("document.querySelectorAll('#heads button.head.off').length") != len(s["heads"]) - 1:
        fail("the hidden heads' buttons are not marked off")
    drawn = {int(x) for x in p.js("[...document.querySelectorAll('#head-svg line')].map(l => l.dataset.head)")}
    if drawn != {s["heads"][keep]}:
        fail(f"lines of heads {drawn} drawn, expected only head {s['heads'][keep]}")
    # Hover query token 1: only its lines, one per key with weight >= 0.01, opacity = weight.
    qi = 1
    p.hover(f"#head-svg text.tok.q[data-i='{qi}']")
    st = p.status()
    if st.get("focus") != f"q{qi}":
        fail(f"hovering query token {qi}: status {st}")
    want = [weight(s, 1, keep, qi, j) for j in range(s["tk"])]
    want = [w for w in want if w >= 0.01]
    got = p.js("[...document.querySelectorAll('#head-svg line')].map(l => +l.getAttribute('stroke-opacity'))")
    if len(got) != len(want) or any(abs(a - b) > 6e-4 for a, b in zip(sorted(got), sorted(want))):
        fail(f"hover lines: opacities {got}, expected the weights {want}")
    p.screenshot(os.path.join(out_dir, "head_view.png"))
    p.mouse("mouseMoved", 5, 5)
    if p.status().get("focus") != "":
        fail("leaving the token did not clear the focus")
    # Model view: a thumbnail per layer and head; clicking one enlarges it.
    p.click("nav button.tab[data-view='model']")
    if p.status().get("view") != "model":
        fail("the model view tab did not open the model view")
    n = p.js("document.querySelectorAll('#model-grid canvas.thumb').length")
    if n != len(s["layers"]) * len(s["heads"]):
        fail(f"{n} thumbnails, expected {len(s['layers'])} x {len(s['heads'])}")
    note = p.js("document.getElementById('model-note').textContent")
    long_page = s["tq"] > 48 or s["tk"] > 48
    if ("max-pooled to 48 cells" in note) != long_page:
        fail(f"{s['tq']} x {s['tk']} tokens, the model view says: {note!r}")
    p.screenshot(os.path.join(out_dir, "model_view.png"))
    l, h = s["layers"][-1], s["heads"][-1]
    p.click(f"#model-grid canvas.thumb[data-layer='{l}'][data-head='{h}']")
    ds = p.js("(() => { const e = document.getElementById('enlarged'); return [e.classList.contains('open'), e.dataset.layer, e.dataset.head]; })()")
    if ds != [True, str(l), str(h)]:
        fail(f"clicking thumbnail layer {l} head {h}: enlarged state {ds}")
    p.screenshot(os.path.join(out_dir, "model_view_enlarged.png"))
    p.click("#enlarged-close")
    if p.js("document.getElementById('enlarged').classList.contains('open')"):
        fail("the close button did not close the enlarged heatmap")
    # Matrix view: hover cell (query 0, last key) of layer 1, head 0 and read its weight.
    p.click("nav button.tab[data-view='matrix']")
    geo = p.js("(() => { const c = document.getElementById('matrix-canvas'); c.scrollIntoView({block: 'center'});"
               " const b = c.getBoundingClientRect(); return [b.left, b.top, +c.dataset.ox, +c.dataset.oy, +c.dataset.cell,"
               " c.dataset.layer, c.dataset.head]; })()")
    left, top, ox, oy, cell, ml, mh = geo
    if (ml, mh) != (str(s["layers"][1]), str(s["heads"][0])):
        fail(f"the matrix view shows layer {ml} head {mh}, expected the picked layer {s['layers'][1]} head {s['heads'][0]}")
    j = s["tk"] - 1
    p.mouse("mouseMoved", left + ox + (j + 0.5) * cell, top + oy + 0.5 * cell)
    text = p.js("document.getElementById('matrix-value').textContent")
    expect = f"{weight(s, 1, 0, 0, j):.4f}"
    if not text.endswith(expect):
        fail(f"matrix hover: {text!r}, expected the weight {expect}")
    p.screenshot(os.path.join(out_dir, "matrix_view.png"))
    if data.get("positional"):
        p.click("nav button.tab[data-view='positional']")
        if p.status().get("view") != "positional" or p.js("document.getElementById('pe-table').width") == 0:
            fail("the positional panel did not draw")
        p.screenshot(os.path.join(out_dir, "positional.png"))
    # The attention selector: the next set (e.g. decoder self-attention).
    if len(data["sets"]) > 1:
        p.click("nav button.tab[data-view='head']")
        p.key_down_arrow("#attn-set")
        st = p.status()
        if st.get("set") != "1" or int(st.get("lines", 0)) == 0:
            fail(f"switching to {data['sets'][1]['name']}: status {st}")
        p.screenshot(os.path.join(out_dir, "head_view_set1.png"))


if __name__ == "__main__":
    sys.exit(main())
