# The board file: /board.json (chip, pins, UARTs, settings) and the unit's own /settings.json over it.
import json


def _read(path):
    try:
        f = open(path)
    except OSError:
        return None
    try:
        return json.load(f)
    except ValueError as e:
        raise ValueError("%s is not valid JSON (%s)" % (path, e))
    finally:
        f.close()


def load(main_file):
    """board.json next to the entry point `main_file` (a board's root), else /board.json, with
    the "settings" of an optional settings.json beside it laid over its own (one unit's values:
    a second LED organ's module_id, or what the simulated boot sets for a host). Raises OSError
    when there is no board file and ValueError when a file is not a JSON object."""
    here = main_file.rsplit("/", 1)[0] + "/" if "/" in main_file else ""
    for d in (here, "/"):
        board = _read(d + "board.json")
        if board is None:
            continue
        if not isinstance(board, dict):
            raise ValueError("%sboard.json is not a JSON object" % d)
        extra = _read(d + "settings.json")
        if extra is not None:
            if not isinstance(extra, dict):
                raise ValueError("%ssettings.json is not a JSON object" % d)
            settings = dict(board.get("settings") or {})
            settings.update(extra)
            board["settings"] = settings
        return board
    raise OSError("board.json not found next to main.py nor at /board.json")


def refusal(e):
    """Why a board cannot start, in one line's words (a missing key names the key)."""
    if isinstance(e, KeyError):
        return "board.json: missing key %s" % e
    return "%s: %s" % (type(e).__name__, e)
