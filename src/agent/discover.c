/*
 * GPU discovery through NVML for the inventory (see nvml.c).
 */
#include "agent.h"

#include "log.h"

int nvml_inventory(const char *lib, const struct allot_catalog *cat, struct agent_inventory *inv,
                   char *err, size_t errlen)
{
    (void)lib;
    (void)cat;
    (void)err;
    (void)errlen;
    inv->n_gpus = 0;
    LOG_WARN("agent", "GPU discovery through NVML is not built in yet: no GPUs");
    return 0;
}
