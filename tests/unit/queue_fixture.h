/*
 * Test fixture shared by the queue's unit tests (test_queue.c, test_queue_share.c,
 * test_queue_twin.c): the queue options most tests start from (fair
 * order, best fit, quotas with borrowing, preemption with a 30 s grace,
 * backfill, aging after an hour). Include after cmocka.h.
 */
#ifndef ALLOT_TESTS_QUEUE_FIXTURE_H
#define ALLOT_TESTS_QUEUE_FIXTURE_H

#include "allot/queue.h"

static const struct allot_queue_opts base = {.order = "fair",
                                             .placement = "bestfit",
                                             .quotas = true,
                                             .borrowing = true,
                                             .preemption = true,
                                             .backfill = true,
                                             .grace_s = 30,
                                             .min_runtime_s = 0,
                                             .aging_s = 3600,
                                             .half_life_s = 3600};

#endif
