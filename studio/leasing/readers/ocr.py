"""A receipt's bytes -> its text.

Images (PNG, JPEG, WebP, and HEIC when pillow-heif is installed) are read by RapidOCR
(PP-OCR detection, recognition and a 0/180 classifier, its models inside the rapidocr wheel,
run by onnxruntime on one thread, so a pool of processes bounds the CPU it takes): far better
than Tesseract on photos, creases, shadows and double-height totals. The page is first cut to
the paper when the receipt fills only part of the photo, turned a quarter when its text boxes
stand on end, and turned over when the classifier says most of its text is upside down; the
rows are rebuilt from the text boxes. Where rapidocr is not installed, Debian's Tesseract reads
instead (`--psm 6`; German, French and English data), on a page turned upright (EXIF), grey,
its background divided out and straightened.

A PDF's text layer is read as it is, exactly and in milliseconds; only a PDF without one is
drawn as images for the OCR. Nothing here is fetched or written anywhere: bytes in, text out.
"""

from __future__ import annotations

import io
import math
import os
import re
import shutil
import statistics
import subprocess
import time
from typing import Any

from PIL import Image, ImageFilter, ImageMath, ImageOps

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
# RapidOCR reads a page at most this long on its longer side (its own default)...
RAPID_SIDE = 2000
# A page narrower than this once its longer side is RAPID_SIDE (a ratio of 1 to 60) holds no
# row of text a person could read: too long and thin to be a receipt.
RAPID_NARROWEST = 32
# ...and its detector sees the page at least this large on its shorter side, and at most this
# large on its longer one: its time and memory grow with the pixels (some 300 bytes each), and
# a larger view finds no more text.
DETECTOR_SIDE = 736
DETECTOR_LONGEST = 1600
# A text the recogniser is less sure of than this is noise (a crease, the back's print).
TEXT_SCORE = 0.5

try:  # HEIC photos from phones, when the wheel is installed.
    from pillow_heif import register_heif_opener
except ImportError:  # pragma: no cover - optional
    HEIC = False
else:
    register_heif_opener()
    HEIC = True


def N_(message: str) -> str:
    """A reason for the catalogue: kept in English with the task, and said in its person's
    language where the request's page shows it (`leases.failure_words`)."""
    return message


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
        raise UnreadableReceipt(N_("the image is damaged or of a kind that cannot be opened")
                                ) from error
    if image.width * image.height > MAX_PIXELS:
        raise UnreadableReceipt(f"an image of {image.width} x {image.height} pixels is larger "
                                "than any receipt")
    try:
        image.load()
    except Exception as error:
        raise UnreadableReceipt(N_("the image is damaged or of a kind that cannot be opened")
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
        raise UnreadableReceipt(N_("the PDF is locked with a password")) from error
    except Exception as error:  # pypdf raises many kinds on a broken file
        raise UnreadableReceipt(N_("the PDF is damaged")) from error
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
        raise UnreadableReceipt(N_("a PDF without text needs pypdfium2 to be read")) from error
    try:
        document = pypdfium2.PdfDocument(data)
    except Exception as error:
        raise UnreadableReceipt(N_("the PDF is damaged or locked with a password")) from error
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
        raise UnreadableReceipt(N_("the PDF has a page of no size"))
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
    image = flatten(resized(image.convert("L"), scale))
    angle = skew(image)
    if angle:
        # Straightening widens a tall image by its height x sin(angle): bounded before it is made.
        turned = abs(math.radians(angle))
        wide = image.width * math.cos(turned) + image.height * math.sin(turned)
        high = image.width * math.sin(turned) + image.height * math.cos(turned)
        image = resized(image, within(math.ceil(wide) + 2, math.ceil(high) + 2))
        image = image.rotate(angle, resample=Image.BICUBIC, expand=True, fillcolor=255)
    return image


def flatten(image: Image.Image) -> Image.Image:
    """The page divided by a blurred copy of itself, so that shadows, uneven light and the
    paper's own tone become an even white and the ink stays dark (a contrast stretch would
    darken the back side's print showing through). No stretch after: on a page of little ink
    it would stretch the paper's last grey into noise."""
    radius = max(8, min(image.size) // 25)
    small = image.reduce(4) if min(image.size) > 400 else image
    paper = small.filter(ImageFilter.MaxFilter(5)).filter(
        ImageFilter.GaussianBlur(radius / (4 if small is not image else 1)))
    paper = paper.resize(image.size, Image.BILINEAR)
    return ImageMath.lambda_eval(
        lambda a: a["convert"](a["min"](a["image"] * 255 / (a["paper"] + 1), 255), "L"),
        image=image, paper=paper)


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
    """One page's text: RapidOCR's reading, or Tesseract's where rapidocr is not installed."""
    if rapid_installed():
        try:
            return rapid_text(image, time.monotonic() + timeout)
        except UnreadableReceipt:
            raise
        except Exception as error:  # the engine refuses this page, and would again
            raise UnreadableReceipt(f"the OCR could not read it ({type(error).__name__})"
                                    ) from error
    return tesseract_text(image, timeout)


def tesseract_text(image: Image.Image, timeout: float = 30.0) -> str:
    """Tesseract's reading of one image, fed through a pipe."""
    program = tesseract()
    if program is None:
        raise UnreadableReceipt(N_("the text recognition (tesseract) is not installed on the"
                                   " server"))
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
        raise UnreadableReceipt(N_("the text recognition failed on it"))
    return done.stdout.decode("utf-8", "replace")


# --- RapidOCR ----------------------------------------------------------------------------------

_engine: Any = None


def rapid_installed() -> bool:
    try:
        import onnxruntime  # noqa: F401
        import rapidocr  # noqa: F401
    except ImportError:
        return False
    return True


def engine() -> Any:
    """This process's RapidOCR engine, made at its first reading and kept (making it takes
    about a second; its models are files inside the wheel, nothing is downloaded)."""
    global _engine
    if _engine is None:
        from rapidocr import RapidOCR

        _engine = RapidOCR(params={
            "Global.log_level": "error",
            "Global.use_cls": True,
            "Global.max_side_len": RAPID_SIDE,
            "Det.limit_side_len": DETECTOR_SIDE,
            "Det.limit_type": "min",
            # One thread: the pool of reader processes decides how many cores reading takes.
            "EngineConfig.onnxruntime.intra_op_num_threads": 1,
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
        })
    return _engine


def warm() -> None:
    """Make this process's engine and load its models, before the first receipt waits on it."""
    ocr = engine()
    for load in (ocr._load_det_model, ocr._load_cls_model, ocr._load_rec_model):
        load()


def rapid_page(image: Image.Image) -> Any:
    """Upright (EXIF), on white, RGB, at most RAPID_SIDE on its longer side: the array the
    engine reads, never larger than it would read it."""
    import numpy as np

    image = ImageOps.exif_transpose(image) or image
    scale = min(1.0, RAPID_SIDE / max(image.size))
    if min(image.size) * scale < RAPID_NARROWEST:
        raise UnreadableReceipt(f"an image of {image.width} x {image.height} pixels is too"
                                " long and thin to be a receipt")
    if scale < 1.0:
        image = image.resize((max(1, round(image.width * scale)),
                              max(1, round(image.height * scale))), Image.BILINEAR)
    if image.mode in ("RGBA", "LA", "P"):
        image = image.convert("RGBA")
        white = Image.new("RGBA", image.size, (255, 255, 255, 255))
        image = Image.alpha_composite(white, image)
    return np.asarray(image.convert("RGB"))


def paper(array: Any) -> Any:
    """The receipt's own rectangle, when it fills clearly less of the photo (a till receipt
    on a table): the largest bright region, with a margin. A page that is all paper (a scan, a
    close photo, one in part shadowed) is left as it is."""
    import cv2
    import numpy as np

    h, w = array.shape[:2]
    scale = min(1.0, 600 / max(h, w))
    small = cv2.resize(cv2.cvtColor(array, cv2.COLOR_RGB2GRAY), None, fx=scale, fy=scale,
                       interpolation=cv2.INTER_AREA)
    if min(small.shape) < 16:
        return array
    _, bright = cv2.threshold(cv2.GaussianBlur(small, (5, 5), 0), 0, 255,
                              cv2.THRESH_BINARY + cv2.THRESH_OTSU)
    bright = cv2.morphologyEx(bright, cv2.MORPH_CLOSE, np.ones((15, 15), np.uint8))
    n, _, stats, _ = cv2.connectedComponentsWithStats(bright)
    if n < 2:
        return array
    best = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
    x, y, bw, bh, area = stats[best]
    # Paper running out of the frame on two opposite sides is a close photo, not a receipt on
    # a table: what ends it the other way is a shadow across it, and nothing is cut there.
    high, wide = small.shape
    if x <= 1 and x + bw >= wide - 1:
        y, bh = 0, high
    if y <= 1 and y + bh >= high - 1:
        x, bw = 0, wide
    if bw * bh > 0.7 * small.size or area < 0.05 * small.size:
        return array
    m = 0.03 * max(bw, bh)
    x0, y0 = max(0, int((x - m) / scale)), max(0, int((y - m) / scale))
    x1, y1 = min(w, int((x + bw + m) / scale)), min(h, int((y + bh + m) / scale))
    return np.ascontiguousarray(array[y0:y1, x0:x1])


def standing(boxes: Any) -> bool:
    """Most long text boxes are taller than wide: the page lies on its side."""
    import numpy as np

    tall = wide = 0
    for box in boxes:
        w = np.linalg.norm(box[1] - box[0])
        h = np.linalg.norm(box[3] - box[0])
        if h > 2.5 * w:
            tall += 1
        elif w > 2.5 * h:
            wide += 1
    return tall > wide


def detected(array: Any) -> tuple[list[Any], list[Any]]:
    """The text boxes of a page and their crops, none on a page without text. The detector
    sees the page at least DETECTOR_SIDE on its shorter side and at most DETECTOR_LONGEST on
    its longer one, the longer side winning (a long, thin page is seen smaller); the crops
    are cut from the page itself."""
    from rapidocr.main import RapidOCRError

    ocr = engine()
    image, record = ocr.preprocess_img(array)
    short, long = sorted(image.shape[:2])
    detector = ocr._load_det_model()
    scale = min(max(1.0, DETECTOR_SIDE / short), DETECTOR_LONGEST / long)
    if scale > 1.0:  # enlarged: its shorter side is said
        detector.limit_type, detector.limit_side_len = "min", max(32, int(short * scale))
    else:  # made smaller, or as it is: its longer side
        detector.limit_type, detector.limit_side_len = "max", max(32, int(long * scale))
    try:
        crops, found = ocr.detect_and_crop(image, record)
    except RapidOCRError:  # its word for "no text on this page"
        return [], []
    return crops, list(found.boxes) if found.boxes is not None else []


# A Latin letter the recogniser took for a CJK glyph (its dictionary holds both).
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def row_bend(items: list[list[Any]]) -> Any:
    """How far a row at (x, y) stands below where it crosses the middle of the text, or None
    where too few long boxes say. A photo taken at an angle tilts the rows at the top one way
    and at the bottom the other; a bowed receipt bends them across: levelled by one slope, a
    name would join the price of the row above. The long boxes' own slopes, fitted as
    a + b x + c y (the odd box left out), say how the rows run everywhere."""
    import numpy as np

    long = [(it[5], it[6], it[7]) for it in items if it[7] is not None]
    if len(long) < 8:
        return None
    x, y, slope = np.array(long, dtype=float).T
    x0, y0 = float(np.median(x)), float(np.median(y))
    terms = np.stack([np.ones_like(x), x - x0, y - y0], axis=1)
    kept = np.ones(len(slope), bool)
    for _ in range(2):
        (a, b, c), *_ = np.linalg.lstsq(terms[kept], slope[kept], rcond=None)
        off = np.abs(terms @ (a, b, c) - slope)
        kept = off <= max(3 * float(np.median(off[kept])), 0.005)

    def below(at_x: float, at_y: float) -> float:
        dx = at_x - x0
        return a * dx + b / 2 * dx * dx + c * (at_y - y0) * dx
    return below


def rows(found: list[tuple[Any, str]]) -> list[str]:
    """Text boxes -> rows of text, top to bottom: the boxes levelled by their median slope and
    by how the rows bend across the page (row_bend); a box joins the row whose middle is within
    half a text height of its own and which it does not overlap sideways; a row's boxes left
    to right, a wide gap written as three spaces."""
    if not found:
        return []
    slopes = [math.atan2(*(box[1] - box[0])[::-1]) for box, text in found
              if (box[1] - box[0])[0] > 0 and len(text) >= 4]
    angle = statistics.median(slopes) if slopes else 0.0
    c, s = math.cos(-angle), math.sin(-angle)
    items = []
    for box, text in found:
        x = box[:, 0] * c - box[:, 1] * s
        y = box[:, 0] * s + box[:, 1] * c
        wide, high = (x[1] + x[2] - x[0] - x[3]) / 2, (y[3] + y[2] - y[0] - y[1]) / 2
        slope = (y[1] + y[2] - y[0] - y[3]) / 2 / wide \
            if len(text) >= 4 and wide > 3 * high > 0 else None
        items.append([y.min(), y.max(), x.min(), x.max(), CJK.sub(" ", text).strip(),
                      x.mean(), y.mean(), slope])
    bend = row_bend(items)
    if bend is not None:
        for it in items:
            below = bend(it[5], it[6])
            it[0], it[1] = it[0] - below, it[1] - below
    heights = sorted(i[1] - i[0] for i in items)
    usual = heights[len(heights) // 2] or 1.0
    items.sort(key=lambda i: (i[0] + i[1]) / 2)
    groups: list[list[Any]] = []
    for it in items:
        middle = (it[0] + it[1]) / 2
        best = None
        for group in groups[-4:]:
            gy = statistics.mean((i[0] + i[1]) / 2 for i in group)
            gh = statistics.mean(i[1] - i[0] for i in group)
            # Boxes of one row overlap sideways by a glyph at most (2 Menu du jour).
            if abs(middle - gy) < 0.5 * min(gh, it[1] - it[0], usual * 1.5) and \
                    not any(min(i[3], it[3]) - max(i[2], it[2]) > 0.5 * usual for i in group):
                if best is None or abs(middle - gy) < best[0]:
                    best = (abs(middle - gy), group)
        if best:
            best[1].append(it)
        else:
            groups.append([it])
    out = []
    for group in groups:
        group.sort(key=lambda i: i[2])
        parts = [group[0][4]]
        for before, it in zip(group, group[1:], strict=False):
            parts.append("   " if it[2] - before[3] > usual else " ")
            parts.append(it[4])
        out.append("".join(parts).strip())
    return [row for row in out if row]


def rapid_text(image: Image.Image, deadline: float = math.inf) -> str:
    """One page's text, rows top to bottom, whichever way up the page came. Past `deadline`
    (time.monotonic()) it stops between its steps, saying so."""
    import numpy as np

    def in_time() -> None:
        if time.monotonic() > deadline:
            raise UnreadableReceipt(f"reading its text took longer than {seconds:g} s")

    seconds = round(deadline - time.monotonic(), 2)
    ocr = engine()
    array = paper(rapid_page(image))
    crops, boxes = detected(array)
    in_time()
    if not boxes:
        return ""
    if standing(boxes):
        array = np.ascontiguousarray(np.rot90(array, 1))
        crops, boxes = detected(array)
        if not boxes:
            return ""
        in_time()
    # A receipt is upside down as a whole: the page follows the classifier's vote.
    _, classes = ocr.cls_and_rotate(crops)
    flipped = sum(score if label == "180" else -score
                  for label, score in classes.cls_res) > 0
    if flipped:
        crops = [np.ascontiguousarray(np.rot90(crop, 2)) for crop in crops]
    in_time()
    read = ocr.recognize_txt(crops)
    in_time()
    texts = []
    for box, text, score in zip(boxes, read.txts, read.scores, strict=False):
        if score < TEXT_SCORE or not text.strip():
            continue
        box = np.asarray(box, dtype=float)
        if flipped:
            box = -box[[2, 3, 0, 1]]
        texts.append((box, text))
    return "\n".join(rows(texts))
