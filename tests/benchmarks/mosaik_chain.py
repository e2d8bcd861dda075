"""A minimal mosaik (API v3) simulator for the master benchmark's reference chain."""

import mosaik_api_v3

META = {"type": "time-based", "models": {"Node": {"public": True, "params": [],
                                                   "attrs": ["val", "inp"]}}}


class ChainSim(mosaik_api_v3.Simulator):
    """One entity that passes its input through a one-step delay, like the cosim ring."""

    def __init__(self):
        super().__init__(META)
        self.val = 1.0

    def init(self, sid, time_resolution=1.0, **kw):
        return self.meta

    def create(self, num, model, **kw):
        return [{"eid": "n0", "type": "Node"}]

    def step(self, time, inputs, max_advance):
        for attrs in inputs.values():
            for vals in attrs.get("inp", {}).values():
                self.val = vals
        return time + 1

    def get_data(self, outputs):
        return {"n0": {"val": self.val}}
