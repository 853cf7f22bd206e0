# The organbus master: registry, scheduler, body facade and the links to the model.
