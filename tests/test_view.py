"""`earmark view` in a real headless browser (Debian's chromium + chromedriver, driven by selenium): the page
loads a version of the hand-built catalog of tests/test_review.py, filters by domain and QC status, a clip's
audio reaches `canplay`, item text containing markup stays text, and a review decision made by clicking is
stored in `reviews` as `review import` stores it; pressing publish makes a version applying it."""

from __future__ import annotations

import shutil
import socket
import threading
import time
import xml.etree.ElementTree as ET

import pytest

from earmark.cli.view.server import ViewApp, make_server
from earmark.core.config import load_config
from earmark.flows.publish import publish_flow
from earmark.queries.browse import VersionView
from earmark.schemas import Caption, to_table
from earmark.stages.publish.formats import kept_items
from earmark.stages.publish.plots import version_plots
from earmark.stages.review import stored_decisions
from earmark.storage import Catalog, ShardMeta
from test_review import built  # noqa: F401  (the hand-built catalog, published once as v0001)

EVIL = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def served(built):  # noqa: F811
    cfg, cat, shards, _ = built
    evil = Caption(
        clip_id="m1",
        domain="0M0",
        prompt_name="p",
        prompt_sha="0" * 16,
        model="hand",
        confidence=0.9,
        item_id="m1:music:0",
        kind="music",
        ref_index=0,
        text=EVIL,
    )
    cat.write_shard(
        "k_evil", {"captions": to_table(Caption, [evil])}, ShardMeta(stage="t", stage_version="t", inputs=[]), None
    )
    second = publish_flow(cfg, {**shards, "captions": [*shards["captions"], "k_evil"]})
    assert second["version"] == "v0002"
    server = make_server(ViewApp(cfg, cat), port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield cfg, cat, f"http://127.0.0.1:{server.server_address[1]}/", server.guard.token
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    if not shutil.which("chromium") or not shutil.which("chromedriver"):
        pytest.fail("chromium and chromedriver are needed (make test installs them: apt chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--autoplay-policy=no-user-gesture-required",
        # a hostile name that resolves to loopback: what a DNS-rebinding page's name does
        "--host-resolver-rules=MAP evil.example 127.0.0.1",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_script_timeout(30)
    yield driver
    driver.quit()


def _wait(driver, predicate, timeout=30):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(predicate)


def _clips(driver) -> list[str]:
    return [e.get_attribute("data-clip") for e in driver.find_elements("css selector", "section.clip")]


def _reload_list(driver, select_id: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    before = driver.find_element("tag name", "body").get_attribute("data-loaded")
    Select(driver.find_element("id", select_id)).select_by_value(value)
    _wait(driver, lambda d: d.find_element("tag name", "body").get_attribute("data-loaded") != before)


def test_version_view_reads_items_verdicts_and_facts(served):
    _, cat, _, _ = served
    view = VersionView(cat, "v0002")
    page = view.page()
    assert page["total"] == 4 and {c["clip_id"] for c in page["clips"]} == {"s1", "s2", "m1", "a1"}
    s2 = next(c for c in page["clips"] if c["clip_id"] == "s2")
    long = next(i for i in s2["items"] if i["item_id"] == "s2:long:0")
    assert not long["kept"] and any(v["check"] == "hallucination" and not v["keep"] for v in long["qc"])
    assert s2["facts"] and all("type" in f and "source" in f for f in s2["facts"])
    rejected = view.page(status="rejected")
    assert all(not i["kept"] for c in rejected["clips"] for i in c["items"])
    assert {c["clip_id"] for c in view.page(domain="00A")["clips"]} == {"a1"}
    assert view.wav("a1")[:4] == b"RIFF"
    with pytest.raises(ValueError, match="status"):
        view.page(status="maybe")
    for name, svg in version_plots(cat, "v0002").items():  # well-formed SVG, markup in labels escaped
        assert ET.fromstring(svg).tag.endswith("svg"), name


def test_the_page_lists_filters_plays_and_reviews_in_a_browser(served, browser):
    cfg, cat, url, _ = served
    browser.get(url)
    _wait(browser, lambda d: d.find_element("tag name", "body").get_attribute("data-loaded"))
    assert sorted(_clips(browser)) == ["a1", "m1", "s1", "s2"]
    assert "v0002" in browser.find_element("id", "title").text

    # markup in an item is shown as text and never runs
    texts = [e.text for e in browser.find_elements("css selector", "[data-clip='m1'] .item .text")]
    assert EVIL in texts
    assert browser.execute_script("return window.pwned === undefined")

    # filters: a domain, then only items some QC check rejected
    _reload_list(browser, "f-domain", "00A")
    assert _clips(browser) == ["a1"]
    _reload_list(browser, "f-domain", "")
    _reload_list(browser, "f-status", "rejected")
    assert "s2" in _clips(browser)
    items = browser.find_elements("css selector", ".item")
    assert items and all("rejected" in e.get_attribute("class") for e in items)
    _reload_list(browser, "f-status", "all")

    # the clip's audio: the media element loads the WAV and reaches canplay
    ready = browser.execute_async_script(
        """const done = arguments[arguments.length - 1];
        const a = document.querySelector("[data-clip='a1'] audio");
        a.addEventListener("canplay", () => done(a.readyState), { once: true });
        a.addEventListener("error", () => done(-1), { once: true });
        a.preload = "auto"; a.load();"""
    )
    assert ready >= 3

    # a review decision by clicking: stored as review import stores it, published when asked
    item = browser.find_element("css selector", "[data-item='a1:ent:neutral']")
    item.find_element("css selector", "button.reject").click()
    _wait(browser, lambda d: "stored: reject" in d.find_element("id", "status").text)
    rows = [(d.item_table, d.item_id, d.decision, d.source, d.item_text) for d in stored_decisions(cat)]
    assert ("entailment", "a1:ent:neutral", "reject", "ui", "The recording was made on a farm.") in rows
    assert cat.latest_version() == "v0002"  # a click stores, it does not publish

    browser.find_element("id", "publish").click()
    _wait(browser, lambda d: "published v0003" in d.find_element("id", "status").text)
    assert cat.latest_version() == "v0003"
    verdict = cat.query("SELECT keep FROM v0003.qc WHERE item_id = 'a1:ent:neutral' AND \"check\" = 'human_review'")
    assert verdict == [(False,)]
    kept = {r[0] for r in cat.query(f"SELECT item_id FROM v0003.entailment WHERE item_id IN {kept_items('v0003')}")}
    assert "a1:ent:entailment" in kept and "a1:ent:neutral" not in kept  # what exports and evaluation use
    _wait(browser, lambda d: "v0003" in d.find_element("id", "title").text)


def test_bad_requests_get_a_message_not_a_crash(served):
    import json
    import urllib.error
    import urllib.request

    _, _, url, token = served

    def post(path, body: bytes):
        headers = {"Content-Type": "application/json", "X-Earmark-Token": token}
        req = urllib.request.Request(url + path, data=body, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    assert post("api/decisions", b"not json")[0] == 400
    code, out = post("api/decisions", json.dumps({"decisions": [{"item_table": "qa", "item_id": "nope"}]}).encode())
    assert code == 400 and "no filled-in decision" in out["error"]
    bad = {"decisions": [{"item_table": "qa", "item_id": "nope", "decision": "reject"}]}
    code, out = post("api/decisions", json.dumps(bad).encode())
    assert code == 400 and "nothing stored" in out["error"] and "nope" in out["error"]
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url + "audio/unknown.wav", timeout=30)
    assert e.value.code == 404
    with pytest.raises(ValueError, match="loopback"):
        make_server(ViewApp(*served[:2]), host="0.0.0.0")


# --- forged requests: another page the reviewer has open, or a DNS-rebinding one (docs in cli/view/server.py)


def _raw(url: str, request: bytes, timeout: float = 30) -> tuple[int, bytes]:
    """Send `request` as bytes to the server at `url`; its status and body. Waits for the server's answer only
    (not for a body the request announced but never sends): a refusal must not wait on the body."""
    import socket
    from urllib.parse import urlparse

    where = urlparse(url)
    with socket.create_connection((where.hostname, where.port), timeout=timeout) as sock:
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data or len(data) < _wanted(data):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def _wanted(data: bytes) -> int:
    head, _, _ = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(head) + 4 + int(value)
    return 1 << 62


def _post(path: str, host: str, body: bytes, **headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", *(f"{k.replace('_', '-')}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _state(cat) -> tuple:
    return cat.latest_version(), len(stored_decisions(cat))


FORGED = b'{"reviewer": "evil", "decisions": [{"item_table": "entailment", "item_id": "a1:ent:entailment", '
FORGED += b'"decision": "rewrite", "new_text": "forged"}]}'


def test_forged_cross_site_writes_are_refused_before_their_body(served):
    import json

    _, cat, url, token = served
    port = url.rstrip("/").rsplit(":", 1)[1]
    me, before = f"127.0.0.1:{port}", _state(cat)
    n = str(len(FORGED))

    # the attack as found: a hostile page's text/plain POST (no preflight), its own Origin and a rebound Host
    for path in ("/api/decisions", "/api/publish"):
        req = _post(
            path,
            f"evil.example:{port}",
            FORGED,
            Origin="http://evil.example",
            Content_Type="text/plain",
            Content_Length=n,
        )
        assert _raw(url, req)[0] == 403
    # each guard alone refuses it, even with everything else right
    right = {
        "Origin": f"http://{me}",
        "Content_Type": "application/json",
        "X_Earmark_Token": token,
        "Content_Length": n,
    }
    refusals = {
        "origin": ({**right, "Origin": "http://evil.example"}, 403),
        "another port of loopback": ({**right, "Origin": "http://127.0.0.1:1"}, 403),
        "fetch site": ({**right, "Sec_Fetch_Site": "cross-site"}, 403),
        "no token": ({k: v for k, v in right.items() if k != "X_Earmark_Token"}, 403),
        "wrong token": ({**right, "X_Earmark_Token": token[:-1] + "x"}, 403),
        "text/plain": ({**right, "Content_Type": "text/plain"}, 415),
        "form": ({**right, "Content_Type": "application/x-www-form-urlencoded"}, 415),
    }
    for why, (headers, status) in refusals.items():
        assert _raw(url, _post("/api/decisions", me, FORGED, **headers))[0] == status, why
    code, body = _raw(url, _post("/api/decisions", f"evil.example:{port}", FORGED, **right))
    assert code == 403 and "not this server" in json.loads(body)["error"]

    # refused before the body is read: a forged request that announces a megabyte and sends none is answered
    huge = {**right, "Origin": "http://evil.example", "Content_Length": str(2**20)}
    assert _raw(url, _post("/api/decisions", me, b"", **huge), timeout=10)[0] == 403
    # lengths: negative (which hung a handler thread), missing, not a number, too large, all answered at once
    for length, status in (("-1", 400), (None, 411), ("ten", 400), (str(2**21), 413)):
        headers = {k: v for k, v in right.items() if k != "Content_Length"}
        if length is not None:
            headers["Content_Length"] = length
        assert _raw(url, _post("/api/decisions", me, b"", **headers), timeout=10)[0] == status, length
    assert _state(cat) == before  # nothing stored, nothing published


def test_a_rebound_host_reads_nothing(served):
    _, _, url, _ = served
    port = url.rstrip("/").rsplit(":", 1)[1]
    for path in ("/", "/api/summary", "/api/clips", "/api/plots", "/audio/a1.wav"):
        for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}", ""):
            req = f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
            code, body = _raw(url, req)
            assert code == 403 and b"RIFF" not in body and b"a1" not in body, (path, host)
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"LocalHost:{port}"):
        assert _raw(url, f"GET /api/summary HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())[0] == 200, host


EVIL_PAGE = """<!doctype html><html><body><form id="f" method="POST" action="{view}api/decisions"
enctype="text/plain"><input name='{{"reviewer": "evil", "x": "' value='"}}'></form><script>
(async () => {{
  const body = JSON.stringify({{reviewer: "evil", decisions: [{{item_table: "entailment",
    item_id: "a1:ent:entailment", decision: "rewrite", new_text: "forged"}}]}});
  const tries = [];
  for (const [path, type] of [["api/decisions", "text/plain"], ["api/publish", "text/plain"],
                              ["api/decisions", "application/json"]]) {{
    tries.push(fetch("{view}" + path, {{method: "POST", mode: "no-cors", headers: {{"Content-Type": type}}, body}})
      .then(() => "sent").catch((e) => "failed: " + e));
  }}
  document.title = (await Promise.all(tries)).join(",");
  document.body.dataset.done = "1";
}})();
</script></body></html>"""


def test_a_hostile_page_in_the_browser_cannot_write_or_read(served, browser):
    """The reviewer has the view open and visits a hostile page (another origin on loopback, named
    evil.example): its no-preflight POSTs and a form post reach the server and are refused; the same name
    pointed at the view's port (DNS rebinding) gets no page."""
    import http.server

    _, cat, url, _ = served
    page = EVIL_PAGE.format(view=url).encode()

    class Evil(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

    evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Evil)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    try:
        before = _state(cat)
        browser.get(f"http://evil.example:{evil.server_address[1]}/")
        _wait(browser, lambda d: d.find_element("tag name", "body").get_attribute("data-done") == "1")
        browser.execute_script("document.getElementById('f').submit()")
        _wait(browser, lambda d: "evil.example" not in d.current_url or d.title == "")
        assert _state(cat) == before
        # rebinding: the hostile name at the view's own port is refused, so the page (and its token) never loads
        port = url.rstrip("/").rsplit(":", 1)[1]
        browser.get(f"http://evil.example:{port}/")
        assert "not this server" in browser.find_element("tag name", "body").text
        browser.get(f"http://evil.example:{port}/api/clips")
        assert "a1" not in browser.find_element("tag name", "body").text
    finally:
        evil.shutdown()
        evil.server_close()


# --- connections: a silent one is closed, and only so many are served at once (one thread each)


def _bare_server(tmp_path, **limits):
    """A view server over an empty dataset (its page needs no version), with the test's limits."""
    cfg = load_config(None, {"data_root": str(tmp_path), "dataset": "bare"})
    server = make_server(ViewApp(cfg, Catalog(cfg.data_root, cfg.dataset)), port=0, **limits)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _page(server) -> int:
    """The status of `GET /`, asked again while it is refused as busy: a closed connection frees its place a
    moment after its client sees it closed."""
    port = server.server_address[1]
    deadline = time.monotonic() + 60
    while True:
        try:
            status, _ = _raw(f"http://127.0.0.1:{port}/", f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        except ConnectionResetError:  # refused before the server read the request
            status = 503
        if status != 503 or time.monotonic() > deadline:
            return status
        time.sleep(0.05)


@pytest.mark.parametrize("half", ["headers", "body"])
def test_a_client_that_sends_half_a_request_is_disconnected_after_the_idle_timeout(tmp_path, half):
    server = _bare_server(tmp_path, idle_timeout_s=0.5)
    port = server.server_address[1]
    if half == "headers":  # the headers never end
        request = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: ".encode()
    else:  # a write the guard lets through, whose body stops a third of the way
        headers = {"Content_Type": "application/json", "X_Earmark_Token": server.guard.token}
        request = _post("/api/decisions", f"127.0.0.1:{port}", b'{"reviewer": "r", ', Content_Length="60", **headers)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(request)
            # closed without an answer; with no timeout the server waited for the rest for ever (here the client
            # gave up after its 30 s: TimeoutError)
            assert sock.recv(65536) == b""
        assert _page(server) == 200  # the server serves on
    finally:
        server.shutdown()
        server.server_close()


def test_connections_beyond_the_bound_get_503_at_once_and_the_server_serves_again_after(tmp_path):
    server = _bare_server(tmp_path, idle_timeout_s=300, max_connections=2)
    where = server.server_address[:2]
    # accepted in the order they connect, so both hold their place before the third is accepted
    idle = [socket.create_connection(where, timeout=30) for _ in range(2)]
    try:
        with socket.create_connection(where, timeout=30) as third:
            assert third.recv(65536).startswith(b"HTTP/1.0 503 ")  # not left waiting behind the silent two
        for sock in idle:
            sock.close()
        assert _page(server) == 200
    finally:
        for sock in idle:
            sock.close()
        server.shutdown()
        server.server_close()


def test_idle_clients_beyond_the_bound_do_not_keep_a_request_out_for_ever(tmp_path):
    server = _bare_server(tmp_path, idle_timeout_s=0.5, max_connections=2)
    idle = [socket.create_connection(server.server_address[:2], timeout=30) for _ in range(3)]  # N + 1, silent
    try:
        for sock in idle:  # each is closed: the first two after the timeout, the third at once or after it
            first = sock.recv(65536)
            assert first == b"" or (first.startswith(b"HTTP/1.0 503 ") and sock.recv(65536) == b"")
        assert _page(server) == 200
    finally:
        for sock in idle:
            sock.close()
        server.shutdown()
        server.server_close()
