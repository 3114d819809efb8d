"""A receipt's bytes -> its text.

Images (PNG, JPEG, WebP, and HEIC when pillow-heif is installed) go through Debian's
Tesseract on its command line (`--psm 6`: one block of text, as a till roll is; German, French
and English data; one thread, so a pool of processes bounds the CPU it takes). A phone photo is
first turned upright, grey and straightened (a receipt photographed a degree or two off would
otherwise run one row into the next across a wide invoice). A PDF's text layer is read as it is,
exactly and in milliseconds; only a PDF without one is drawn as images for the OCR.

Nothing here is fetched or written anywhere: bytes in, text out.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess

from PIL import Image, ImageOps

LANGUAGES = "fra+deu+eng"
# Pages of a PDF read at most; a receipt is one or two.
MAX_PAGES = 4
# Larger images are scaled down before OCR: more pixels cost time and read no better.
MAX_SIDE = 2600
MIN_WIDTH = 600
# A phone's photo is 12 to 50 megapixels; more is no receipt (and would take the memory of many).
MAX_PIXELS = 60_000_000

try:  # HEIC photos from phones, when the wheel is installed.
    from pillow_heif import register_heif_opener
except ImportError:  # pragma: no cover - optional
    HEIC = False
else:
    register_heif_opener()
    HEIC = True


class UnreadableReceipt(Exception):
    """The bytes are no image or PDF the reader knows, or the OCR failed or took too long."""


def tesseract() -> str | None:
    """Where the tesseract program is, or None."""
    return shutil.which("tesseract")


def kind_of(data: bytes, content_type: str) -> str:
    """'pdf' or 'image', from the bytes themselves first and the declared type second."""
    if data[:5] == b"%PDF-":
        return "pdf"
    if data[:8] == b"\x89PNG\r\n\x1a\n" or data[:3] == b"\xff\xd8\xff" or \
            (data[:4] == b"RIFF" and data[8:12] == b"WEBP") or data[4:8] == b"ftyp":
        return "image"
    content_type = content_type.split(";")[0].strip().lower()
    if content_type == "application/pdf":
        return "pdf"
    if content_type.startswith("image/"):
        return "image"
    raise UnreadableReceipt(f"not a receipt this reader knows: {content_type or 'no type'}")


def receipt_text(data: bytes, content_type: str, timeout: float = 30.0) -> str:
    """The text of a receipt: a PDF's text layer when it has one, OCR otherwise."""
    if kind_of(data, content_type) == "pdf":
        text = pdf_text(data)
        if text is not None:
            return text
        return "\n".join(image_text(page, timeout) for page in pdf_images(data))
    return image_text(open_image(data), timeout)


def open_image(data: bytes) -> Image.Image:
    try:
        image = Image.open(io.BytesIO(data))
    except Exception as error:  # Pillow raises many kinds for bytes it cannot read
        raise UnreadableReceipt(f"not an image Pillow can open: {error}") from error
    if image.width * image.height > MAX_PIXELS:
        raise UnreadableReceipt(f"an image of {image.width} x {image.height} pixels is larger "
                                "than any receipt")
    try:
        image.load()
    except Exception as error:
        raise UnreadableReceipt(f"not an image Pillow can open: {error}") from error
    return image


def pdf_text(data: bytes) -> str | None:
    """The text layer of a PDF, its rows in reading order; None when it has none worth
    reading (a scan saved as PDF)."""
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [page.extract_text(extraction_mode="layout") or ""
                 for page in reader.pages[:MAX_PAGES]]
    except Exception as error:  # pypdf raises many kinds on a broken file
        raise UnreadableReceipt(f"not a PDF pypdf can read: {error}") from error
    text = "\n".join(pages)
    if sum(c.isalnum() for c in text) < 20:
        return None
    return text


def pdf_images(data: bytes, dpi: int = 300) -> list[Image.Image]:
    """The pages of a PDF without text, drawn as images for the OCR."""
    try:
        import pypdfium2
    except ImportError as error:
        raise UnreadableReceipt("a PDF without text needs pypdfium2 to be read") from error
    try:
        document = pypdfium2.PdfDocument(data)
    except Exception as error:
        raise UnreadableReceipt(f"not a PDF pdfium can draw: {error}") from error
    try:
        return [document[n].render(scale=dpi / 72).to_pil() for n in
                range(min(len(document), MAX_PAGES))]
    finally:
        document.close()


def prepare(image: Image.Image) -> Image.Image:
    """Upright (EXIF), grey, contrast stretched, a sensible size, straightened."""
    image = ImageOps.exif_transpose(image) or image
    if image.mode in ("RGBA", "LA", "P"):
        image = image.convert("RGBA")
        white = Image.new("RGBA", image.size, (255, 255, 255, 255))
        image = Image.alpha_composite(white, image)
    image = image.convert("L")
    scale = min(1.0, MAX_SIDE / max(image.size))
    if image.width < MIN_WIDTH:
        scale = MIN_WIDTH / image.width
    if scale != 1.0:
        image = image.resize((round(image.width * scale), round(image.height * scale)),
                             Image.LANCZOS)
    image = ImageOps.autocontrast(image, cutoff=1)
    angle = skew(image)
    if angle:
        image = image.rotate(angle, resample=Image.BICUBIC, expand=True, fillcolor=255)
    return image


def skew(image: Image.Image) -> float:
    """The angle that makes the rows of text level, within four degrees: the one whose rows,
    seen side on, are darkest and lightest most sharply (a projection profile)."""
    small = image.copy()
    small.thumbnail((500, 500))
    ink = small.point(lambda v: 255 if v < 128 else 0)

    def sharpness(angle: float) -> float:
        turned = ink.rotate(angle, resample=Image.BILINEAR, expand=False, fillcolor=0)
        rows = turned.resize((1, turned.height), Image.BOX).tobytes()
        return sum((rows[i + 1] - rows[i]) ** 2 for i in range(len(rows) - 1))

    scores = {a / 4: sharpness(a / 4) for a in range(-16, 17, 2)}
    best = max(scores, key=lambda a: scores[a])
    for a in (best - 0.25, best + 0.25):
        scores[a] = sharpness(a)
    best = max(scores, key=lambda a: scores[a])
    return 0.0 if abs(best) < 0.3 else best


def image_text(image: Image.Image, timeout: float = 30.0) -> str:
    """Tesseract's reading of one image, fed through a pipe."""
    program = tesseract()
    if program is None:
        raise UnreadableReceipt("the tesseract program is not installed")
    buffer = io.BytesIO()
    prepare(image).save(buffer, format="PNG")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OMP_THREAD_LIMIT": "1",
           "LC_ALL": "C.UTF-8"}
    if "TESSDATA_PREFIX" in os.environ:
        env["TESSDATA_PREFIX"] = os.environ["TESSDATA_PREFIX"]
    try:
        done = subprocess.run(
            [program, "stdin", "stdout", "--psm", "6", "-l", LANGUAGES],
            input=buffer.getvalue(), capture_output=True, timeout=timeout, env=env,
            check=False)
    except subprocess.TimeoutExpired as error:
        raise UnreadableReceipt(f"the OCR took longer than {timeout:g} s") from error
    if done.returncode != 0:
        raise UnreadableReceipt("the OCR failed: " +
                                done.stderr.decode("utf-8", "replace").strip()[-300:])
    return done.stdout.decode("utf-8", "replace")
