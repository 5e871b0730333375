"""A fault-injecting TCP proxy for the no-root fault tier: put it between a Redis client (a
worker, the waiting client) and the Redis server and break the link the way a network does.

:class:`FaultProxy` listens on a loopback port of its own and forwards every connection to the
upstream server, in a daemon thread running an asyncio loop. The test thread switches it:

* :meth:`~FaultProxy.blackhole` - a silent partition (a pulled cable, a firewall that drops, a
  dead NAT entry): nothing is forwarded either way and no socket is closed, so neither end
  hears anything. Bytes sent on an open connection meanwhile are kept and delivered after
  :meth:`~FaultProxy.heal` when TCP would deliver them: at the sender's next retransmission,
  whose timeout has doubled at every try since the data was first sent (``rto_model``; after
  a 150 s blackhole that is about 54 s after the heal). A connection
  opened meanwhile is accepted and held (in a real blackhole the SYN goes unanswered; here the
  connect succeeds and the first command gets no reply, which the client's socket timeout
  treats the same way) and reset at the heal: a real connect attempt would have timed out,
  so the client has to try again rather than be let through by the heal.
* :meth:`~FaultProxy.refuse` - nothing listens: new connections are refused (RST), open ones
  are left alone (a server process gone, a port closed).
* :meth:`~FaultProxy.reset` - every open connection is torn down with RST at both ends.
* :meth:`~FaultProxy.cut_mid_reply` - the next reply from the server is cut in the middle:
  half of it is forwarded, then both ends get RST.
* ``latency_s`` - every chunk forwarded waits this long first.
* :meth:`~FaultProxy.heal` - back to forwarding.

Only loopback is used; the proxy is stopped by the test (fixture) that started it.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from urllib.parse import urlsplit, urlunsplit


def _rst(writer: asyncio.StreamWriter) -> None:
    """Close ``writer``'s socket with RST (SO_LINGER 0) rather than FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()


class _Link:
    """One proxied connection: the client side and the upstream side."""

    def __init__(self, client: asyncio.StreamWriter) -> None:
        self.client = client
        self.upstream: asyncio.StreamWriter | None = None
        self.tasks: list[asyncio.Task] = []

    def abort(self) -> None:
        for w in (self.client, self.upstream):
            if w is not None:
                _rst(w)
        for t in self.tasks:
            t.cancel()


class FaultProxy:
    """A TCP proxy ``127.0.0.1:port`` -> ``upstream_host:upstream_port`` with switchable faults.

    Parameters
    ----------
    upstream_port : int
        The server's port.
    upstream_host : str
        The server's address (loopback).
    """

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port: int | None = None
        self.latency_s = 0.0
        self.links: set[_Link] = set()
        self.accepted = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="fault-proxy", daemon=True
        )
        self._server: asyncio.base_events.Server | None = None
        self._flowing: asyncio.Event | None = None
        self._cut_next = False
        self._closing = False
        self.rto_model = True

    # -- life cycle -----------------------------------------------------------------------
    def start(self) -> FaultProxy:
        """Start listening (on a free port the first time, the same port afterwards)."""
        if not self._thread.is_alive():
            self._thread.start()
        self._call(self._listen())
        return self

    def stop(self) -> None:
        """Close every connection and the listener, and end the loop's thread."""
        if not self._thread.is_alive():
            return
        self._call(self._close_all())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def url_for(self, redis_url: str) -> str:
        """``redis_url`` with its host and port replaced by this proxy's."""
        parts = urlsplit(redis_url)
        auth = parts.netloc.rpartition("@")[0]
        netloc = f"{auth}@127.0.0.1:{self.port}" if auth else f"127.0.0.1:{self.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- faults ---------------------------------------------------------------------------
    def blackhole(self) -> None:
        """Forward nothing, close nothing (a silent partition) until :meth:`heal`."""
        self._loop.call_soon_threadsafe(self._get_flowing().clear)

    def heal(self) -> None:
        """Forward again (and listen again after :meth:`refuse`); held bytes are delivered."""
        self._call(self._heal())

    def refuse(self) -> None:
        """Stop listening: new connections are refused; open ones are left alone."""
        self._call(self._stop_listening())

    def reset(self) -> None:
        """Tear down every open connection with RST at both ends."""
        self._call(self._reset_links())

    def cut_mid_reply(self) -> None:
        """Cut the next reply from the server in the middle (half forwarded, then RST)."""
        self._loop.call_soon_threadsafe(setattr, self, "_cut_next", True)

    @property
    def blackholed(self) -> bool:
        return self._flowing is not None and not self._flowing.is_set()

    # -- the loop's side ------------------------------------------------------------------
    def _call(self, coro) -> object:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)

    def _get_flowing(self) -> asyncio.Event:
        if self._flowing is None:
            self._flowing = asyncio.Event()
            self._flowing.set()
        return self._flowing

    async def _listen(self) -> None:
        self._get_flowing()
        if self._server is not None:
            return
        self._server = await asyncio.start_server(
            self._accept, "127.0.0.1", self.port or 0, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop_listening(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _heal(self) -> None:
        await self._listen()
        self._get_flowing().set()

    async def _reset_links(self) -> None:
        for link in list(self.links):
            link.abort()
        self.links.clear()

    async def _close_all(self) -> None:
        await self._stop_listening()
        await self._reset_links()
        self._closing = True
        self._get_flowing().set()  # held connections see the close and end
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        await asyncio.wait(rest, timeout=2) if rest else None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        link = _Link(writer)
        self.links.add(link)
        try:
            if not self._get_flowing().is_set():
                await self._get_flowing().wait()  # opened in a blackhole: held, then reset
                raise OSError("opened during a blackhole")
            if self._closing:
                raise OSError("proxy stopped")
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except (OSError, asyncio.CancelledError):
            _rst(writer)
            self.links.discard(link)
            return
        link.upstream = up_writer
        link.tasks = [
            asyncio.create_task(self._pump(reader, up_writer, link, from_server=False)),
            asyncio.create_task(self._pump(up_reader, writer, link, from_server=True)),
        ]
        try:
            await asyncio.gather(*link.tasks, return_exceptions=True)
        except asyncio.CancelledError:
            pass
        self.links.discard(link)

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        link: _Link,
        from_server: bool,
    ) -> None:
        flowing = self._get_flowing()
        try:
            while True:
                data = await reader.read(65536)
                if not flowing.is_set():  # sent into the blackhole: held, like unacked data
                    await self._hold(reader, writer, data)
                    if not data:
                        break
                    continue
                if not data:
                    break
                if self.latency_s:
                    await asyncio.sleep(self.latency_s)
                if from_server and self._cut_next and len(data) > 1:
                    self._cut_next = False
                    writer.write(data[: len(data) // 2])
                    await writer.drain()
                    link.abort()
                    return
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.CancelledError):
            link.abort()
            return
        # One side closed cleanly: pass the close on.
        try:
            writer.close()
        except OSError:
            pass

    async def _hold(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, first: bytes
    ) -> None:
        """Keep what is sent during a blackhole (``first``, then whatever follows) until the
        heal, then deliver it when TCP would: at the sender's next retransmission
        (:func:`retransmit_delay_s`, if ``rto_model``)."""
        held, since, eof = [first], time.monotonic(), not first
        waiting = asyncio.ensure_future(self._get_flowing().wait())
        while not eof and not waiting.done():
            more = asyncio.ensure_future(reader.read(65536))
            await asyncio.wait({waiting, more}, return_when=asyncio.FIRST_COMPLETED)
            if more.done():
                chunk = more.result()
                held.append(chunk)
                eof = not chunk
            else:
                more.cancel()
        await waiting
        if self.rto_model:
            await asyncio.sleep(retransmit_delay_s(time.monotonic() - since))
        data = b"".join(held)
        if data:
            writer.write(data)
            await writer.drain()


def retransmit_delay_s(stalled_s: float, rto_s: float = 0.2, max_rto_s: float = 120.0) -> float:
    """How long after a path comes back a TCP sender whose data has gone unacknowledged for
    ``stalled_s`` seconds sends it again: retransmissions come after ``rto_s``, then each
    timeout doubles, up to ``max_rto_s`` (RFC 6298 sections 5.5 and 2.5; Linux's minimum RTO is
    200 ms, its maximum 120 s). After a 20 s outage the next try is 5 s later; after 150 s,
    about 54 s later - the wait a connection that survives a long blackhole pays."""
    t, rto = rto_s, rto_s
    while t <= stalled_s:
        rto = min(2 * rto, max_rto_s)
        t += rto
    return t - stalled_s


__all__ = ["FaultProxy", "retransmit_delay_s"]
