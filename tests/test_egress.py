"""The egress guard, alone over a table of addresses and inside ``web_fetch`` over real
sockets on loopback addresses (127.0.0.1, 127.0.0.2): refusals by default, the allow-list,
redirects checked hop by hop, no cookies, a bounded redirect chain, TLS verified by name."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import shutil
import socket
import ssl
import subprocess
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from orga.contracts.errors import InvalidConfig, ToolFailed, ToolInputError, ToolPermissionError
from orga.tools._egress import EgressGuard
from orga.tools._web_fetch import web_fetch_tool
from orga.tools.sdk import Tool, ToolContext

CTX = ToolContext(call_id="c", workflow_id="w", idempotency_key="w/c")

REFUSED = {
    "127.0.0.1": "127.0.0.1 is a loopback address",
    "127.1": "127.1 resolves to 127.0.0.1, a loopback address",
    "2130706433": "2130706433 resolves to 127.0.0.1, a loopback address",
    "0x7f000001": "0x7f000001 resolves to 127.0.0.1, a loopback address",
    "0177.0.0.1": "0177.0.0.1 resolves to 127.0.0.1, a loopback address",
    "localhost": "localhost resolves to ",  # 127.0.0.1 or ::1, both loopback
    "[::1]": "::1 is a loopback address",
    "[::ffff:127.0.0.1]": "an IPv4-mapped address of 127.0.0.1, a loopback address",
    "169.254.169.254": "a link-local address (the cloud metadata service)",
    "10.1.2.3": "a private address",
    "172.16.0.1": "a private address",
    "192.168.1.1": "a private address",
    "100.64.0.1": "a shared address (CGNAT",
    "0.0.0.0": "the unspecified address",
    "[::]": ":: is the unspecified address",
    "[fc00::1]": "a unique-local address",
    "[fe80::1]": "a link-local address",
    "224.0.0.1": "a multicast address",
    "240.0.0.1": "a reserved address",
    "255.255.255.255": "a reserved address",
    "198.18.0.1": "not globally routable",
    "[ff02::1]": "a multicast address",
    "[fec0::1]": "a site-local address",
    "[64:ff9b::a9fe:a9fe]": "a NAT64 address of 169.254.169.254, a link-local",
    "[2002:7f00:1::1]": "a 6to4 address of 127.0.0.1, a loopback address",
    "[2001:0:808:808::f5ff:fffe]": "a Teredo address of 10.0.0.1, a private address",
}
PUBLIC = ["8.8.8.8", "[2001:4860:4860::8888]", "[::ffff:8.8.8.8]", "[2002:808:808::1]"]


@pytest.mark.parametrize("host", REFUSED)
async def test_the_guard_refuses_addresses_that_are_not_public(host: str) -> None:
    url = f"http://{host}:8080/x"
    with pytest.raises(ToolPermissionError) as caught:
        await EgressGuard().check(url)
    message = caught.value.message
    assert message.startswith(f"web_fetch refused {url}: ")
    assert REFUSED[host] in message
    assert message.endswith(
        "; the worker's egress rules allow only public addresses "
        "(ORGA_EGRESS_ALLOW opens exceptions)"
    )


async def test_a_refusal_names_the_host_the_address_and_the_rule() -> None:
    with pytest.raises(ToolPermissionError, match="localhost resolves to") as caught:
        await EgressGuard().check("http://localhost:8080/x")
    assert not caught.value.retryable and caught.value.non_retryable
    address = "::1" if "::1" in caught.value.message else "127.0.0.1"
    assert caught.value.message == (
        f"web_fetch refused http://localhost:8080/x: localhost resolves to {address}, a "
        "loopback address; the worker's egress rules allow only public addresses "
        "(ORGA_EGRESS_ALLOW opens exceptions)"
    )


@pytest.mark.parametrize("host", PUBLIC)
async def test_the_guard_lets_public_addresses_through(host: str) -> None:
    destination = await EgressGuard().check(f"https://{host}/a/b?c=1#frag")
    assert destination.addresses == (ipaddress.ip_address(host.strip("[]")),)
    assert (destination.port, destination.target) == (443, "/a/b?c=1")


async def test_the_allow_list_opens_addresses_networks_and_exact_host_names() -> None:
    guard = EgressGuard(["127.0.0.1", " 10.0.0.0/8 ", "", "LocalHost", "intranet.example"])
    for url in (
        "http://127.0.0.1/",
        "http://2130706433/",  # judged by the address, so the odd spelling is allowed too
        "http://10.200.3.4:8080/",
        "http://[::ffff:10.0.0.1]/",  # an IPv4-mapped address is the IPv4 address
        "http://LOCALHOST:1/",
    ):
        await guard.check(url)
    for url, why in (
        ("http://127.0.0.2/", "127.0.0.2 is a loopback address"),
        ("http://192.168.1.1/", "a private address"),
        ("http://[::1]/", "::1 is a loopback address"),
    ):
        with pytest.raises(ToolPermissionError, match=why):
            await guard.check(url)
    with pytest.raises(ToolPermissionError, match=r"127\.0\.0\.1 is a loopback"):
        await EgressGuard(["localhost"]).check("http://127.0.0.1/")  # the name, not its address


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("10.0.0.1/8", "is not a network"),
        ("fe80::/200", "is not a network"),
        ("127.1", "neither a host name nor an IP"),
        ("0x7f000001", "neither a host name nor an IP"),
        ("*.example", "neither a host name nor an IP"),
        ("http://intranet", "is not a network"),
    ],
)
def test_a_bad_allow_entry_is_a_configuration_error(entry: str, why: str) -> None:
    with pytest.raises(InvalidConfig, match=f"ORGA_EGRESS_ALLOW entry .*{why}"):
        EgressGuard([entry])


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("file:///etc/passwd", "not an http:// or https:// URL"),
        ("gopher://8.8.8.8/", "not an http:// or https:// URL"),
        ("http:///x", "names no host"),
        ("http://8.8.8.8:99999/", "host or port is not valid"),
    ],
)
async def test_the_guard_takes_only_http_urls_with_a_host(url: str, why: str) -> None:
    with pytest.raises(ToolInputError, match=why):
        await EgressGuard().check(url)


async def test_a_name_that_does_not_resolve_fails_the_call() -> None:
    with pytest.raises(ToolFailed, match=r"could not resolve the host 'nowhere\.invalid'"):
        await EgressGuard().check("http://nowhere.invalid/")


# ---- web_fetch end to end ------------------------------------------------------------------

Answer = Callable[[str, dict[str, str]], tuple[int, dict[str, str], str]]
"""(path, request headers) → status, response headers, body."""


@dataclass
class Request:
    path: str
    headers: dict[str, str]


@dataclass
class Site:
    """A one-request-per-connection HTTP/1.1 server in the test's event loop."""

    answer: Answer
    base: str = ""
    connections: int = 0
    requests: list[Request] = field(default_factory=list[Request])
    server_names: list[str | None] = field(default_factory=list[str | None])

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            path = head[0].split(" ")[1]
            headers = {
                k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:])
            }
            self.requests.append(Request(path, headers))
            status, extra, body = self.answer(path, headers)
            data = body.encode()
            lines = [f"HTTP/1.1 {status} Answer", f"content-length: {len(data)}"]
            lines += ["connection: close", *(f"{k}: {v}" for k, v in extra.items())]
            writer.write("\r\n".join([*lines, "", ""]).encode() + data)
            await writer.drain()
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()


@contextlib.asynccontextmanager
async def serve(
    answer: Answer, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None, port: int = 0
) -> AsyncIterator[Site]:
    site = Site(answer)
    if tls is not None:
        tls.sni_callback = lambda sock, name, ctx: site.server_names.append(name)
    server = await asyncio.start_server(site.handle, host, port, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    site.base = f"{'https' if tls else 'http'}://{host}:{port}"
    try:
        yield site
    finally:
        server.close()
        await server.wait_closed()


def pages(path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], str]:
    """Pages, redirects and cookies of the local test site."""
    cookie = headers.get("cookie", "no cookie")
    return {
        "/page": (200, {"content-type": "text/html"}, "<p>Hello <b>local</b></p>"),
        "/hop": (302, {"location": "page#top"}, ""),  # relative, with a fragment
        "/loop": (302, {"location": "/loop"}, ""),
        "/ftp": (301, {"location": "ftp://127.0.0.1/file"}, ""),
        "/set": (200, {"set-cookie": "session=s3cret; Path=/"}, "set"),
        "/set-and-go": (302, {"set-cookie": "session=s3cret; Path=/", "location": "/echo"}, ""),
        "/echo": (200, {"content-type": "text/plain"}, cookie),
        "/busy": (503, {}, "later"),
    }.get(path, (404, {}, "no such page"))


def fetcher(allow: list[str], http: httpx.AsyncClient | None = None) -> Tool:
    return web_fetch_tool(http, max_bytes=10_000, timeout=10.0, allow=allow)


async def fetch(tool: Tool, url: str) -> str:
    return await tool.invoke({"url": url, "max_chars": 1000}, CTX)


async def test_a_local_page_is_refused_by_default_and_fetched_when_allowed() -> None:
    async with serve(pages) as site:
        with pytest.raises(ToolPermissionError, match=r"127\.0\.0\.1 is a loopback address"):
            await fetch(fetcher([]), f"{site.base}/page")
        assert site.connections == 0
        assert await fetch(fetcher(["127.0.0.1"]), f"{site.base}/page") == "Hello local"
        assert await fetch(fetcher(["127.0.0.0/8"]), f"{site.base}/hop") == "Hello local"
    assert [r.path for r in site.requests] == ["/page", "/hop", "/page"]
    assert {r.headers["host"] for r in site.requests} == {site.base.removeprefix("http://")}


async def test_an_allowed_name_is_fetched_from_its_checked_address_with_its_own_host() -> None:
    async with serve(pages) as site:
        url = site.base.replace("127.0.0.1", "localhost")
        assert await fetch(fetcher(["localhost"]), f"{url}/page") == "Hello local"
    [request] = site.requests
    assert request.headers["host"] == url.removeprefix("http://")


async def test_a_redirect_to_an_address_that_is_not_allowed_is_refused_before_it_is_sent() -> None:
    async with serve(pages, host="127.0.0.2") as hidden:

        def redirect(path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], str]:
            return 302, {"location": f"{hidden.base}/secret"}, ""

        async with serve(redirect) as site:
            with pytest.raises(ToolPermissionError) as caught:
                await fetch(fetcher(["127.0.0.1"]), f"{site.base}/go")
            assert caught.value.message.startswith(
                f"web_fetch refused {hidden.base}/secret (redirected from {site.base}/go): "
                "127.0.0.2 is a loopback address;"
            )
            # Allowed by name, redirected to the same machine by address: still refused.
            named = site.base.replace("127.0.0.1", "localhost")
            with pytest.raises(ToolPermissionError, match=r"127\.0\.0\.2 is a loopback"):
                await fetch(fetcher(["localhost"]), f"{named}/go")
        assert len(site.requests) == 2
        assert hidden.connections == 0


async def test_a_name_that_rebinds_is_fetched_from_the_address_that_was_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DNS rebinding: the name answers an allowed address when it is checked and a forbidden
    one afterwards. The guard resolves once and connects to what it checked."""
    async with serve(pages, host="127.0.0.2") as allowed:
        port = int(allowed.base.rsplit(":", 1)[1])
        async with serve(pages, host="127.0.0.1", port=port) as hidden:
            lookups: list[str] = []

            async def rebinding(host: str, port: int, **_: object) -> list[tuple[object, ...]]:
                lookups.append(host)
                address = "127.0.0.2" if len(lookups) == 1 else "127.0.0.1"
                return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

            monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", rebinding)
            page = await fetch(fetcher(["127.0.0.2"]), f"http://rebind.example:{port}/page")
    assert page == "Hello local"
    assert lookups == ["rebind.example"]  # resolved once: no second answer to trust
    assert hidden.connections == 0 and len(allowed.requests) == 1
    assert allowed.requests[0].headers["host"] == f"rebind.example:{port}"


async def test_a_redirect_to_another_scheme_is_refused() -> None:
    async with serve(pages) as site:
        with pytest.raises(ToolPermissionError, match="follows redirects only to http"):
            await fetch(fetcher(["127.0.0.1"]), f"{site.base}/ftp")


async def test_no_cookie_travels_between_calls_or_redirects() -> None:
    async with serve(pages) as site:
        tool = fetcher(["127.0.0.1"])
        assert await fetch(tool, f"{site.base}/set") == "set"
        assert await fetch(tool, f"{site.base}/echo") == "no cookie"
        assert await fetch(tool, f"{site.base}/set-and-go") == "no cookie"
    assert not any("cookie" in r.headers for r in site.requests)


async def test_a_redirect_loop_stops_after_five_hops() -> None:
    async with serve(pages) as site:
        with pytest.raises(ToolFailed, match="stopped after 5 redirects") as caught:
            await fetch(fetcher(["127.0.0.1"]), f"{site.base}/loop")
    assert caught.value.non_retryable
    assert len(site.requests) == 6  # the first request and five redirects


async def test_http_errors_keep_their_retry_rules() -> None:
    async with serve(pages) as site:
        tool = fetcher(["127.0.0.1"])
        with pytest.raises(ToolFailed, match="HTTP 503: later") as busy:
            await fetch(tool, f"{site.base}/busy")
        assert not busy.value.non_retryable
        with pytest.raises(ToolFailed, match="HTTP 404") as missing:
            await fetch(tool, f"{site.base}/missing")
        assert missing.value.non_retryable


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for the name ``localhost`` only (not for 127.0.0.1)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("needs the openssl command to make a certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            *(openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"),
            *("-nodes", "-days", "1", "-subj", "/CN=localhost"),
            *("-addext", "subjectAltName=DNS:localhost", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


async def test_https_sends_the_host_name_and_verifies_the_certificate_for_it(
    certificate: tuple[Path, Path],
) -> None:
    cert, key = certificate
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    async with (
        serve(pages, tls=server_tls) as site,
        httpx.AsyncClient(verify=ssl.create_default_context(cafile=cert)) as http,
    ):
        named = site.base.replace("127.0.0.1", "localhost")
        assert await fetch(fetcher(["localhost"], http), f"{named}/page") == "Hello local"
        assert site.server_names == ["localhost"]
        # Reached by address, the certificate (for "localhost" only) does not match.
        with pytest.raises(ToolFailed, match="CERTIFICATE_VERIFY_FAILED"):
            await fetch(fetcher(["127.0.0.1"], http), f"{site.base}/page")
    assert [r.headers["host"] for r in site.requests] == [named.removeprefix("https://")]
