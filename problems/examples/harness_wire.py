"""The wire between the example harness's supervisor (eval.py) and its workers (harness_worker.py).

Frames: two lengths, a JSON header, a raw body. Values (tensors, tuples, lists, dicts with string keys, scalars)
travel as a JSON tree plus the tensors' bytes, and are rebuilt from plain tensors: the supervisor never unpickles
what a worker sends, so a hostile worker cannot run code in the supervisor.
"""

from __future__ import annotations

import json
import os
import struct
import threading
import time

HEADER = struct.Struct(">IQ")
MAX_HEADER = 1 << 20


def write_frame(fd: int, header: dict, body: bytes | bytearray = b"") -> None:
    """One frame: the two lengths, a JSON header, a raw body."""
    encoded = json.dumps(header).encode()
    _write_all(fd, memoryview(HEADER.pack(len(encoded), len(body)) + encoded))
    if body:
        _write_all(fd, memoryview(body))


def _write_all(fd: int, view: memoryview) -> None:
    while view:
        view = view[os.write(fd, view):]


def read_frame(fd: int, max_body: int) -> tuple[dict, bytearray]:
    """The next frame; ValueError for a malformed one, EOFError when the other side is gone."""
    header_size, body_size = HEADER.unpack(_read_exactly(fd, HEADER.size))
    if header_size > MAX_HEADER or body_size > max_body:
        raise ValueError(f"frame too large ({header_size}, {body_size})")
    header = json.loads(_read_exactly(fd, header_size))
    if not isinstance(header, dict):
        raise ValueError("frame header is not an object")
    return header, _read_exactly(fd, body_size)


def _read_exactly(fd: int, size: int) -> bytearray:
    data = bytearray(size)
    view, got = memoryview(data), 0
    while got < size:
        count = os.readv(fd, [view[got:]])
        if count == 0:
            raise EOFError("the other side closed the pipe")
        got += count
    return data


def encode_value(torch, value, blobs: list, exact: bool = True):
    """A JSON tree describing `value` (tensors, tuples, lists, dicts with str keys, scalars); tensor bytes are
    appended to `blobs`. With `exact`, tensor subclasses are refused (they could defer their work)."""
    if isinstance(value, torch.Tensor):
        if exact and type(value) is not torch.Tensor:
            raise TypeError(f"expected a torch.Tensor, got {type(value).__name__}")
        host = value.detach().to("cpu").contiguous()
        raw = bytearray(host.numel() * host.element_size())
        if raw:
            torch.frombuffer(raw, dtype=torch.uint8).copy_(host.reshape(-1).view(torch.uint8))
        blobs.append(raw)
        return {"tensor": len(blobs) - 1, "dtype": str(value.dtype).removeprefix("torch."),
                "shape": list(value.shape), "device": str(value.device)}
    if isinstance(value, (tuple, list)):
        return {"tuple" if isinstance(value, tuple) else "list": [encode_value(torch, v, blobs, exact) for v in value]}
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise TypeError("only dicts with string keys can be passed")
        return {"dict": {key: encode_value(torch, v, blobs, exact) for key, v in value.items()}}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"value": value}
    raise TypeError(f"cannot pass a {type(value).__name__} between harness processes")


def pack(torch, value, exact: bool = True) -> tuple[dict, bytearray]:
    blobs: list = []
    tree = encode_value(torch, value, blobs, exact)
    offsets, total = [], 0
    for blob in blobs:
        offsets.append([total, len(blob)])
        total += len(blob)
    body = bytearray(total)
    for (start, size), blob in zip(offsets, blobs):
        body[start:start + size] = blob
    return {"tree": tree, "blobs": offsets}, body


def unpack(torch, header: dict, body: bytearray):
    """The value of a packed frame, built only from plain tensors and containers (never by unpickling)."""
    blobs = header.get("blobs")
    if not isinstance(blobs, list):
        raise ValueError("frame has no blob table")
    return _build(torch, blobs, body, header.get("tree"))


# A module-level function, not a closure inside unpack: a nested function that calls itself is a reference cycle
# holding the frame's body, and the worker runs with the collector off (harness_worker.serve), so each request
# would leak its body; the heap then grows by a request's size per call and the kernel's own allocations land on
# fresh pages, whose faults were timed as the kernel's (the #23 agreement probe: about 3x on vectoradd).
def _build(torch, blobs: list, body: bytearray, node):
    if not isinstance(node, dict) or len(node) not in (1, 4):
        raise ValueError("malformed value tree")
    if "tensor" in node:
        start, size = blobs[int(node["tensor"])]
        dtype = getattr(torch, str(node["dtype"]), None)
        shape = [int(n) for n in node["shape"]]
        if not isinstance(dtype, torch.dtype) or start < 0 or start + size > len(body) or min(shape, default=0) < 0:
            raise ValueError("malformed tensor description")
        flat = torch.empty(0, dtype=dtype) if size == 0 else \
            torch.frombuffer(body, dtype=torch.uint8, count=size, offset=start).clone().view(dtype)
        return flat.reshape(shape).to(torch.device(str(node["device"])))
    (kind, inner), = node.items()
    if kind == "tuple":
        return tuple(_build(torch, blobs, body, item) for item in inner)
    if kind == "list":
        return [_build(torch, blobs, body, item) for item in inner]
    if kind == "dict":
        return {str(key): _build(torch, blobs, body, item) for key, item in inner.items()}
    if kind == "value" and (inner is None or isinstance(inner, (bool, int, float, str))):
        return inner
    raise ValueError(f"unknown value kind {kind!r}")


def widen_pipe(fd: int) -> None:
    """Room for a whole request in the pipe, so a message is not carried over in 64 KiB ping-pong steps."""
    try:
        import fcntl

        fcntl.fcntl(fd, 1031, 1 << 20)  # F_SETPIPE_SZ; capped by /proc/sys/fs/pipe-max-size
    except OSError:
        pass


def honest_trip_ns(torch, frames: list[tuple[dict, bytearray]], max_body: int) -> int:
    """What an echo of `frames` costs an honest worker on this host, measured by the caller itself: each frame
    written into a pipe, read, rebuilt, encoded again and sent back by a thread of this process, as a worker answers a
    `ping`. The supervisor bounds the worker's own pings with it: a worker can slow its pings on purpose to widen the
    cross-check's allowance, this trip it cannot. 0 when the trip fails: the caller's fixed bound then stands alone."""
    (inbound, to_peer), (from_peer, outbound) = os.pipe(), os.pipe()
    for fd in (inbound, to_peer, from_peer, outbound):
        widen_pipe(fd)

    def echo() -> None:
        # the peer closes its own ends whatever happens, so a failure here ends the caller's write or read at once
        # instead of leaving it blocked on a pipe nobody serves
        try:
            for _ in frames:
                header, body = read_frame(inbound, max_body)
                answer, answer_body = pack(torch, unpack(torch, header, body), exact=False)
                write_frame(outbound, answer, answer_body)
        except (OSError, EOFError, ValueError, TypeError, RuntimeError):
            pass
        finally:
            os.close(inbound)
            os.close(outbound)

    peer = threading.Thread(target=echo, daemon=True)
    started = time.perf_counter_ns()
    try:
        peer.start()
        for header, body in frames:
            write_frame(to_peer, header, body)
        for _ in frames:
            read_frame(from_peer, max_body)
        return time.perf_counter_ns() - started
    except (OSError, EOFError, ValueError):
        return 0
    finally:
        os.close(to_peer)
        os.close(from_peer)
        peer.join()
