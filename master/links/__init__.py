# The master's links: each a folder with one entry, start(body, config), and its own manifest.
