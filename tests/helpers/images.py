"""What the image tests share: why vlmgrid's own opener refuses a file."""

from vlmgrid.images import ImageError, open_rgb


def open_problem(path) -> str | None:
    """The sentence open_rgb refuses `path` with, or None where it opens: what a decoded batch's problem row
    must say."""
    try:
        open_rgb(path)
    except ImageError as exc:
        return str(exc)
    return None
