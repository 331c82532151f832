/* A PJRT plugin that forwards every call to a real plugin and makes chosen calls fail: the fault injector of
 * targets/cloud-tpu/tests/faults.rs. Built by that test with `cc -shared`, one library per configuration:
 *
 *   -DREAL_PLUGIN="\"/path/libpjrt_cpu.so\""   the plugin to forward to
 *   -DFAULTS="\"Client_Compile@1,LoadedExecutable_Execute@2+\""
 *        NAME@N   the N-th call (1-based) of that function fails;  NAME@N+  the N-th and every later one fails
 *        (a device that vanishes mid-run); NAME is the PJRT function without its "PJRT_" prefix. `GetPjrtApi@1`
 *        in the list makes the entry point return NULL (a library that is not a working plugin).
 *
 * An injected failure returns a PJRT_Error this library owns (message "injected fault: PJRT_<NAME> call N",
 * code UNAVAILABLE); PJRT_Error_Message / GetCode / Destroy tell those apart from the real plugin's errors by
 * a registry of live injected errors, and forward the others. Every injected error must be destroyed by the
 * caller: valgrind sees one that is not as "definitely lost".
 *
 * Slot indices follow the order of `PJRT_Api` in pjrt_c_api.h (after the 40-byte header: struct_size,
 * extension_start, pjrt_api_version); the cloud-tpu crate's unit test `fault_stub_slots_match_the_table`
 * checks them against its own declaration of the table. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef REAL_PLUGIN
#error "build with -DREAL_PLUGIN=\"\\\"/path/to/plugin.so\\\"\""
#endif
#ifndef FAULTS
#define FAULTS ""
#endif

typedef struct PJRT_Error PJRT_Error;
typedef PJRT_Error *(*Fn)(void *args);

enum {
    SLOT_Error_Destroy = 0,
    SLOT_Error_Message = 1,
    SLOT_Error_GetCode = 2,
    SLOT_Plugin_Initialize = 3,
    SLOT_Client_Create = 10,
    SLOT_Client_Compile = 20,
    SLOT_Client_BufferFromHostBuffer = 22,
    SLOT_LoadedExecutable_Execute = 55,
    SLOT_Executable_DeserializeAndLoad = 56,
    SLOT_Buffer_ToHostBuffer = 70,
    SLOT_TopologyDescription_Create = 82,
    SLOT_Compile = 89,
};
#define HEADER_BYTES 40
#define CODE_UNAVAILABLE 14

/* The args structs of the three error functions (pjrt_c_api.h). */
typedef struct { size_t struct_size; void *ext; PJRT_Error *error; } ErrorDestroyArgs;
typedef struct { size_t struct_size; void *ext; const PJRT_Error *error; const char *message; size_t message_size; } ErrorMessageArgs;
typedef struct { size_t struct_size; void *ext; const PJRT_Error *error; int code; } ErrorGetCodeArgs;

typedef struct { char message[128]; } Injected;

/* Live injected errors. */
#define MAX_LIVE 256
static Injected *live[MAX_LIVE];
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;

static int is_injected(const void *e) {
    int found = 0;
    pthread_mutex_lock(&live_lock);
    for (int i = 0; i < MAX_LIVE; i++)
        if (live[i] == e) found = 1;
    pthread_mutex_unlock(&live_lock);
    return found;
}

static PJRT_Error *inject(const char *name, long call) {
    Injected *e = malloc(sizeof *e);
    snprintf(e->message, sizeof e->message, "injected fault: PJRT_%s call %ld", name, call);
    pthread_mutex_lock(&live_lock);
    for (int i = 0; i < MAX_LIVE; i++)
        if (!live[i]) { live[i] = e; break; }
    pthread_mutex_unlock(&live_lock);
    return (PJRT_Error *)e;
}

static void *real_table;  /* the real plugin's PJRT_Api */
static unsigned char *table;  /* our copy */
static size_t table_size;

static Fn real_slot(int slot) { return *(Fn *)((unsigned char *)real_table + HEADER_BYTES + 8 * slot); }
static void set_slot(int slot, void *f) { *(void **)(table + HEADER_BYTES + 8 * slot) = f; }

/* Is call number `n` of `name` to fail? */
static const char faults[] = FAULTS;

static int should_fail(const char *name, long n) {
    const char *p = faults;
    size_t len = strlen(name);
    while ((p = strstr(p, name)) != NULL) {
        int starts = p == faults || p[-1] == ',';
        if (starts && p[len] == '@') {
            char *end;
            long k = strtol(p + len + 1, &end, 10);
            if (n == k || (*end == '+' && n >= k)) return 1;
        }
        p += len;
    }
    return 0;
}

static void error_destroy(ErrorDestroyArgs *a) {
    if (is_injected(a->error)) {
        pthread_mutex_lock(&live_lock);
        for (int i = 0; i < MAX_LIVE; i++)
            if (live[i] == (Injected *)a->error) live[i] = NULL;
        pthread_mutex_unlock(&live_lock);
        free(a->error);
        return;
    }
    ((void (*)(ErrorDestroyArgs *))real_slot(SLOT_Error_Destroy))(a);
}

static void error_message(ErrorMessageArgs *a) {
    if (is_injected(a->error)) {
        const Injected *e = (const Injected *)a->error;
        a->message = e->message;
        a->message_size = strlen(e->message);
        return;
    }
    ((void (*)(ErrorMessageArgs *))real_slot(SLOT_Error_Message))(a);
}

static PJRT_Error *error_get_code(ErrorGetCodeArgs *a) {
    if (is_injected(a->error)) {
        a->code = CODE_UNAVAILABLE;
        return NULL;
    }
    return real_slot(SLOT_Error_GetCode)(a);
}

/* One forwarding wrapper per function that can be made to fail. */
#define WRAP(NAME)                                                              \
    static atomic_long calls_##NAME;                                            \
    static PJRT_Error *wrap_##NAME(void *args) {                                \
        long n = atomic_fetch_add(&calls_##NAME, 1) + 1;                        \
        if (should_fail(#NAME, n)) return inject(#NAME, n);                     \
        return real_slot(SLOT_##NAME)(args);                                    \
    }
WRAP(Plugin_Initialize)
WRAP(Client_Create)
WRAP(Client_Compile)
WRAP(Client_BufferFromHostBuffer)
WRAP(LoadedExecutable_Execute)
WRAP(Executable_DeserializeAndLoad)
WRAP(Buffer_ToHostBuffer)
WRAP(TopologyDescription_Create)
WRAP(Compile)

const void *GetPjrtApi(void) {
    if (should_fail("GetPjrtApi", 1)) return NULL;
    if (table) return table;
    void *lib = dlopen(REAL_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "pjrt_fault: cannot load %s: %s\n", REAL_PLUGIN, dlerror());
        return NULL;
    }
    const void *(*get)(void) = (const void *(*)(void))dlsym(lib, "GetPjrtApi");
    if (!get || !(real_table = (void *)get())) return NULL;
    table_size = *(size_t *)real_table;
    table = malloc(table_size);
    memcpy(table, real_table, table_size);
    set_slot(SLOT_Error_Destroy, (void *)error_destroy);
    set_slot(SLOT_Error_Message, (void *)error_message);
    set_slot(SLOT_Error_GetCode, (void *)error_get_code);
#define HOOK(NAME) if (HEADER_BYTES + 8 * (SLOT_##NAME + 1) <= table_size) set_slot(SLOT_##NAME, (void *)wrap_##NAME)
    HOOK(Plugin_Initialize);
    HOOK(Client_Create);
    HOOK(Client_Compile);
    HOOK(Client_BufferFromHostBuffer);
    HOOK(LoadedExecutable_Execute);
    HOOK(Executable_DeserializeAndLoad);
    HOOK(Buffer_ToHostBuffer);
    HOOK(TopologyDescription_Create);
    HOOK(Compile);
    return table;
}
