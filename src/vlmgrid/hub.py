"""huggingface_hub's exceptions as one-sentence VlmgridErrors that say what to do."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from vlmgrid.errors import VlmgridError


@contextlib.contextmanager
def hub_errors(
    repo: str, revision: str, label: str, *, repo_type: str = "model", alternative: str | None = None
) -> Iterator[None]:
    """Translate hub failures inside the block; `alternative` is a fallback the user has (a local copy)."""
    from huggingface_hub import errors

    what = "hub dataset" if repo_type == "dataset" else "hub repo"
    page = f"https://huggingface.co/{'datasets/' if repo_type == 'dataset' else ''}{repo}"
    otherwise = f", or {alternative}" if alternative else ""
    try:
        yield
    except errors.GatedRepoError:
        raise VlmgridError(
            f"{label}: the {what} {repo} is gated; accept its licence on {page} and set HF_TOKEN to a token "
            f"of that account{otherwise}"
        ) from None
    except errors.RevisionNotFoundError:
        raise VlmgridError(
            f"{label}: revision {revision!r} does not exist in the {what} {repo}; set `revision` to one of "
            f"its commits or tags"
        ) from None
    except errors.DisabledRepoError:
        raise VlmgridError(f"{label}: the {what} {repo} is disabled{otherwise}") from None
    except errors.RepositoryNotFoundError:
        raise VlmgridError(
            f"{label}: the {what} {repo} was not found or this account may not read it; check `repo`, set "
            f"HF_TOKEN if it is private{otherwise}"
        ) from None
    except errors.LocalEntryNotFoundError:
        raise VlmgridError(
            f"{label}: cannot reach the Hugging Face hub for {repo} (offline, or HF_HUB_OFFLINE is set); "
            f"connect to the network{otherwise}"
        ) from None
    except errors.EntryNotFoundError as exc:
        raise VlmgridError(
            f"{label}: a file is missing from {repo} at revision {revision} ({exc}); check `revision`"
        ) from None
    except errors.HfHubHTTPError as exc:
        raise VlmgridError(
            f"{label}: the Hugging Face hub refused a request for {repo} ({exc}); try again later{otherwise}"
        ) from None
    except (errors.HTTPError, OSError) as exc:
        raise VlmgridError(
            f"{label}: cannot reach the Hugging Face hub for {repo} ({exc}); check the network{otherwise}"
        ) from None
