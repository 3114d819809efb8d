"""A TCP relay that holds every chunk back a few milliseconds in each direction: the link's
delay where the kernel has no `netem` queueing discipline to give it.

    python delay.py LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT DELAY_MS

A connection the target refuses (the database stopped) is closed at once; when either side
closes, the other is closed once what was already sent has been delivered.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys


async def carry(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                delay: float) -> None:
    """Forward what `reader` gives to `writer`, each chunk `delay` seconds after it came,
    in order."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def deliver() -> None:
        while True:
            due, data = await queue.get()
            if not data:
                return
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()

    sender = asyncio.create_task(deliver())
    with contextlib.suppress(ConnectionError, OSError):  # a side that went away ends the relay
        while data := await reader.read(65536):
            queue.put_nowait((loop.time() + delay, data))
    queue.put_nowait((0.0, b""))
    with contextlib.suppress(ConnectionError, OSError):
        await sender
    writer.close()


async def relay(target: tuple[str, int], delay: float, client_reader: asyncio.StreamReader,
                client_writer: asyncio.StreamWriter) -> None:
    try:
        server_reader, server_writer = await asyncio.open_connection(*target)
    except OSError:
        client_writer.close()
        return
    await asyncio.gather(carry(client_reader, server_writer, delay),
                         carry(server_reader, client_writer, delay))


async def main(listen_host: str, listen_port: int, target_host: str, target_port: int,
               delay_ms: float) -> None:
    delay = delay_ms / 1000

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            await relay((target_host, target_port), delay, reader, writer)

    server = await asyncio.start_server(accepted, listen_host, listen_port)
    print(f"relaying {listen_host}:{listen_port} to {target_host}:{target_port}"
          f" {delay_ms} ms late", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    host, port, to_host, to_port, delay_ms = sys.argv[1:6]
    asyncio.run(main(host, int(port), to_host, int(to_port), float(delay_ms)))
