/*
 * A job that tries to outlive its task (test_agent.py): it leaves its
 * session, then for CHAIN seconds forks and lets the parent exit, as fast
 * as it can, so that each process lives only a moment (a kill loop over
 * cgroup.procs keeps finding pids that are already gone); then it sleeps
 * LIFE seconds. Bounded: it always ends after LIFE seconds.
 * Usage: fork-chain CHAIN LIFE
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    double chain = argc > 1 ? strtod(argv[1], NULL) : 3,
           life = argc > 2 ? strtod(argv[2], NULL) : 30;
    double t0 = now();

    if (fork() > 0)
        _exit(0);
    setsid();
    while (now() - t0 < chain) {
        pid_t p = fork();
        if (p > 0)
            _exit(0);
        if (p < 0) { /* at pids.max: wait for a pid to come free */
            struct timespec d = {0, 100 * 1000};
            nanosleep(&d, NULL);
        }
    }
    while (now() - t0 < life)
        sleep(1);
    return 0;
}
