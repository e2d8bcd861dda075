/* y = u (a direct feedthrough, no state). */
static const int STATES[1] = {0};
static void m_evaluate(Model *m) { V(y) = V(u); }
static void m_derivatives(Model *m, double *dx) {}
static void m_indicators(Model *m, double *z) {}
static bool m_event(Model *m) { return false; }
static bool m_step_event(Model *m) { return false; }
