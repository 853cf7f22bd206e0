# The virtual body: boards as MicroPython unix-port processes on simulated hardware, on paced cables.
