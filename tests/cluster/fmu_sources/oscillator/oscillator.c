/* A model-exchange FMU (FMI 2.0) built by the tests from this source:
 * a forced damped oscillator  x' = v,  v' = u - k*x - c*v,  output y = x.
 * Value references: 0 x, 1 v, 2 der(x), 3 der(v), 4 k, 5 c, 6 u, 7 y. */
#include <stdlib.h>
#include <string.h>
#include "fmi2Functions.h"

typedef struct { fmi2Real r[8]; fmi2Real time; } Model;

static void derivatives(Model *m) {
    m->r[2] = m->r[1];
    m->r[3] = m->r[6] - m->r[4] * m->r[0] - m->r[5] * m->r[1];
    m->r[7] = m->r[0];
}

const char* fmi2GetTypesPlatform(void) { return fmi2TypesPlatform; }
const char* fmi2GetVersion(void) { return fmi2Version; }
fmi2Status fmi2SetDebugLogging(fmi2Component c, fmi2Boolean on, size_t n, const fmi2String cat[]) { return fmi2OK; }

fmi2Component fmi2Instantiate(fmi2String name, fmi2Type type, fmi2String guid, fmi2String loc,
                              const fmi2CallbackFunctions* f, fmi2Boolean vis, fmi2Boolean log) {
    Model *m = calloc(1, sizeof(Model));
    m->r[0] = 1.0; m->r[4] = 4.0; m->r[5] = 0.4;
    derivatives(m);
    return m;
}
void fmi2FreeInstance(fmi2Component c) { free(c); }
fmi2Status fmi2SetupExperiment(fmi2Component c, fmi2Boolean tol, fmi2Real t, fmi2Real start, fmi2Boolean stop, fmi2Real stopTime) {
    ((Model*)c)->time = start; return fmi2OK; }
fmi2Status fmi2EnterInitializationMode(fmi2Component c) { return fmi2OK; }
fmi2Status fmi2ExitInitializationMode(fmi2Component c) { derivatives(c); return fmi2OK; }
fmi2Status fmi2Terminate(fmi2Component c) { return fmi2OK; }
fmi2Status fmi2Reset(fmi2Component c) { return fmi2OK; }

fmi2Status fmi2GetReal(fmi2Component c, const fmi2ValueReference vr[], size_t n, fmi2Real v[]) {
    Model *m = c; derivatives(m);
    for (size_t i = 0; i < n; i++) { if (vr[i] > 7) return fmi2Error; v[i] = m->r[vr[i]]; }
    return fmi2OK; }
fmi2Status fmi2SetReal(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2Real v[]) {
    Model *m = c;
    for (size_t i = 0; i < n; i++) { if (vr[i] > 7) return fmi2Error; m->r[vr[i]] = v[i]; }
    return fmi2OK; }
fmi2Status fmi2GetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t n, fmi2Integer v[]) { return n ? fmi2Error : fmi2OK; }
fmi2Status fmi2SetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2Integer v[]) { return n ? fmi2Error : fmi2OK; }
fmi2Status fmi2GetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t n, fmi2Boolean v[]) { return n ? fmi2Error : fmi2OK; }
fmi2Status fmi2SetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2Boolean v[]) { return n ? fmi2Error : fmi2OK; }
fmi2Status fmi2GetString(fmi2Component c, const fmi2ValueReference vr[], size_t n, fmi2String v[]) { return n ? fmi2Error : fmi2OK; }
fmi2Status fmi2SetString(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2String v[]) { return n ? fmi2Error : fmi2OK; }

fmi2Status fmi2GetFMUstate(fmi2Component c, fmi2FMUstate* s) { return fmi2Error; }
fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate s) { return fmi2Error; }
fmi2Status fmi2FreeFMUstate(fmi2Component c, fmi2FMUstate* s) { return fmi2Error; }
fmi2Status fmi2SerializedFMUstateSize(fmi2Component c, fmi2FMUstate s, size_t *n) { return fmi2Error; }
fmi2Status fmi2SerializeFMUstate(fmi2Component c, fmi2FMUstate s, fmi2Byte b[], size_t n) { return fmi2Error; }
fmi2Status fmi2DeSerializeFMUstate(fmi2Component c, const fmi2Byte b[], size_t n, fmi2FMUstate* s) { return fmi2Error; }
fmi2Status fmi2GetDirectionalDerivative(fmi2Component c, const fmi2ValueReference u[], size_t nu, const fmi2ValueReference z[], size_t nz, const fmi2Real dv[], fmi2Real dz[]) { return fmi2Error; }

fmi2Status fmi2EnterEventMode(fmi2Component c) { return fmi2OK; }
fmi2Status fmi2NewDiscreteStates(fmi2Component c, fmi2EventInfo* e) {
    e->newDiscreteStatesNeeded = fmi2False; e->terminateSimulation = fmi2False;
    e->nominalsOfContinuousStatesChanged = fmi2False; e->valuesOfContinuousStatesChanged = fmi2False;
    e->nextEventTimeDefined = fmi2False; e->nextEventTime = 0; return fmi2OK; }
fmi2Status fmi2EnterContinuousTimeMode(fmi2Component c) { return fmi2OK; }
fmi2Status fmi2CompletedIntegratorStep(fmi2Component c, fmi2Boolean sync, fmi2Boolean* enter, fmi2Boolean* term) {
    *enter = fmi2False; *term = fmi2False; return fmi2OK; }
fmi2Status fmi2SetTime(fmi2Component c, fmi2Real t) { ((Model*)c)->time = t; return fmi2OK; }
fmi2Status fmi2SetContinuousStates(fmi2Component c, const fmi2Real x[], size_t n) {
    Model *m = c; m->r[0] = x[0]; m->r[1] = x[1]; return fmi2OK; }
fmi2Status fmi2GetDerivatives(fmi2Component c, fmi2Real dx[], size_t n) {
    Model *m = c; derivatives(m); dx[0] = m->r[2]; dx[1] = m->r[3]; return fmi2OK; }
fmi2Status fmi2GetEventIndicators(fmi2Component c, fmi2Real z[], size_t n) { return fmi2OK; }
fmi2Status fmi2GetContinuousStates(fmi2Component c, fmi2Real x[], size_t n) {
    Model *m = c; x[0] = m->r[0]; x[1] = m->r[1]; return fmi2OK; }
fmi2Status fmi2GetNominalsOfContinuousStates(fmi2Component c, fmi2Real x[], size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = 1.0; return fmi2OK; }

/* Co-simulation entry points are not provided: this is a model-exchange FMU only. */
fmi2Status fmi2SetRealInputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2Integer o[], const fmi2Real v[]) { return fmi2Error; }
fmi2Status fmi2GetRealOutputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2Integer o[], fmi2Real v[]) { return fmi2Error; }
fmi2Status fmi2DoStep(fmi2Component c, fmi2Real t, fmi2Real h, fmi2Boolean n) { return fmi2Error; }
fmi2Status fmi2CancelStep(fmi2Component c) { return fmi2Error; }
fmi2Status fmi2GetStatus(fmi2Component c, const fmi2StatusKind s, fmi2Status* v) { return fmi2Error; }
fmi2Status fmi2GetRealStatus(fmi2Component c, const fmi2StatusKind s, fmi2Real* v) { return fmi2Error; }
fmi2Status fmi2GetIntegerStatus(fmi2Component c, const fmi2StatusKind s, fmi2Integer* v) { return fmi2Error; }
fmi2Status fmi2GetBooleanStatus(fmi2Component c, const fmi2StatusKind s, fmi2Boolean* v) { return fmi2Error; }
fmi2Status fmi2GetStringStatus(fmi2Component c, const fmi2StatusKind s, fmi2String* v) { return fmi2Error; }
