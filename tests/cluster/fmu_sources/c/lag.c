/* A first-order lag x' = (u - x) / tau, output y = x (no direct feedthrough). */
static const int STATES[NX] = {VR_x};
static void m_evaluate(Model *m) { V(der_x) = (V(u) - V(x)) / V(tau); }
static void m_derivatives(Model *m, double *dx) {
    m_evaluate(m);
    dx[0] = V(der_x);
}
static void m_indicators(Model *m, double *z) {}
static bool m_event(Model *m) { return false; }
static bool m_step_event(Model *m) { return false; }
