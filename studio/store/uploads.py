"""Reading a multipart upload as it streams in: never the whole file in memory.

python-multipart's push parser is fed the body chunk by chunk. The file part goes straight
to where its store keeps what is still arriving (a `Part`: a temporary file in the store's
folder, or chunk rows in the database) while it is counted and hashed; past the limit the
reading stops before the rest of the body is read. Fields other than the file are short text
(the client key) and are capped too.

A temporary file is locked (flock) from its creation until the upload is done with it: the
sweep, in this process or any other sharing the folder, removes only the ones it can lock.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect, Request

from studio.errors import Refusal
from studio.i18n import gettext as _

MAX_FIELD_BYTES = 1024
HEAD_BYTES = 512  # enough of the file's first bytes to judge its type
MAX_FILENAME = 200
MAX_PARTS = 16
ENVELOPE_BYTES = 64 * 1024  # what a body may hold besides the file: boundaries, the key


class Part(Protocol):
    """Where a store keeps the bytes of a file still arriving, until it is bound or dropped."""

    def write(self, chunk: bytes) -> None:
        """Take the next bytes; called on the event loop, so it must not wait on I/O long."""

    async def flush(self) -> None:
        """Called after each piece of the body: a chance to move what was taken onwards."""

    async def finish(self) -> None:
        """All bytes arrived: make them durable before anything names them."""

    async def discard(self) -> None:
        """Drop whatever is not stored under its hash yet; safe to call twice."""


@dataclass
class Upload:
    """What came in: the text fields, and the file written aside with its digest."""

    fields: dict[str, str] = field(default_factory=dict)
    filename: str = ""
    size: int = 0
    sha256: str = ""
    head: bytes = b""
    part: Part | None = field(default=None, repr=False)

    async def discard(self) -> None:
        if self.part is not None:
            part, self.part = self.part, None
            await part.discard()


class FilePart:
    """A temporary file in the store's `incoming` folder, open, and so locked, until
    discarded: the file may be linked into place again later."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path: Path | None
        self.path, self.handle = claimed_part(folder)

    def write(self, chunk: bytes) -> None:
        # Writing a chunk takes microseconds: a thread hop per chunk would cost more than it
        # saves. Only the fsync, which waits for the disk, goes to a thread.
        self.handle.write(chunk)

    async def flush(self) -> None:
        return None

    async def finish(self) -> None:
        await asyncio.to_thread(self._sync)

    def _sync(self) -> None:
        """On disk before anything names it; kept open, so still locked."""
        self.handle.flush()
        os.fsync(self.handle.fileno())

    async def discard(self) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)
            self.path = None
        self.handle.close()


def claimed_part(folder: Path) -> tuple[Path, IO[bytes]]:
    """A new temporary file, locked by this upload. A sweep that got in between its creation
    and the lock has unlinked it: then another name is taken."""
    while True:
        path = folder / f"{uuid.uuid4().hex}.part"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        if os.fstat(fd).st_nlink:
            return path, os.fdopen(fd, "wb")
        os.close(fd)


def remove_if_abandoned(path: Path) -> bool:
    """Remove a temporary file no upload holds any more; one still locked is being written
    (or waits to be linked) and is left alone."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        path.unlink(missing_ok=True)
        return True
    finally:
        os.close(fd)


def clean_filename(raw: str) -> str:
    """The name a person gave the file, without folders or control characters."""
    name = raw.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if ch.isprintable()).strip()
    return name[:MAX_FILENAME] or "attachment"


class _Reader:
    """The parser's callbacks: one part at a time, the file part to its store."""

    def __init__(self, begin: Callable[[], Part], limit: int) -> None:
        self.begin, self.limit = begin, limit
        self.upload = Upload()
        self._header_field = b""
        self._header_value = b""
        self._disposition = b""
        self._name = ""
        self._value = b""
        self._digest = hashlib.sha256()
        self.too_large = False
        self.parts = 0
        self.ended = False

    def on_end(self) -> None:
        """The closing boundary arrived: the body is whole."""
        self.ended = True

    def on_part_begin(self) -> None:
        self.parts += 1
        if self.parts > MAX_PARTS:
            raise Refusal("invalid_body", _("Send at most %(most)s fields with the file.")
                          % {"most": MAX_PARTS})
        self._disposition, self._name, self._value = b"", "", b""

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._header_field += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def on_header_end(self) -> None:
        if self._header_field.lower() == b"content-disposition":
            self._disposition = self._header_value
        self._header_field, self._header_value = b"", b""

    def on_headers_finished(self) -> None:
        options = parse_options_header(self._disposition)[1]
        self._name = options.get(b"name", b"").decode("utf-8", "replace")
        if self._name == "file" and self.upload.part is not None:
            raise Refusal("invalid_body", _("Send one file at a time."))
        if b"filename" in options and self._name == "file":
            self.upload.filename = clean_filename(options[b"filename"].decode("utf-8",
                                                                              "replace"))
            self.upload.part = self.begin()

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        chunk = data[start:end]
        if self.upload.part is not None and self._name == "file":
            self.upload.size += len(chunk)
            if self.upload.size > self.limit:
                self.too_large = True
                return
            if len(self.upload.head) < HEAD_BYTES:
                self.upload.head += chunk[:HEAD_BYTES - len(self.upload.head)]
            self._digest.update(chunk)
            self.upload.part.write(chunk)
        elif len(self._value) + len(chunk) <= MAX_FIELD_BYTES:
            self._value += chunk
        else:
            raise Refusal("invalid_body", _("The field %(name)s is too long.")
                          % {"name": repr(self._name)})

    def on_part_end(self) -> None:
        if self._name and self._name != "file":
            self.upload.fields[self._name] = self._value.decode("utf-8", "replace")

    async def finish(self) -> None:
        """Durable before anything names it."""
        if self.upload.part is not None:
            await self.upload.part.finish()
            self.upload.sha256 = self._digest.hexdigest()


def _parse(step: Callable[..., object], *chunk: bytes) -> None:
    """One step of the parser; its own errors, whatever their class, are a malformed body.
    A file write that fails (a full disk) is not."""
    try:
        step(*chunk)
    except (Refusal, OSError):
        raise
    except Exception:
        raise Refusal("invalid_body", _("The multipart body could not be read.")) from None


async def read_upload(request: Request, begin: Callable[[], Part], limit: int,
                      before_file: Callable[[dict[str, str]], Awaitable[None]] | None = None
                      ) -> Upload:
    """The multipart body, its file part in a `Part` from `begin`; 413 past `limit` bytes of
    file, counted as they arrive (a declared length over the limit is refused before reading
    at all).
    `before_file` sees the fields sent before the file as soon as the file begins, and may
    refuse it before the rest is read."""
    content_type, options = parse_options_header(request.headers.get("content-type", ""))
    boundary = options.get(b"boundary")
    if content_type != b"multipart/form-data" or not boundary:
        raise Refusal("invalid_body", _("Send the file as multipart/form-data, with a client_key"
                                        " field and a file field."))
    if len(boundary) > 200:
        raise Refusal("invalid_body", _("The multipart boundary is too long."))
    declared = request.headers.get("content-length", "")
    too_large = Refusal("upload_too_large", _(
        "That file is larger than %(size)s MiB, the most one attachment may be.")
        % {"size": f"{limit / 2**20:g}"})
    if declared.isascii() and declared.isdigit() and int(declared) > limit + ENVELOPE_BYTES:
        raise too_large
    reader = _Reader(begin, limit)
    parser = MultipartParser(boundary, {  # type: ignore[arg-type]
        name: getattr(reader, name) for name in (
            "on_part_begin", "on_part_data", "on_part_end", "on_header_field",
            "on_header_value", "on_header_end", "on_headers_finished", "on_end")})
    received = 0
    try:
        async for chunk in request.stream():
            received += len(chunk)
            if received > limit + ENVELOPE_BYTES:
                raise too_large
            _parse(parser.write, chunk)
            if reader.too_large:
                raise too_large
            if reader.upload.part is not None:
                if before_file is not None:
                    await before_file(dict(reader.upload.fields))
                    before_file = None
                await reader.upload.part.flush()
        _parse(parser.finalize)
        if not reader.ended:  # the parser does not check this itself
            raise Refusal("invalid_body", _("The upload was cut off before its end; send the"
                                            " file again."))
        await reader.finish()
    except ClientDisconnect:
        await reader.upload.discard()
        raise Refusal("invalid_body", _("The upload was cut off before its end; send the"
                                        " file again.")) from None
    except BaseException:  # refused, a full disk (507), a cancelled request: no file stays
        await asyncio.shield(reader.upload.discard())
        raise
    if reader.upload.part is None or not reader.upload.sha256:
        await reader.upload.discard()
        raise Refusal("invalid_body", _("Choose a file to attach (a field named file)."))
    return reader.upload

