# organbus: the Protocol V3 core (frames, descriptors, commands, menu, plans), one module for every interpreter.
