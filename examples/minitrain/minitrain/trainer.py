"""The training loop: a step per batch, an epoch per pass over the loader."""


class Trainer:
    def __init__(self, model, learning_rate=0.01):
        self.model = model
        self.learning_rate = learning_rate
        self.history = []

    def step(self, batch):
        loss = self.model.loss(self.model.forward(batch))
        for layer in self.model.layers:
            layer.update(1.0 - self.learning_rate)
        return loss

    def fit(self, loader, epochs):
        for _ in range(epochs):
            self.history.append(sum(self.step(batch) for batch in loader))
        return self.history
