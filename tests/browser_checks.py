"""A Lighthouse-style check of a page in chromium: no console error, no uncaught exception, no failed request (a
request the browser gave up on, or an answer of 400 or more), and no accessibility violation of axe-core's "serious"
or "critical" impact.

axe-core is the copy frontend/build.mjs puts in static/vendor/axe; no template includes it, so it is injected here,
by the test, into the page under test (and the check makes sure the page did not already have it).

    findings = watch(page)         # before the page is opened: listens to the console and the network
    page.goto(url)
    ...                            # wait until the page has drawn what it shows
    assert not (problems := check(page, findings)), "\\n".join(problems)
"""

from __future__ import annotations

from pathlib import Path

AXE = Path(__file__).resolve().parent.parent / "static" / "vendor" / "axe" / "axe.min.js"
IMPACTS = ("serious", "critical")


def watch(page) -> list[str]:
    """Collect, from now on, what the page logs as an error and the requests that fail. The list fills as it goes."""
    findings: list[str] = []

    def console(message):
        if message.type == "error":
            where = message.location or {}
            findings.append(f"console error: {message.text} ({where.get('url', '')}:{where.get('lineNumber', '')})")

    # A page left for another (a link, a form) has its open requests cancelled by the browser (net::ERR_ABORTED: its
    # live stream, a fetch under way): that is leaving, not a failure. Only those are let through: requests of a
    # document the page has navigated away from, failing as aborted.
    document = {"n": 0}
    born: dict = {}

    def request(req):
        if req.is_navigation_request() and req.frame == page.main_frame:
            document["n"] += 1
        born[req] = document["n"]

    def failed(request):
        if request.failure == "net::ERR_ABORTED" and born.get(request, document["n"]) < document["n"]:
            return
        findings.append(f"request failed: {request.method} {request.url}: {request.failure}")

    def response(resp):
        if resp.status >= 400:
            findings.append(f"HTTP {resp.status}: {resp.request.method} {resp.url}")

    page.on("console", console)
    page.on("pageerror", lambda error: findings.append(f"uncaught exception: {error.name}: {error.message}"))
    page.on("request", request)
    page.on("requestfailed", failed)
    page.on("response", response)
    return findings


def axe_violations(page, impacts=IMPACTS) -> list[str]:
    """axe-core's violations of the given impacts on the page as it is now, one line per element: rule, impact, the
    element (its CSS path), what to fix and the rule's help page."""
    assert page.evaluate("typeof window.axe") == "undefined", "a page loaded axe-core itself: only tests inject it"
    page.add_script_tag(path=str(AXE))
    result = page.evaluate("axe.run(document, { resultTypes: ['violations'] })")
    lines = []
    for v in result["violations"]:
        if v["impact"] not in impacts:
            continue
        for node in v["nodes"]:
            lines.append(
                f"axe {v['id']} ({v['impact']}): {v['help']} at {' '.join(map(str, node['target']))}: "
                f"{node.get('failureSummary', '').replace(chr(10), ' ')} [{v['helpUrl']}]"
            )
    return lines


def check(page, findings: list[str]) -> list[str]:
    """Everything wrong with the page: what ``watch`` collected so far, then axe-core's findings."""
    return [*findings, *axe_violations(page)]
