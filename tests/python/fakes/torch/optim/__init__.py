from . import optimizer  # noqa: F401
from .optimizer import Optimizer  # noqa: F401


class AdamW(Optimizer):
    def step(self, closure=None):
        self.steps += 1
