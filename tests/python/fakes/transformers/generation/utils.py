import torch


class GenerationMixin:
    @torch.no_grad()
    def generate(self, *args, **kwargs):
        return self._sample(*args, **kwargs)

    def _sample(self, *args, **kwargs):
        return self(*args, **kwargs)  # a module forward per token, like the real decoding loop
