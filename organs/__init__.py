# Organ boards: the shared runtime (lifecycle, dispatch, UART edge), the LED organ and the speaker organ.
