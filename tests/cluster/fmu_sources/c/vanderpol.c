/* The Van der Pol oscillator x0' = x1, x1' = mu (1 - x0^2) x1 - x0, output x0. */
static const int STATES[NX] = {VR_x0, VR_x1};
static void m_evaluate(Model *m) {
    V(der_x0) = V(x1);
    V(der_x1) = V(mu) * (1.0 - V(x0) * V(x0)) * V(x1) - V(x0);
}
static void m_derivatives(Model *m, double *dx) {
    m_evaluate(m);
    dx[0] = V(der_x0);
    dx[1] = V(der_x1);
}
static void m_indicators(Model *m, double *z) {}
static bool m_event(Model *m) { return false; }
static bool m_step_event(Model *m) { return false; }
