# Which online organ owns each ability name: the source of the menu and of every COMMAND's port.
#
# Rebuilt on each registration change (`update`), never on the hot path: `owner(name)` is the
# table dict's own `get` (one C call, bound once: the dict is refilled in place, never replaced)
# of a tuple built here, so a dispatch allocates nothing.


class Owners:
    """`owner(name) -> (port, capability, module_id) | None`, `capabilities()`, `version`."""

    def __init__(self):
        self._by = {}  # name -> (Port, capability dict, module_id); the same dict for life
        self.owner = self._by.get  # owner(name) -> (Port, capability, module_id) | None
        self._caps = []  # menu capabilities (descriptor form plus module_id), registration order
        self.version = 0  # bumps on every change of the table

    def names(self):
        return [c["name"] for c in self._caps]

    def capabilities(self):
        """The menu's capabilities: descriptor form plus module_id, owners only, in order.
        The table's own list (rebuilt, never changed in place): read it, do not modify it."""
        return self._caps

    def update(self, slots):
        """Rebuild from the online `slots` (registry.Slot, registration order): the first
        registered organ keeps a name, later ones list it in `duplicates`. Returns (added,
        removed) ability names."""
        before = self.names()
        by = {}
        caps = []
        for s in slots:
            owned = []
            dups = []
            for c in s.organ["capabilities"]:
                if c["name"] in by:
                    dups.append(c["name"])
                else:
                    by[c["name"]] = (s.port, c, s.organ["module_id"])
                    owned.append(c["name"])
                    m = dict(c)
                    m["module_id"] = s.organ["module_id"]
                    caps.append(m)
            s.owned = owned
            s.new_duplicates = [n for n in dups if n not in s.duplicates]
            s.duplicates = dups
        self._by.clear()  # in place: `owner` is this dict's bound get
        self._by.update(by)
        self._caps = caps
        self.version += 1
        after = self.names()
        return [n for n in after if n not in before], [n for n in before if n not in after]
