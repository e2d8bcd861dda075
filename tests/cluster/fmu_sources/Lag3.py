from pythonfmu3 import Fmi3Causality, Fmi3Slave, Float64, Fmi3Variability

class Lag3(Fmi3Slave):
    author = "cosim"
    description = "first-order lag (FMI 3.0)"
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.u = 0.0
        self.y = 0.0
        self.tau = 0.5
        self.time = 0.0
        self.register_variable(Float64("time", causality=Fmi3Causality.independent, variability=Fmi3Variability.continuous))
        self.register_variable(Float64("u", causality=Fmi3Causality.input))
        self.register_variable(Float64("y", causality=Fmi3Causality.output))
        self.register_variable(Float64("tau", causality=Fmi3Causality.parameter, variability=Fmi3Variability.tunable))
    def do_step(self, current_time, step_size):
        n = 10
        h = step_size / n
        for _ in range(n):
            self.y += h * (self.u - self.y) / self.tau
        return True
