/*
 * A GPU's UUID as the 32 hex digits the GPU share folder is named by
 * (include/allot/shim_region.h): the one rule of the shim, which finds its
 * GPU's folder, and of the agent, which makes it. Built into both
 * liballot-cuda.so and allot-shimreader.
 */
#include "allot/shim_region.h"

#include <string.h>

bool allot_shim_uuid_hex(const char *uuid, char out[33])
{
    int n = 0;

    if (!uuid)
        return false;
    if (!strncmp(uuid, "GPU-", 4) || !strncmp(uuid, "MIG-", 4))
        uuid += 4;
    for (; *uuid; uuid++) {
        char c = *uuid;

        if (c == '-')
            continue;
        if (c >= 'A' && c <= 'F')
            c = (char)(c - 'A' + 'a');
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) || n == 32)
            return false;
        out[n++] = c;
    }
    out[n] = '\0';
    return n == 32;
}
