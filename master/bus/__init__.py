# The bus core: ports, registry, owners, scheduler, hub, status, recent, idle and the Body every link is given.
