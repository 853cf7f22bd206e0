# Which online organ owns each ability name: the source of the menu and of every COMMAND's port.
#
# Rebuilt on each registration change (`update`), never on the hot path: `owner(name)` is the
# table dict's own `get` (one C call, bound once: the dict is refilled in place, never replaced)
# of a tuple built here, so a dispatch allocates nothing. The tuple also carries what the
# scheduler's step path reads of the owner on every step (its link, its resource group, whether
# the ability is continuous), decided here once instead of two dict lookups per step.


def continuous(cap):
    """Continuous (and periodic / event-driven abilities with a duration): a COMMAND_RESP 0
    leaves the step running until its EVENT or max_duration_ms, holding its group."""
    return cap["exec_type"] != "immediate" and cap["max_duration_ms"] > 0


class Owners:
    """`owner(name) -> (port, capability, module_id, link, group, continuous) | None`,
    `capabilities()`, `version`. link: the port's number; group: the capability's
    resource_group; continuous: `continuous(capability)`."""

    def __init__(self):
        self._by = {}  # name -> the owner tuple (see the class); the same dict for life
        self.owner = self._by.get  # owner(name) -> (Port, capability, module_id, ...) | None
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
                    by[c["name"]] = (
                        s.port,
                        c,
                        s.organ["module_id"],
                        s.port.index,
                        c["resource_group"],
                        continuous(c),
                    )
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
