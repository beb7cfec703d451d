class LLM:
    def __init__(self):
        self.observed = []

    def _observe(self, what):
        import phasealloc

        self.observed.append((what, phasealloc.current_phase()))

    def generate(self, prompts=None, **kwargs):
        self._observe("generate")
        return ["out"]

    def chat(self, messages=None, **kwargs):
        return self.generate(messages)

    def sleep(self, level=1):
        self._observe("sleep")

    def wake_up(self, tags=None):
        self._observe("wake_up")
