/* Every type as input -> output: out = 2 * in for numbers (integers keep their type), not in
   for booleans, the next item for enumerations (cycling), element-wise 2 * in for arrays
   (vectors of fixed length and of a length set by the structural parameter n), and the
   input's text or bytes for strings and binaries. Variables of
   the spec come in pairs: the output's value reference follows its input's slots. */
static const int STATES[1] = {0};

static void m_evaluate(Model *m) {
    for (unsigned vr = 0; vr < NV;) {
        int n = var_size(m, vr);
        if (KIND[vr] == K_CONT_INPUT || KIND[vr] == K_DISC_INPUT) {
            unsigned out = vr + (unsigned)SLOTS[vr];
            const char *name = NAMES[vr];
            memcpy(m->text[out], m->text[vr], TEXT_MAX);
            m->text_len[out] = m->text_len[vr];
            for (int j = 0; j < n; j++) {
                double u = m->v[vr + j];
                if (name[0] == 'b') m->v[out + j] = u == 0.0;
                else if (name[0] == 'e') m->v[out + j] = u >= 3.0 ? 1.0 : u + 1.0;
                else m->v[out + j] = 2.0 * u;
            }
            vr = out + (unsigned)SLOTS[out];
        } else {
            vr += (unsigned)SLOTS[vr];
        }
    }
}

static void m_derivatives(Model *m, double *dx) {}
static void m_indicators(Model *m, double *z) {}
static bool m_event(Model *m) { return false; }
static bool m_step_event(Model *m) { return false; }
