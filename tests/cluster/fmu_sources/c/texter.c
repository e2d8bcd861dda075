/* Text that changes every `period` s (no state): n = the whole periods elapsed, the String
   output label = "tick <n>" and, where the spec has it (FMI 3.0), the Binary output
   data = the bytes {n, 0, 255}. */
#include <stdio.h>

static const int STATES[1] = {0};

static void m_evaluate(Model *m) {
    int n = (int)floor(m->t / V(period) + 1e-9);
    V(n) = n;
    m->text_len[VR_label] = (size_t)snprintf(m->text[VR_label], TEXT_MAX, "tick %d", n);
#ifdef VR_data
    m->text[VR_data][0] = (char)n;
    m->text[VR_data][1] = 0;
    m->text[VR_data][2] = (char)255;
    m->text_len[VR_data] = 3;
#endif
}

static void m_derivatives(Model *m, double *dx) {}
static void m_indicators(Model *m, double *z) {}
static bool m_event(Model *m) { return false; }
static bool m_step_event(Model *m) { return false; }
