# A JSON object as its (key, value) pairs: the /status document made as it is walked (master/bus/status.py, master/links/jsonout.py).


class Pairs:
    """A JSON object as its (key, value) pairs: a list, or fn() -> an iterator of them made
    afresh at each walk (a document built as it is written: jsonout.json_pieces walks it as
    the dict, and only the section being written exists). A list of n pairs is n pointers and
    n small tuples where a dict of n keys is one hash table of ~1.5 n entries (24 keys: 464
    bytes in one block, more than a fragmented 80 KB heap may have). `d[key]` walks to it."""

    def __init__(self, pairs):
        self.pairs = pairs

    def __iter__(self):
        p = self.pairs
        return iter(p if type(p) is list else p())

    def __getitem__(self, key):
        for k, v in self:
            if k == key:
                return v
        raise KeyError(key)


GENERATOR = type(x for x in ())  # a JSON array made as it is walked


def plain(v):
    """`v` with each Pairs in it a dict, each generator a list (the document as objects)."""
    t = type(v)
    if t is Pairs:
        return {k: plain(x) for k, x in v}
    if t is list or t is GENERATOR:
        return [plain(x) for x in v]
    return v
