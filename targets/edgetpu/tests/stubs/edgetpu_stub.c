/* A stand-in for libedgetpu.so.1 with the symbols of edgetpu_c.h. It reports two USB accelerators and one
 * PCIe card (none with -DNO_DEVICES), logs every call with its arguments and options, and returns a
 * delegate tagged 0xED6E (NULL with -DDELEGATE_NULL, as when the device cannot be opened). */
#include <stdlib.h>
#include "stub_log.h"

enum edgetpu_device_type { EDGETPU_APEX_PCI = 0, EDGETPU_APEX_USB = 1 };
struct edgetpu_device { enum edgetpu_device_type type; const char* path; };
struct edgetpu_option { const char* name; const char* value; };

struct edgetpu_device* edgetpu_list_devices(size_t* num_devices) {
    stub_log("edgetpu_list_devices");
#ifdef NO_DEVICES
    *num_devices = 0;
    return NULL;
#else
    struct edgetpu_device* d = malloc(3 * sizeof *d);
    d[0].type = EDGETPU_APEX_USB; d[0].path = "/sys/bus/usb/devices/2-1";
    d[1].type = EDGETPU_APEX_PCI; d[1].path = "/dev/apex_0";
    d[2].type = EDGETPU_APEX_USB; d[2].path = "/sys/bus/usb/devices/2-2";
    *num_devices = 3;
    return d;
#endif
}
void edgetpu_free_devices(struct edgetpu_device* d) { stub_log("edgetpu_free_devices"); free(d); }
void* edgetpu_create_delegate(enum edgetpu_device_type type, const char* name, const struct edgetpu_option* options, size_t num_options) {
    char line[1024];
    int n = snprintf(line, sizeof line, "edgetpu_create_delegate type=%d name=%s", (int)type, name ? name : "(null)");
    for (size_t k = 0; k < num_options && n < (int)sizeof line; k++)
        n += snprintf(line + n, sizeof line - n, " %s=%s", options[k].name, options[k].value);
    stub_log("%s", line);
#ifdef DELEGATE_NULL
    return NULL;
#else
    int* d = malloc(sizeof *d);
    *d = 0xED6E;
    return d;
#endif
}
void edgetpu_free_delegate(void* d) { stub_log("edgetpu_free_delegate magic=%x", *(int*)d); free(d); }
void edgetpu_verbosity(int v) { (void)v; }
const char* edgetpu_version(void) { return "BuildLabel(stub), RuntimeVersion(13)"; }
