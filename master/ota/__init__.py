# The update over the air: the signed bundle, the slots and their state (service.py), its HTTP routes (routes.py).
