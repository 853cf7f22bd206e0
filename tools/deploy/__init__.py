# Deploy: put a role on a board (board checks, what a role installs, esptool, probe, copy, verify, mount).
