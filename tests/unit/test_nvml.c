/*
 * Unit tests of the agent's NVML client (src/agent/nvml*.c) against the fake
 * libnvidia-ml.so.1 of tests/fake/fake_nvml.c, whose machine each test
 * describes in a config file (FAKE_NVML_CONFIG): discovery of several GPUs
 * with NVLink islands, MIG on and off with instances, MIG apply with
 * explicit placements, the model-name mapping of real NVML names, injected
 * errors (unhealthy or unsupported, never a crash), a missing library, an
 * old library without the versioned, MIG and event symbols, sampling with
 * process lists longer than the first buffer, Xid events, and every
 * allocation failing in turn. `test_nvml --default-lib` (a ctest of its
 * own, with LD_LIBRARY_PATH set) checks that NULL finds libnvidia-ml.so.1 as
 * dlopen does.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "allot/catalog.h"
#include "allot/common.h"
#include "nvml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef FAKE_NVML_FULL
#error "FAKE_NVML_FULL: path of the fake libnvidia-ml.so.1 (CMakeLists.txt)"
#endif

static struct allot_catalog *cat;
static char cfg_path[64];

static int setup(void **state)
{
    char err[256];
    int fd;

    cat = allot_catalog_default(err, sizeof(err));
    if (!cat) {
        print_error("default catalog: %s\n", err);
        return -1;
    }
    allot_strlcpy(cfg_path, "/tmp/test_nvml.XXXXXX", sizeof(cfg_path));
    fd = mkstemp(cfg_path);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

static int teardown(void **state)
{
    allot_catalog_free(cat);
    cat = NULL;
    unlink(cfg_path);
    unsetenv("FAKE_NVML_CONFIG");
    return 0;
}

/* Writes the fake machine `config` and opens `lib` over it. */
static struct nvml *open_lib(const char *lib, const char *config)
{
    char err[256];
    FILE *f = fopen(cfg_path, "w");
    struct nvml *nv;

    assert_non_null(f);
    fputs(config, f);
    fclose(f);
    setenv("FAKE_NVML_CONFIG", cfg_path, 1);
    nv = nvml_open(lib, err, sizeof(err));
    if (!nv)
        print_error("nvml_open: %s\n", err);
    assert_non_null(nv);
    return nv;
}

static struct nvml *open_fake(const char *config)
{
    return open_lib(FAKE_NVML_FULL, config);
}

static const struct allot_gpu_model *model(const char *name)
{
    int m = allot_catalog_find_model(cat, name);

    assert_true(m >= 0);
    return &cat->models[m];
}

/* ---- opening ------------------------------------------------------------- */

static void test_library_missing(void **state)
{
    char err[256] = "";

    assert_null(nvml_open("/nonexistent/libnvidia-ml.so.1", err, sizeof(err)));
    assert_non_null(strstr(err, "cannot load /nonexistent/libnvidia-ml.so.1"));
}

static void test_init_fails(void **state)
{
    char err[256] = "";
    FILE *f = fopen(cfg_path, "w");

    assert_non_null(f);
    fputs("gpu\nfail nvmlInit_v2 * NVML_ERROR_DRIVER_NOT_LOADED\n", f);
    fclose(f);
    setenv("FAKE_NVML_CONFIG", cfg_path, 1);
    assert_null(nvml_open(FAKE_NVML_FULL, err, sizeof(err)));
    assert_non_null(strstr(err, "nvmlInit failed: Driver Not Loaded"));
}

static void test_no_gpus(void **state)
{
    struct nvml *nv = open_fake("# no GPU\n");
    struct nvml_gpu g[2];
    struct nvml_xid x[2];

    assert_int_equal(nvml_devices(nv, g, 2), 0);
    assert_int_equal(nvml_events_poll(nv, x, 2), 0);
    assert_int_equal(nvml_sample(nv, 0, &(struct nvml_sample){0}), ALLOT_ENOENT);
    nvml_close(nv);
}

/* ---- discovery ----------------------------------------------------------------- */

static const char *four_h100 = "gpu uuid=GPU-aaaa bus=00000000:18:00.0 minor=3 nvlinks=18\n"
                               "gpu bus=00000000:2A:00.0 minor=1 nvlinks=18\n"
                               "gpu bus=00000000:3A:00.0 minor=2 nvlinks=18\n"
                               "gpu bus=00000000:5D:00.0 minor=0 nvlinks=18\n"
                               "nvlink 0 1 4\n"
                               "nvlink 2 3 2\n"
                               "nvswitch 3 2\n";

static void test_discover_gpus(void **state)
{
    struct nvml *nv = open_fake(four_h100);
    struct nvml_gpu g[8];

    assert_int_equal(nvml_devices(nv, g, 8), 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(g[i].index, i);
        assert_string_equal(g[i].name, "NVIDIA H100 80GB HBM3");
        assert_int_equal(g[i].memory_mib, 81559);
        assert_int_equal(g[i].health, ALLOT_NVML_HEALTHY);
        assert_string_equal(g[i].health_text, "ok");
        assert_int_equal(g[i].mig_current, -1);
        assert_int_equal(g[i].n_mig, 0);
        assert_true(g[i].supported & ALLOT_NVML_F_PCI);
        assert_true(g[i].supported & ALLOT_NVML_F_MINOR);
        assert_true(g[i].supported & ALLOT_NVML_F_NVLINK);
        assert_true(g[i].supported & ALLOT_NVML_F_ECC);
        assert_true(g[i].supported & ALLOT_NVML_F_RETIRED_PAGES);
        assert_true(g[i].supported & ALLOT_NVML_F_REMAPPED_ROWS);
        assert_true(g[i].supported & ALLOT_NVML_F_XID);
        assert_false(g[i].supported & ALLOT_NVML_F_MIG);
        assert_int_equal(g[i].ecc_uncorrected, 0);
        assert_string_equal(nvml_model_name(g[i].name, g[i].memory_mib, cat), "H100-80GB");
    }
    assert_string_equal(g[0].uuid, "GPU-aaaa");
    assert_string_equal(g[1].uuid, "GPU-fa4e0000-0000-0000-0000-000000000001");
    assert_string_equal(g[0].bus_id, "00000000:18:00.0");
    assert_string_equal(g[3].bus_id, "00000000:5D:00.0");
    assert_int_equal(g[0].minor, 3);
    assert_int_equal(g[3].minor, 0);
    /* islands: {0, 1} over 4 links, {2, 3} over 2, and 3 reaches a switch */
    assert_int_equal(g[0].n_peers, 1);
    assert_int_equal(g[0].peers[0].index, 1);
    assert_int_equal(g[0].peers[0].links, 4);
    assert_string_equal(g[0].peers[0].bus_id, "00000000:2A:00.0");
    assert_int_equal(g[1].n_peers, 1);
    assert_int_equal(g[1].peers[0].index, 0);
    assert_int_equal(g[2].n_peers, 1);
    assert_int_equal(g[2].peers[0].index, 3);
    assert_int_equal(g[2].peers[0].links, 2);
    assert_int_equal(g[3].n_peers, 2);
    assert_int_equal(g[3].peers[0].index, 2);
    assert_int_equal(g[3].peers[1].index, -1);
    assert_int_equal(g[3].peers[1].links, 2);
    assert_string_equal(g[3].peers[1].bus_id, "00000000:C0:00.0");
    assert_true(nvml_has(nv, ALLOT_NVML_F_EVENTS));
    assert_true(nvml_has(nv, ALLOT_NVML_F_MIG_APPLY));
    nvml_close(nv);
}

static void test_discover_fewer_than_there_are(void **state)
{
    struct nvml *nv = open_fake(four_h100);
    struct nvml_gpu g[2];

    /* the count of all GPUs, two of them filled; peers beyond are not indexed */
    assert_int_equal(nvml_devices(nv, g, 2), 4);
    assert_int_equal(g[1].index, 1);
    assert_int_equal(g[0].peers[0].index, 1);
    assert_int_equal(nvml_devices(nv, g, 0), 4);
    nvml_close(nv);
}

/* ---- MIG ---------------------------------------------------------------------- */

static void test_mig_on_and_off(void **state)
{
    struct nvml *nv = open_fake("gpu name=\"NVIDIA A100-SXM4-40GB\" mem=40960 mig=on\n"
                                "gpu name=\"NVIDIA A100-SXM4-40GB\" mem=40960 mig=off\n"
                                "gpu name=\"Tesla V100-SXM2-32GB\" mem=32768\n"
                                "gpu name=\"NVIDIA A30\" mem=24576 mig=on\n"
                                "gi 0 2 4\n"      /* 3g.20gb at 4 */
                                "gi 0 0 0\n"      /* 1g.5gb at 0 */
                                "gi 0 9 2 noci\n" /* 1g.10gb at 2, no compute instance */
                                "gi 3 1 2\n");    /* A30: 2g.12gb at 2 */
    struct nvml_gpu g[4];
    const struct nvml_mig_instance *m;

    assert_int_equal(nvml_devices(nv, g, 4), 4);
    assert_int_equal(g[0].mig_current, 1);
    assert_int_equal(g[0].mig_pending, 1);
    assert_true(g[0].supported & ALLOT_NVML_F_MIG);
    assert_true(g[0].supported & ALLOT_NVML_F_MIG_LIST);
    assert_int_equal(g[0].health, ALLOT_NVML_HEALTHY);
    assert_int_equal(g[0].n_mig, 3);
    m = &g[0].mig[0]; /* sorted by placement start */
    assert_string_equal(m->profile, "1g.5gb");
    assert_int_equal(m->profile_id, 19);
    assert_int_equal(m->start, 0);
    assert_int_equal(m->size, 1);
    assert_int_equal(m->compute_slices, 1);
    assert_int_equal(m->n_ci, 1);
    assert_int_equal(m->ci_id, 0);
    assert_int_equal(m->memory_mib, 5120);
    assert_true(strncmp(m->uuid, "MIG-", 4) == 0);
    m = &g[0].mig[1];
    assert_string_equal(m->profile, "1g.10gb");
    assert_int_equal(m->profile_id, 15);
    assert_int_equal(m->start, 2);
    assert_int_equal(m->size, 2);
    assert_int_equal(m->n_ci, 0);
    assert_int_equal(m->ci_id, -1);
    assert_string_equal(m->uuid, "");
    m = &g[0].mig[2];
    assert_string_equal(m->profile, "3g.20gb");
    assert_int_equal(m->start, 4);
    assert_int_equal(m->size, 4);
    assert_int_equal(m->compute_slices, 3);
    assert_int_equal(m->memory_mib, 20480);
    assert_string_not_equal(m->uuid, g[0].mig[0].uuid);
    /* off, not capable */
    assert_int_equal(g[1].mig_current, 0);
    assert_int_equal(g[1].n_mig, 0);
    assert_true(g[1].supported & ALLOT_NVML_F_MIG);
    assert_int_equal(g[2].mig_current, -1);
    assert_false(g[2].supported & ALLOT_NVML_F_MIG);
    assert_int_equal(g[2].health, ALLOT_NVML_HEALTHY);
    /* A30 geometry */
    assert_int_equal(g[3].n_mig, 1);
    assert_string_equal(g[3].mig[0].profile, "2g.12gb");
    assert_int_equal(g[3].mig[0].profile_id, 5);
    assert_string_equal(nvml_model_name(g[3].name, g[3].memory_mib, cat), "A30-24GB");
    nvml_close(nv);
}

static void test_mig_find_profile(void **state)
{
    struct nvml *nv = open_fake("gpu mig=on\ngpu mig=off\ngpu\n");
    struct nvml_mig_profile p;

    assert_int_equal(nvml_mig_find_profile(nv, 0, "1g.20gb", NULL, &p), 0);
    assert_int_equal(p.id, 15);
    assert_int_equal(p.nvml_index, 9); /* NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 */
    assert_int_equal(p.compute_slices, 1);
    assert_int_equal(p.memory_slices, 2);
    assert_int_equal(p.max_instances, 4);
    assert_int_equal(p.n_placements, 4);
    assert_int_equal(p.placements[3].start, 6);
    assert_int_equal(nvml_mig_find_profile(nv, 0, "7G.80GB", NULL, &p), 0);
    assert_int_equal(p.id, 0);
    assert_int_equal(p.memory_slices, 8);
    /* the media-extension variant is a profile of its own */
    assert_int_equal(nvml_mig_find_profile(nv, 0, "1g.10gb", NULL, &p), 0);
    assert_int_equal(p.id, 19);
    assert_int_equal(nvml_mig_find_profile(nv, 0, "1g.10gb+me", NULL, &p), 0);
    assert_int_equal(p.id, 20);
    assert_int_equal(nvml_mig_find_profile(nv, 0, "5g.50gb", NULL, &p), ALLOT_ENOENT);
    assert_non_null(strstr(nvml_last_error(nv), "no MIG profile \"5g.50gb\""));
    assert_int_equal(nvml_mig_find_profile(nv, 1, "1g.10gb", NULL, &p), ALLOT_ESTATE);
    assert_int_equal(nvml_mig_find_profile(nv, 2, "1g.10gb", NULL, &p), ALLOT_ESTATE);
    assert_int_equal(nvml_mig_find_profile(nv, 7, "1g.10gb", NULL, &p), ALLOT_ENOENT);
    nvml_close(nv);
}

static void test_mig_profile_by_catalog_id(void **state)
{
    /* a driver whose versioned query is missing: no names from NVML */
    struct nvml *nv = open_fake("gpu name=\"NVIDIA A100-SXM4-40GB\" mem=40960 mig=on\n"
                                "fail nvmlDeviceGetGpuInstanceProfileInfoV * "
                                "NVML_ERROR_FUNCTION_NOT_FOUND\n");
    const struct allot_gpu_model *a100 = model("A100-40GB");
    struct nvml_mig_profile p;
    struct nvml_mig_instance mi;
    struct nvml_gpu g;

    assert_int_equal(nvml_mig_find_profile(nv, 0, "1g.10gb", NULL, &p), ALLOT_ENOENT);
    assert_int_equal(nvml_mig_find_profile(nv, 0, "1g.10gb", a100, &p), 0);
    assert_int_equal(p.id, 15); /* the catalog's id, checked against NVML's slices */
    assert_string_equal(p.name, "1g.10gb");
    assert_int_equal(p.memory_slices, 2);
    assert_int_equal(nvml_mig_create(nv, 0, "1g.10gb", 6, a100, &mi), 0);
    assert_int_equal(mi.start, 6);
    assert_int_equal(mi.size, 2);
    assert_int_equal(nvml_devices(nv, &g, 1), 1);
    assert_int_equal(g.n_mig, 1);
    assert_string_equal(g.mig[0].profile, ""); /* NVML gave no name */
    assert_int_equal(g.mig[0].profile_id, 15);
    nvml_close(nv);
}

static void test_mig_create_and_destroy(void **state)
{
    struct nvml *nv = open_fake("gpu mig=on\n");
    const struct allot_gpu_model *h100 = model("H100-80GB");
    struct nvml_mig_instance a, b, c;
    struct nvml_gpu g;

    assert_int_equal(nvml_mig_create(nv, 0, "1g.10gb", 3, h100, &a), 0);
    assert_int_equal(a.start, 3);
    assert_int_equal(a.size, 1);
    assert_int_equal(a.n_ci, 1);
    assert_int_equal(a.ci_id, 0);
    assert_string_equal(a.profile, "1g.10gb");
    assert_true(strncmp(a.uuid, "MIG-", 4) == 0);
    assert_int_equal(nvml_mig_create(nv, 0, "3g.40gb", 4, h100, &b), 0);
    assert_int_equal(b.size, 4);
    assert_int_equal(b.compute_slices, 3);
    assert_int_not_equal(a.gi_id, b.gi_id);
    /* slices 0-3 hold slice 3 */
    assert_int_equal(nvml_mig_create(nv, 0, "3g.40gb", 0, h100, &c), ALLOT_ENOSPC);
    assert_non_null(strstr(nvml_last_error(nv), "NVML_ERROR_INSUFFICIENT_RESOURCES"));
    /* not a placement of 2g.20gb */
    assert_int_equal(nvml_mig_create(nv, 0, "2g.20gb", 1, h100, &c), ALLOT_EINVAL);
    assert_int_equal(nvml_mig_create(nv, 0, "9g.1gb", 0, h100, &c), ALLOT_ENOENT);
    assert_int_equal(nvml_mig_create(nv, 0, "2g.20gb", 0, NULL, NULL), 0);

    assert_int_equal(nvml_devices(nv, &g, 1), 1);
    assert_int_equal(g.n_mig, 3);
    assert_int_equal(g.mig[0].start, 0);
    assert_string_equal(g.mig[0].profile, "2g.20gb");
    assert_int_equal(g.mig[1].gi_id, a.gi_id);
    assert_string_equal(g.mig[1].uuid, a.uuid);
    assert_int_equal(g.mig[2].gi_id, b.gi_id);

    assert_int_equal(nvml_mig_destroy(nv, 0, a.gi_id), 0);
    assert_int_equal(nvml_mig_destroy(nv, 0, a.gi_id), ALLOT_ENOENT);
    assert_int_equal(nvml_mig_destroy(nv, 0, -1), ALLOT_ENOENT);
    assert_int_equal(nvml_devices(nv, &g, 1), 1);
    assert_int_equal(g.n_mig, 2);
    /* the freed slice takes a new instance */
    assert_int_equal(nvml_mig_create(nv, 0, "1g.10gb", 3, h100, &a), 0);
    assert_int_equal(nvml_mig_destroy(nv, 0, b.gi_id), 0);
    assert_int_equal(nvml_mig_create(nv, 0, "4g.40gb", 0, h100, &c), ALLOT_ENOSPC);
    nvml_close(nv);
}

static void test_mig_failed_ci_rolls_back(void **state)
{
    struct nvml *nv = open_fake("gpu mig=on\n"
                                "fail nvmlGpuInstanceCreateComputeInstance 0 "
                                "NVML_ERROR_UNKNOWN 1\n");
    struct nvml_mig_instance mi;
    struct nvml_gpu g;

    assert_int_equal(nvml_mig_create(nv, 0, "7g.80gb", 0, NULL, &mi), ALLOT_EIO);
    assert_string_equal(nvml_last_error(nv),
                        "nvmlGpuInstanceCreateComputeInstance: Unknown Error (NVML_ERROR_UNKNOWN)");
    assert_int_equal(nvml_devices(nv, &g, 1), 1);
    assert_int_equal(g.n_mig, 0); /* the GPU instance went again */
    assert_int_equal(nvml_mig_create(nv, 0, "7g.80gb", 0, NULL, &mi), 0);
    nvml_close(nv);
}

static void test_mig_destroy_in_use(void **state)
{
    struct nvml *nv = open_fake("gpu mig=on\ngi 0 3 0\nproc 0 4242 1000 1 0\n");
    struct nvml_gpu g;
    struct nvml_sample s;

    assert_int_equal(nvml_devices(nv, &g, 1), 1);
    assert_int_equal(g.n_mig, 1);
    assert_int_equal(g.mig[0].gi_id, 1);
    assert_int_equal(nvml_mig_destroy(nv, 0, 1), ALLOT_ESTATE);
    assert_non_null(strstr(nvml_last_error(nv), "NVML_ERROR_IN_USE"));
    assert_int_equal(nvml_sample(nv, 0, &s), 0);
    assert_int_equal(s.n_procs, 1);
    assert_int_equal(s.procs[0].gi_id, 1);
    assert_int_equal(s.procs[0].ci_id, 0);
    nvml_close(nv);
}

static void test_mig_mode(void **state)
{
    struct nvml *nv = open_fake("gpu mig=off\n"
                                "gpu mig=off mig_pending_only=1\n"
                                "gpu\n");
    struct nvml_mig_instance mi;
    struct nvml_gpu g[3];
    bool on = true;

    assert_int_equal(nvml_mig_create(nv, 0, "1g.10gb", 0, NULL, &mi), ALLOT_ESTATE);
    assert_non_null(strstr(nvml_last_error(nv), "MIG mode is off"));
    assert_int_equal(nvml_mig_set_mode(nv, 0, true, &on), 0);
    assert_true(on);
    assert_int_equal(nvml_mig_set_mode(nv, 1, true, &on), 0);
    assert_false(on);
    assert_non_null(strstr(nvml_last_error(nv), "pending"));
    assert_int_equal(nvml_mig_set_mode(nv, 2, true, &on), ALLOT_ESTATE);
    assert_int_equal(nvml_mig_set_mode(nv, 5, true, NULL), ALLOT_ENOENT);
    assert_int_equal(nvml_devices(nv, g, 3), 3);
    assert_int_equal(g[0].mig_current, 1);
    assert_int_equal(g[1].mig_current, 0);
    assert_int_equal(g[1].mig_pending, 1);
    assert_int_equal(g[2].mig_current, -1);
    /* instances keep MIG on */
    assert_int_equal(nvml_mig_create(nv, 0, "1g.10gb", 0, NULL, &mi), 0);
    assert_int_equal(nvml_mig_set_mode(nv, 0, false, NULL), ALLOT_ESTATE);
    assert_int_equal(nvml_mig_destroy(nv, 0, mi.gi_id), 0);
    assert_int_equal(nvml_mig_set_mode(nv, 0, false, &on), 0);
    assert_true(on);
    nvml_close(nv);
}

/* ---- model names ------------------------------------------------------------------ */

static void test_model_names(void **state)
{
    static const struct {
        const char *nvml;
        int64_t mib;
        const char *want;
    } cases[] = {
        {"NVIDIA H100 80GB HBM3", 81559, "H100-80GB"},
        {"NVIDIA H100 PCIe", 81559, "H100-80GB"},
        {"NVIDIA H100 NVL", 95830, "H100-94GB"},
        {"NVIDIA H200", 143771, "H200-141GB"},
        {"NVIDIA H200 NVL", 143771, "H200-141GB"},
        {"NVIDIA A100-SXM4-40GB", 40960, "A100-40GB"},
        {"NVIDIA A100-PCIE-40GB", 40960, "A100-40GB"},
        {"NVIDIA A100-SXM4-80GB", 81920, "A100-80GB"},
        {"NVIDIA A100 80GB PCIe", 81920, "A100-80GB"},
        {"NVIDIA A30", 24576, "A30-24GB"},
        {"NVIDIA L4", 23034, "L4"},
        {"Tesla T4", 15360, "T4"},
        {"Tesla V100-SXM2-16GB", 16160, "V100-16GB"},
        {"Tesla V100-SXM2-32GB", 32768, "V100-32GB"},
        {"Tesla V100-PCIE-32GB", 32510, "V100-32GB"},
        {"NVIDIA B200", 183359, "B200-180GB"},
        /* memory unknown: the family's short name */
        {"NVIDIA H100 80GB HBM3", 0, "H100-80GB"},
        /* NVML's memory wins over a name that disagrees */
        {"NVIDIA A100-SXM4-40GB", 81920, "A100-80GB"},
        /* unknown to the catalog */
        {"NVIDIA GeForce RTX 4090", 24564, NULL},
        {"Tesla V100S-PCIE-32GB", 32768, NULL},
        {"NVIDIA H100 80GB HBM3", 24000, NULL},
        {"", 0, NULL},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *got = nvml_model_name(cases[i].nvml, cases[i].mib, cat);

        if (cases[i].want == NULL) {
            if (got)
                print_error("%s: %s\n", cases[i].nvml, got);
            assert_null(got);
        } else {
            if (!got || strcmp(got, cases[i].want) != 0)
                print_error("%s %lld MiB: got %s\n", cases[i].nvml, (long long)cases[i].mib,
                            got ? got : "NULL");
            assert_non_null(got);
            assert_string_equal(got, cases[i].want);
        }
    }
    assert_null(nvml_model_name(NULL, 0, cat));
    assert_null(nvml_model_name("NVIDIA L4", 0, NULL));
}

/* ---- errors and health ------------------------------------------------------------ */

static void test_injected_errors(void **state)
{
    struct nvml *nv = open_fake("gpu\ngpu\ngpu\ngpu\n"
                                "fail nvmlDeviceGetUUID 1 NVML_ERROR_UNKNOWN\n"
                                "fail nvmlDeviceGetMinorNumber 2 NVML_ERROR_UNKNOWN\n"
                                "fail nvmlDeviceGetTotalEccErrors 0 NVML_ERROR_NOT_SUPPORTED\n"
                                "fail nvmlDeviceGetRemappedRows 0 NVML_ERROR_FUNCTION_NOT_FOUND\n"
                                "fail nvmlDeviceGetHandleByIndex_v2 3 NVML_ERROR_UNKNOWN\n");
    struct nvml_gpu g[4];

    assert_int_equal(nvml_devices(nv, g, 4), 4);
    /* unsupported, quietly */
    assert_int_equal(g[0].health, ALLOT_NVML_HEALTHY);
    assert_false(g[0].supported & ALLOT_NVML_F_ECC);
    assert_false(g[0].supported & ALLOT_NVML_F_REMAPPED_ROWS);
    assert_true(g[0].supported & ALLOT_NVML_F_RETIRED_PAGES);
    /* identity unreadable: unhealthy, the rest still read */
    assert_int_equal(g[1].health, ALLOT_NVML_UNHEALTHY);
    assert_string_equal(g[1].health_text, "nvmlDeviceGetUUID: Unknown Error (NVML_ERROR_UNKNOWN)");
    assert_string_equal(g[1].uuid, "");
    assert_string_equal(g[1].name, "NVIDIA H100 80GB HBM3");
    assert_true(g[1].supported & ALLOT_NVML_F_MINOR);
    /* an optional query failing: degraded, named */
    assert_int_equal(g[2].health, ALLOT_NVML_DEGRADED);
    assert_string_equal(g[2].health_text,
                        "nvmlDeviceGetMinorNumber: Unknown Error (NVML_ERROR_UNKNOWN)");
    assert_int_equal(g[2].minor, -1);
    assert_false(g[2].supported & ALLOT_NVML_F_MINOR);
    assert_true(g[2].supported & ALLOT_NVML_F_PCI);
    /* no handle */
    assert_int_equal(g[3].health, ALLOT_NVML_UNHEALTHY);
    assert_non_null(strstr(g[3].health_text, "nvmlDeviceGetHandleByIndex"));
    assert_int_equal(g[3].supported, 0);
    nvml_close(nv);
}

static void test_gpu_lost(void **state)
{
    struct nvml *nv = open_fake("gpu\ngpu\n"
                                "fail nvmlDeviceGetName 1 NVML_ERROR_GPU_IS_LOST\n"
                                "fail nvmlDeviceGetUtilizationRates 1 NVML_ERROR_GPU_IS_LOST\n");
    struct nvml_gpu g[2];
    struct nvml_sample s;

    assert_int_equal(nvml_devices(nv, g, 2), 2);
    assert_false(g[0].lost);
    assert_true(g[1].lost);
    assert_int_equal(g[1].health, ALLOT_NVML_UNHEALTHY);
    assert_string_equal(g[1].health_text,
                        "nvmlDeviceGetName: GPU is lost (NVML_ERROR_GPU_IS_LOST)");
    assert_int_equal(g[1].supported, 0); /* nothing more was asked */
    assert_int_equal(nvml_sample(nv, 1, &s), ALLOT_EIO);
    assert_non_null(strstr(nvml_last_error(nv), "GPU 1: nvmlDeviceGetUtilizationRates"));
    assert_int_equal(nvml_sample(nv, 0, &s), 0);
    nvml_close(nv);
}

static void test_health_ecc_pages_rows(void **state)
{
    struct nvml *nv = open_fake("gpu ecc=3\n"
                                "gpu sbe=2 dbe=1 pages_pending=1\n"
                                "gpu remap_corr=1 remap_unc=4 remap_failed=1\n"
                                "gpu remap_pending=1 remap_unc=1\n"
                                "gpu ecc=na pages=na remap=na\n");
    struct nvml_gpu g[5];

    assert_int_equal(nvml_devices(nv, g, 5), 5);
    assert_int_equal(g[0].health, ALLOT_NVML_UNHEALTHY);
    assert_int_equal(g[0].ecc_uncorrected, 3);
    assert_string_equal(g[0].health_text, "3 volatile uncorrectable ECC errors");
    assert_int_equal(g[1].health, ALLOT_NVML_DEGRADED);
    assert_int_equal(g[1].retired_sbe, 2);
    assert_int_equal(g[1].retired_dbe, 1);
    assert_true(g[1].retired_pending);
    assert_string_equal(g[1].health_text, "page retirement pending (reset needed)");
    assert_int_equal(g[2].health, ALLOT_NVML_UNHEALTHY);
    assert_true(g[2].remap_failed);
    assert_int_equal(g[2].remapped_corr, 1);
    assert_int_equal(g[2].remapped_unc, 4);
    assert_string_equal(g[2].health_text, "row remapping failed");
    assert_int_equal(g[3].health, ALLOT_NVML_DEGRADED);
    assert_true(g[3].remap_pending);
    assert_int_equal(g[4].health, ALLOT_NVML_HEALTHY);
    assert_false(g[4].supported &
                 (ALLOT_NVML_F_ECC | ALLOT_NVML_F_RETIRED_PAGES | ALLOT_NVML_F_REMAPPED_ROWS));
    nvml_close(nv);
}

/* ---- sampling ------------------------------------------------------------------- */

static void test_sample(void **state)
{
    struct nvml *nv = open_fake("gpu util_gpu=87 util_mem=41 temp=66 energy=123456789\n"
                                "proc 0 100 2048\nproc 0 101 512\n"
                                "gpu\n");
    struct nvml_sample s;

    assert_int_equal(nvml_sample(nv, 0, &s), 0);
    assert_int_equal(s.supported, ALLOT_NVML_F_UTIL | ALLOT_NVML_F_MEMORY | ALLOT_NVML_F_ENERGY |
                                      ALLOT_NVML_F_TEMP | ALLOT_NVML_F_PROCS);
    assert_int_equal(s.util_gpu, 87);
    assert_int_equal(s.util_mem, 41);
    assert_int_equal(s.temp_c, 66);
    assert_int_equal(s.energy_mj, 123456789);
    assert_int_equal(s.mem_total_mib, 81559);
    assert_int_equal(s.mem_used_mib, 2560);
    assert_int_equal(s.n_procs, 2);
    assert_int_equal(s.n_procs_kept, 2);
    assert_int_equal(s.procs[0].pid, 100);
    assert_int_equal(s.procs[0].used_bytes, 2048LL << 20);
    assert_int_equal(s.procs[0].gi_id, -1);
    assert_int_equal(s.procs[1].pid, 101);
    assert_int_equal(nvml_sample(nv, 1, &s), 0);
    assert_int_equal(s.n_procs, 0);
    assert_true(s.supported & ALLOT_NVML_F_PROCS);
    assert_int_equal(nvml_sample(nv, 2, &s), ALLOT_ENOENT);
    assert_int_equal(nvml_sample(nv, -1, &s), ALLOT_ENOENT);
    nvml_close(nv);
}

static void test_sample_many_processes(void **state)
{
    struct nvml *nv = open_fake("gpu\nprocs 0 40 9000 8\ngrow 0 30\n"
                                "gpu\nprocs 1 300 5000 16\n");
    struct nvml_sample s;

    /* a list that grows while it is read: 40 > the first buffer (32
     * entries), then 30 more at each answer that the buffer is too small
     * (70, 100, 130) */
    assert_int_equal(nvml_sample(nv, 0, &s), 0);
    assert_true(s.supported & ALLOT_NVML_F_PROCS);
    assert_int_equal(s.n_procs, 130);
    assert_int_equal(s.n_procs_kept, 128);
    for (int i = 0; i < s.n_procs_kept; i++)
        assert_int_equal(s.procs[i].pid, 9000 + i);
    /* 300 > the buffer kept from before and > ALLOT_NVML_MAX_PROCS */
    assert_int_equal(nvml_sample(nv, 1, &s), 0);
    assert_true(s.supported & ALLOT_NVML_F_PROCS);
    assert_int_equal(s.n_procs, 300);
    assert_int_equal(s.n_procs_kept, ALLOT_NVML_MAX_PROCS);
    for (int i = 0; i < s.n_procs_kept; i++) {
        assert_int_equal(s.procs[i].pid, 5000 + i);
        assert_int_equal(s.procs[i].used_bytes, 16LL << 20);
    }
    assert_int_equal(s.mem_used_mib, 300 * 16);
    nvml_close(nv);
}

static void test_sample_procs_keep_failing(void **state)
{
    struct nvml *nv =
        open_fake("gpu\nprocs 0 10 100 1\n"
                  "fail nvmlDeviceGetComputeRunningProcesses_v2 0 "
                  "NVML_ERROR_INSUFFICIENT_SIZE\n"
                  "fail nvmlDeviceGetTotalEnergyConsumption 0 NVML_ERROR_UNKNOWN 1\n");
    struct nvml_sample s;

    assert_int_equal(nvml_sample(nv, 0, &s), 0);
    assert_false(s.supported & ALLOT_NVML_F_PROCS);
    assert_false(s.supported & ALLOT_NVML_F_ENERGY);
    assert_true(s.supported & ALLOT_NVML_F_UTIL);
    assert_int_equal(s.n_procs, 0);
    assert_non_null(strstr(nvml_last_error(nv), "nvmlDeviceGetComputeRunningProcesses_v2"));
    assert_int_equal(nvml_sample(nv, 0, &s), 0);
    assert_true(s.supported & ALLOT_NVML_F_ENERGY);
    nvml_close(nv);
}

/* ---- events ------------------------------------------------------------------------ */

static void test_xid_events(void **state)
{
    struct nvml *nv = open_fake("gpu\nxid 0 79\nxid 0 48\n"
                                "gpu events=0\nxid 1 31\n"
                                "gpu\nxid 2 13\n");
    struct nvml_gpu g[3];
    struct nvml_xid x[4];

    assert_int_equal(nvml_devices(nv, g, 3), 3);
    assert_true(g[0].supported & ALLOT_NVML_F_XID);
    assert_false(g[1].supported & ALLOT_NVML_F_XID);
    assert_int_equal(nvml_events_poll(nv, x, 2), 2);
    assert_int_equal(x[0].index, 0);
    assert_int_equal(x[0].xid, 79);
    assert_int_equal(x[0].gi_id, -1);
    assert_int_equal(x[1].index, 0);
    assert_int_equal(x[1].xid, 48);
    assert_int_equal(nvml_events_poll(nv, x, 4), 1);
    assert_int_equal(x[0].index, 2);
    assert_int_equal(x[0].xid, 13);
    assert_int_equal(nvml_events_poll(nv, x, 4), 0);
    nvml_close(nv);
}

static void test_events_fail(void **state)
{
    struct nvml *nv = open_fake("gpu\nxid 0 79\n"
                                "fail nvmlEventSetWait_v2 * NVML_ERROR_UNKNOWN 1\n");
    struct nvml_xid x[2];

    assert_int_equal(nvml_events_poll(nv, x, 2), ALLOT_EIO);
    assert_int_equal(nvml_events_poll(nv, x, 2), 1);
    nvml_close(nv);
    /* no event set: polling answers nothing */
    nv = open_fake("gpu\nxid 0 79\nfail nvmlEventSetCreate * NVML_ERROR_NOT_SUPPORTED\n");
    assert_false(nvml_has(nv, ALLOT_NVML_F_EVENTS));
    assert_int_equal(nvml_events_poll(nv, x, 2), 0);
    nvml_close(nv);
}

/* ---- an old library: symbols missing ------------------------------------------------ */

static void test_old_library(void **state)
{
    struct nvml *nv = open_lib(FAKE_NVML_MIN, "gpu name=\"Tesla V100-SXM2-16GB\" mem=16160 "
                                              "bus=00000000:3B:00.0 temp=51 util_gpu=5\n"
                                              "proc 0 77 100\n");
    struct nvml_mig_instance mi;
    struct nvml_mig_profile p;
    struct nvml_sample s;
    struct nvml_gpu g;
    struct nvml_xid x[1];

    assert_false(nvml_has(nv, ALLOT_NVML_F_EVENTS));
    assert_false(nvml_has(nv, ALLOT_NVML_F_MIG_APPLY));
    assert_int_equal(nvml_devices(nv, &g, 1), 1);
    assert_int_equal(g.health, ALLOT_NVML_HEALTHY);
    assert_string_equal(g.bus_id, "0000:3B:00.0"); /* the legacy field */
    assert_int_equal(g.minor, 0);
    assert_int_equal(g.supported, ALLOT_NVML_F_PCI | ALLOT_NVML_F_MINOR);
    assert_int_equal(g.mig_current, -1);
    assert_string_equal(nvml_model_name(g.name, g.memory_mib, cat), "V100-16GB");
    assert_int_equal(nvml_sample(nv, 0, &s), 0);
    assert_int_equal(s.supported, ALLOT_NVML_F_UTIL | ALLOT_NVML_F_MEMORY | ALLOT_NVML_F_TEMP |
                                      ALLOT_NVML_F_PROCS);
    assert_int_equal(s.temp_c, 51);
    assert_int_equal(s.n_procs, 1);
    assert_int_equal(s.procs[0].pid, 77); /* 16-byte entries of the plain call */
    assert_int_equal(s.procs[0].used_bytes, 100LL << 20);
    assert_int_equal(s.procs[0].gi_id, -1);
    assert_int_equal(nvml_events_poll(nv, x, 1), 0);
    assert_int_equal(nvml_mig_set_mode(nv, 0, true, NULL), ALLOT_ESTATE);
    assert_int_equal(nvml_mig_create(nv, 0, "1g.10gb", 0, NULL, &mi), ALLOT_ESTATE);
    assert_int_equal(nvml_mig_destroy(nv, 0, 1), ALLOT_ESTATE);
    assert_int_equal(nvml_mig_find_profile(nv, 0, "1g.10gb", NULL, &p), ALLOT_ESTATE);
    nvml_close(nv);
}

/* ---- allocation failures -------------------------------------------------------------- */

static void test_alloc_failures(void **state)
{
    FILE *f = fopen(cfg_path, "w");
    bool done = false;

    assert_non_null(f);
    fputs("gpu mig=on\ngi 0 0 0\ngpu\nprocs 1 200 10 1\nnvlink 0 1 2\n", f);
    fclose(f);
    setenv("FAKE_NVML_CONFIG", cfg_path, 1);
    for (unsigned long n = 1; !done; n++) {
        char err[256];
        struct nvml_gpu g[2];
        struct nvml_sample s;
        struct nvml *nv;
        int r;

        allot_alloc_fail_at(n, false);
        nv = nvml_open(FAKE_NVML_FULL, err, sizeof(err));
        if (!nv) {
            assert_non_null(strstr(err, "out of memory"));
            continue;
        }
        r = nvml_devices(nv, g, 2);
        assert_true(r == 2 || r == ALLOT_ENOMEM);
        r = nvml_sample(nv, 1, &s);
        assert_true(r == 0 || r == ALLOT_ENOMEM);
        if (r == 0)
            assert_int_equal(s.n_procs, 200);
        done = allot_alloc_count() < n;
        nvml_close(nv);
    }
    allot_alloc_fail_at(0, false);
}

/* ---- the default library name ------------------------------------------------------- */

static void test_default_lib(void **state)
{
    struct nvml *nv = open_lib(NULL, "gpu\ngpu\n");
    struct nvml_gpu g[2];

    assert_int_equal(nvml_devices(nv, g, 2), 2);
    nvml_close(nv);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_library_missing),
        cmocka_unit_test(test_init_fails),
        cmocka_unit_test(test_no_gpus),
        cmocka_unit_test(test_discover_gpus),
        cmocka_unit_test(test_discover_fewer_than_there_are),
        cmocka_unit_test(test_mig_on_and_off),
        cmocka_unit_test(test_mig_find_profile),
        cmocka_unit_test(test_mig_profile_by_catalog_id),
        cmocka_unit_test(test_mig_create_and_destroy),
        cmocka_unit_test(test_mig_failed_ci_rolls_back),
        cmocka_unit_test(test_mig_destroy_in_use),
        cmocka_unit_test(test_mig_mode),
        cmocka_unit_test(test_model_names),
        cmocka_unit_test(test_injected_errors),
        cmocka_unit_test(test_gpu_lost),
        cmocka_unit_test(test_health_ecc_pages_rows),
        cmocka_unit_test(test_sample),
        cmocka_unit_test(test_sample_many_processes),
        cmocka_unit_test(test_sample_procs_keep_failing),
        cmocka_unit_test(test_xid_events),
        cmocka_unit_test(test_events_fail),
        cmocka_unit_test(test_old_library),
        cmocka_unit_test(test_alloc_failures),
    };
    const struct CMUnitTest default_lib[] = {
        cmocka_unit_test(test_default_lib),
    };

    if (argc > 1 && strcmp(argv[1], "--default-lib") == 0)
        return cmocka_run_group_tests(default_lib, setup, teardown);
    return cmocka_run_group_tests(tests, setup, teardown);
}
