"""A loopback OpenAI-compatible endpoint that streams N tiny chunks as fast as it can.

Runs in its own process so that its CPU never counts against the client being measured.
Usage: python bench/_chunk_server.py CHUNKS  (prints the port, then serves until killed)
"""

from __future__ import annotations

import asyncio
import json
import sys


def body(chunks: int) -> bytes:
    base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    parts = []
    for _ in range(chunks):
        chunk = {**base, "choices": [{"index": 0, "delta": {"content": "x"},
                                      "finish_reason": None}]}
        parts.append(f"data: {json.dumps(chunk)}\n\n")
    done = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    usage = {**base, "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": chunks,
                                              "total_tokens": chunks + 1}}
    parts += [f"data: {json.dumps(done)}\n\n", f"data: {json.dumps(usage)}\n\n",
              "data: [DONE]\n\n"]
    return "".join(parts).encode()


async def main(chunks: int) -> None:
    payload = body(chunks)
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"content-length: " + str(len(payload)).encode() + b"\r\n\r\n")

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                header = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in header.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                writer.write(head + payload)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
