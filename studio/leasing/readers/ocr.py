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
import math
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
# Any image the reader makes itself (a PDF page drawn, an enlargement, a straightened copy) is
# at most this many pixels, whatever the file says: a reading's memory is bounded and known.
MOST_MADE_PIXELS = 16_000_000

try:  # HEIC photos from phones, when the wheel is installed.
    from pillow_heif import register_heif_opener
except ImportError:  # pragma: no cover - optional
    HEIC = False
else:
    register_heif_opener()
    HEIC = True


class UnreadableReceipt(Exception):
    """The bytes are no image or PDF the reader knows, or the OCR failed or took too long.
    Its message says why in words a person can read ("the PDF is locked with a password")."""


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
    raise UnreadableReceipt(f"a {content_type or 'file of no type'} is no photo or PDF of a"
                            " receipt")


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
        raise UnreadableReceipt("the image is damaged or of a kind that cannot be opened"
                                ) from error
    if image.width * image.height > MAX_PIXELS:
        raise UnreadableReceipt(f"an image of {image.width} x {image.height} pixels is larger "
                                "than any receipt")
    try:
        image.load()
    except Exception as error:
        raise UnreadableReceipt("the image is damaged or of a kind that cannot be opened"
                                ) from error
    return image


def pdf_text(data: bytes) -> str | None:
    """The text layer of a PDF, its rows in reading order; None when it has none worth
    reading (a scan saved as PDF)."""
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError

    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [page.extract_text(extraction_mode="layout") or ""
                 for page in reader.pages[:MAX_PAGES]]
    except FileNotDecryptedError as error:
        raise UnreadableReceipt("the PDF is locked with a password") from error
    except Exception as error:  # pypdf raises many kinds on a broken file
        raise UnreadableReceipt("the PDF is damaged") from error
    text = "\n".join(pages)
    if sum(c.isalnum() for c in text) < 20:
        return None
    return text


def pdf_images(data: bytes, dpi: int = 300) -> list[Image.Image]:
    """The pages of a PDF without text, drawn as images for the OCR: at `dpi`, or fewer dots
    where a page that large would pass MOST_MADE_PIXELS."""
    try:
        import pypdfium2
    except ImportError as error:
        raise UnreadableReceipt("a PDF without text needs pypdfium2 to be read") from error
    try:
        document = pypdfium2.PdfDocument(data)
    except Exception as error:
        raise UnreadableReceipt("the PDF is damaged or locked with a password") from error
    try:
        images = []
        for n in range(min(len(document), MAX_PAGES)):
            page = document[n]
            try:
                images.append(page.render(scale=page_scale(*page.get_size(), dpi)).to_pil())
            finally:
                page.close()
        return images
    finally:
        document.close()


def drawn_as_png(data: bytes, content_type: str, dpi: int, pages: int) -> list[bytes]:
    """A PDF's first `pages` pages, or an image (a HEIC), as PNGs a model can be sent,
    bounded like every image the reader makes."""
    if kind_of(data, content_type) == "pdf":
        images = pdf_images(data, dpi)[:pages]
    else:
        images = [open_image(data)]
    drawn = []
    for image in images:
        out = io.BytesIO()
        image.convert("RGB").save(out, format="PNG")
        drawn.append(out.getvalue())
    return drawn


def page_scale(width: float, height: float, dpi: float) -> float:
    """Pixels per point to draw a page of `width` x `height` points at: `dpi` / 72, less
    where that would make more than MOST_MADE_PIXELS, checked before anything is drawn."""
    if not (width > 0 and height > 0 and math.isfinite(width * height)):
        raise UnreadableReceipt("the PDF has a page of no size")
    return min(dpi / 72, math.sqrt(MOST_MADE_PIXELS / (width * height)))


def within(width: int, height: int, scale: float = 1.0) -> float:
    """`scale`, or less where an image of `width` x `height` scaled by it would be more than
    MOST_MADE_PIXELS."""
    return min(scale, math.sqrt(MOST_MADE_PIXELS / (width * height)))


def prepare(image: Image.Image) -> Image.Image:
    """Upright (EXIF), grey, contrast stretched, a sensible size, straightened."""
    image = ImageOps.exif_transpose(image) or image
    wanted = min(1.0, MAX_SIDE / max(image.size))
    if image.width < MIN_WIDTH:
        wanted = MIN_WIDTH / image.width
    # A thin image's enlargement is bounded too (100 x 600,000 px would make 2 GB).
    scale = within(*image.size, wanted)
    if scale < wanted and image.width * scale < MIN_WIDTH:
        raise UnreadableReceipt(f"an image of {image.width} x {image.height} pixels is too"
                                " long and thin to be a receipt")
    if image.mode in ("RGBA", "LA", "P"):
        image = image.convert("RGBA")
        white = Image.new("RGBA", image.size, (255, 255, 255, 255))
        image = Image.alpha_composite(white, image)
    image = resized(image.convert("L"), scale)
    image = ImageOps.autocontrast(image, cutoff=1)
    angle = skew(image)
    if angle:
        # Straightening widens a tall image by its height x sin(angle): bounded before it is made.
        turned = abs(math.radians(angle))
        wide = image.width * math.cos(turned) + image.height * math.sin(turned)
        high = image.width * math.sin(turned) + image.height * math.cos(turned)
        image = resized(image, within(math.ceil(wide) + 2, math.ceil(high) + 2))
        image = image.rotate(angle, resample=Image.BICUBIC, expand=True, fillcolor=255)
    return image


def resized(image: Image.Image, scale: float) -> Image.Image:
    if scale == 1.0:
        return image
    size = (max(1, int(image.width * scale)), max(1, int(image.height * scale)))
    return image.resize(size, Image.LANCZOS)


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
        raise UnreadableReceipt("the text recognition (tesseract) is not installed on the"
                                " server")
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
        raise UnreadableReceipt(f"reading its text took longer than {timeout:g} s") from error
    if done.returncode != 0:
        raise UnreadableReceipt("the text recognition failed on it")
    return done.stdout.decode("utf-8", "replace")
