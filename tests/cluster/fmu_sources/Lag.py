from pythonfmu import Fmi2Causality, Fmi2Slave, Real

class Lag(Fmi2Slave):
    author = "cosim"
    description = "first-order lag"
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.u = 0.0
        self.y = 0.0
        self.tau = 0.5
        self.register_variable(Real("u", causality=Fmi2Causality.input))
        self.register_variable(Real("y", causality=Fmi2Causality.output))
        self.register_variable(Real("tau", causality=Fmi2Causality.parameter, variability="tunable"))
    def do_step(self, current_time, step_size):
        n = 10
        h = step_size / n
        for _ in range(n):
            self.y += h * (self.u - self.y) / self.tau
        return True
