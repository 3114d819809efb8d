"""The 64 px picture of an attached photo is a thumbnail made from it, not the whole photo."""

from __future__ import annotations

import hashlib
import io
import struct
import zlib

import pytest
from PIL import Image

from tests.conftest import scalar
from tests.test_attachments import draft_id, send

pytestmark = pytest.mark.anyio


def photo(width: int = 1600, height: int = 1200, orientation: int | None = None) -> bytes:
    """A phone-sized JPEG whose grain keeps it large, as a real photo is."""
    grain = Image.effect_noise((width, height), 60)
    image = Image.merge("RGB", (grain, grain.rotate(90, expand=False), grain))
    out = io.BytesIO()
    exif = Image.Exif()
    if orientation is not None:
        exif[0x0112] = orientation  # the camera was held on its side
    image.save(out, "JPEG", quality=90, exif=exif)
    return out.getvalue()


def png_claiming(width: int, height: int) -> bytes:
    """A small PNG whose header claims a picture far larger than any receipt."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""))


async def test_a_photos_thumbnail_is_small_and_the_photo_is_kept_whole(studio) -> None:
    client = await studio.signed_in()
    original = photo()
    made = (await send(client, await draft_id(client), "key-photo", original, "photo.jpg",
                       "image/jpeg")).json()
    preview = await client.get(f"/attachments/{made['attachment_id']}/preview")
    assert preview.status_code == 200
    assert preview.headers["content-type"] == "image/webp"
    assert preview.headers["content-security-policy"] == "default-src 'none'; sandbox"
    assert len(preview.content) < len(original) / 50, (len(preview.content), len(original))
    with Image.open(io.BytesIO(preview.content)) as small:
        assert max(small.size) <= 128 and small.size == (128, 96)
    # The thumbnail is the browser's to keep, and asked again with its tag it is not sent.
    assert "max-age" in preview.headers["cache-control"]
    again = await client.get(f"/attachments/{made['attachment_id']}/preview",
                             headers={"If-None-Match": preview.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    # What is stored and downloaded is still the photo as it was sent.
    assert scalar(studio.settings.db_path, "SELECT sha256 FROM attachments WHERE id = ?",
                  made["attachment_id"]) == hashlib.sha256(original).hexdigest()
    assert (await client.get(f"/attachments/{made['attachment_id']}")).content == original


async def test_a_photo_taken_on_its_side_is_turned_upright(studio) -> None:
    client = await studio.signed_in()
    made = (await send(client, await draft_id(client), "key-side", photo(300, 200, 6),
                       "side.jpg", "image/jpeg")).json()
    preview = await client.get(f"/attachments/{made['attachment_id']}/preview")
    with Image.open(io.BytesIO(preview.content)) as small:
        assert small.size == (85, 128)


@pytest.mark.parametrize("content, name", [
    (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01" + b"\0" * 100, "damaged.jpg"),
    (png_claiming(30_000, 30_000), "huge.png"),
], ids=["damaged", "too-large"])
async def test_a_photo_that_cannot_be_drawn_shows_an_icon_never_an_error(
        studio, content: bytes, name: str) -> None:
    client = await studio.signed_in()
    made = await send(client, await draft_id(client), f"key-{name}", content, name,
                      "application/octet-stream")
    assert made.status_code == 201, made.text
    preview = await client.get(f"/attachments/{made.json()['attachment_id']}/preview")
    assert preview.status_code == 200
    assert preview.headers["content-type"] == "image/svg+xml"
    assert preview.content.startswith(b"<svg") and len(preview.content) < 1024
    assert scalar(studio.settings.db_path, "SELECT COUNT(*) FROM attachments WHERE id = ?",
                  made.json()["attachment_id"]) == 1
