"""The image outputs livecells keeps and shows, and how large one may be (one rule for every stage)."""

from __future__ import annotations

#: Image mime types a page shows, and the suffix of the file each is written to.
IMAGE_TYPES = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/svg+xml": ".svg",
    "image/webp": ".webp",
}
#: Of these, the ones whose value is base64 text (SVG is XML text).
BASE64_TYPES = tuple(mime for mime in IMAGE_TYPES if mime != "image/svg+xml")
#: An image larger than this (decoded) is left out, with a note.
MAX_IMAGE_BYTES = 10 * 2**20
