/*
 * MIG geometry of one GPU: the rules that decide which GPU instances may
 * coexist, allocation and release of instances in a struct allot_mig_state, the
 * "future options" measure and the placement choice that maximises it, and
 * exhaustive searches (layout feasibility, maximal-layout counting).
 *
 * Rules, for a GPU of model m (all from the catalog, see docs/mig.md):
 *   1. an instance of profile p starts only at a placement listed for p, and
 *      occupies memory slices [start, start + p.memory_slices);
 *   2. instances never share a memory slice;
 *   3. at most p.max_instances instances of p at once;
 *   4. at most m.max_gpu_instances instances in all;
 *   5. compute slices in use never exceed m.compute_slices.
 * Every rule is monotone (removing an instance never breaks one), which the
 * searches rely on: a valid layout's subsets are valid.
 *
 * State invariants kept by allot_mig_alloc/allot_mig_free: inst[0..n_instances) is sorted
 * by start; used_mask is the union of the instances' slices; compute_used is
 * the sum of their compute slices. Functions here are pure over their
 * arguments (no globals, no allocation) and safe to call from any thread on
 * distinct states. Callers: the cluster model and placement policies, the
 * simulator, tests.
 */
#include "allot/mig.h"
#include "allot/common.h"

/* Memory-slice bitmask of [start, start + size). */
static unsigned slice_mask(int start, int size)
{
    return ((1u << size) - 1u) << start;
}

static bool valid_profile(const struct allot_gpu_model *m, int prof)
{
    return m && m->mig && prof >= 0 && prof < m->n_profiles;
}

/* Returns the index of the placement of `prof` starting at `start`, or -1. */
static int find_placement(const struct allot_mig_profile *p, int start)
{
    for (int i = 0; i < p->n_placements; i++) {
        if (p->placements[i].start == start)
            return i;
    }
    return -1;
}

static int count_profile(const struct allot_mig_state *s, int prof)
{
    int n = 0;

    for (int i = 0; i < s->n_instances; i++) {
        if (s->inst[i].profile == prof)
            n++;
    }
    return n;
}

/* Rules 2-5 for placement `pl` of profile `prof` (rule 1 is the caller's:
 * pl comes from the profile's list). */
static bool fits(const struct allot_gpu_model *m, const struct allot_mig_state *s, int prof,
                 const struct allot_mig_placement *pl)
{
    const struct allot_mig_profile *p = &m->profiles[prof];

    if (s->used_mask & slice_mask(pl->start, pl->size))
        return false;
    if (s->n_instances >= m->max_gpu_instances || s->n_instances >= ALLOT_MIG_MAX_INSTANCES)
        return false;
    if (s->compute_used + p->compute_slices > m->compute_slices)
        return false;
    return count_profile(s, prof) < p->max_instances;
}

/* Inserts an instance keeping inst[] sorted by start; the caller checked fits(). */
static void insert_instance(const struct allot_gpu_model *m, struct allot_mig_state *s, int prof,
                            const struct allot_mig_placement *pl)
{
    const struct allot_mig_profile *p = &m->profiles[prof];
    int at = s->n_instances;

    while (at > 0 && s->inst[at - 1].start > pl->start) {
        s->inst[at] = s->inst[at - 1];
        at--;
    }
    s->inst[at].profile = (uint8_t)prof;
    s->inst[at].start = pl->start;
    s->inst[at].size = pl->size;
    s->inst[at].compute = (uint8_t)p->compute_slices;
    s->n_instances++;
    s->used_mask |= (uint8_t)slice_mask(pl->start, pl->size);
    s->compute_used += (uint8_t)p->compute_slices;
}

/*
 * IN: model m, state s, local profile index prof, memory slice start.
 * Returns true when an instance of prof can be created at start now (all
 * five rules); false for an unknown profile, a non-MIG model or a start that
 * is not one of the profile's placements.
 */
bool allot_mig_can_place(const struct allot_gpu_model *m, const struct allot_mig_state *s, int prof,
                         int start)
{
    int i;

    if (!valid_profile(m, prof) || !s)
        return false;
    i = find_placement(&m->profiles[prof], start);
    if (i < 0)
        return false;
    return fits(m, s, prof, &m->profiles[prof].placements[i]);
}

/*
 * IN: m, s, prof; out[0..max) receives the free placements of prof in catalog
 * order (out may be NULL when max is 0). Returns how many are free, which may
 * exceed max; 0 for an unknown profile.
 */
int allot_mig_list_placements(const struct allot_gpu_model *m, const struct allot_mig_state *s,
                              int prof, struct allot_mig_placement *out, int max)
{
    const struct allot_mig_profile *p;
    int n = 0;

    if (!valid_profile(m, prof) || !s)
        return 0;
    p = &m->profiles[prof];
    for (int i = 0; i < p->n_placements; i++) {
        if (!fits(m, s, prof, &p->placements[i]))
            continue;
        if (n < max)
            out[n] = p->placements[i];
        n++;
    }
    return n;
}

/*
 * IN: m, prof, start; IN/OUT: s. Creates the instance and returns 0;
 * ALLOT_EINVAL for an unknown profile, a non-MIG model or an unlisted start;
 * ALLOT_ENOSPC when the slices are taken or a count or compute limit is
 * reached. s is unchanged on error.
 */
int allot_mig_alloc(const struct allot_gpu_model *m, struct allot_mig_state *s, int prof, int start)
{
    const struct allot_mig_profile *p;
    int i;

    if (!valid_profile(m, prof) || !s)
        return ALLOT_EINVAL;
    p = &m->profiles[prof];
    i = find_placement(p, start);
    if (i < 0)
        return ALLOT_EINVAL;
    if (!fits(m, s, prof, &p->placements[i]))
        return ALLOT_ENOSPC;
    insert_instance(m, s, prof, &p->placements[i]);
    return 0;
}

/*
 * IN/OUT: s; IN: start, the first memory slice of an existing instance.
 * Destroys that instance and returns 0, or ALLOT_ENOENT (s unchanged) when no
 * instance starts there.
 */
int allot_mig_free(struct allot_mig_state *s, int start)
{
    struct allot_mig_instance gone;
    int i;

    if (!s)
        return ALLOT_ENOENT;
    for (i = 0; i < s->n_instances; i++) {
        if (s->inst[i].start == start)
            break;
    }
    if (i == s->n_instances)
        return ALLOT_ENOENT;
    gone = s->inst[i];
    for (; i + 1 < s->n_instances; i++)
        s->inst[i] = s->inst[i + 1];
    s->n_instances--;
    /* Clear the vacated entry so equal layouts compare (and hash) equal. */
    s->inst[s->n_instances] = (struct allot_mig_instance){0};
    s->used_mask &= (uint8_t)~slice_mask(gone.start, gone.size);
    s->compute_used -= gone.compute;
    return 0;
}

/*
 * IN: m, s. Returns the sum, over every (profile, placement) pair that could
 * be created on s right now, of the profile's memory slices: bigger profiles
 * count more because they are the ones fragmentation hurts. 0 for a non-MIG
 * model or a full GPU.
 */
int allot_mig_options(const struct allot_gpu_model *m, const struct allot_mig_state *s)
{
    int total = 0;

    if (!m || !m->mig || !s)
        return 0;
    for (int p = 0; p < m->n_profiles; p++) {
        for (int i = 0; i < m->profiles[p].n_placements; i++) {
            if (fits(m, s, p, &m->profiles[p].placements[i]))
                total += m->profiles[p].memory_slices;
        }
    }
    return total;
}

/*
 * IN: m, s, prof; OUT: *out. Picks, among the free placements of prof, the
 * one after which allot_mig_options() is largest; ties go to the highest start so
 * that low slots, where the big profiles' only placements are, stay open.
 * Returns 0, ALLOT_ENOSPC when no placement is free, ALLOT_EINVAL for an
 * unknown profile.
 */
int allot_mig_best_placement(const struct allot_gpu_model *m, const struct allot_mig_state *s,
                             int prof, struct allot_mig_placement *out)
{
    const struct allot_mig_profile *p;
    int best = -1, best_score = -1;

    if (!valid_profile(m, prof) || !s || !out)
        return ALLOT_EINVAL;
    p = &m->profiles[prof];
    for (int i = 0; i < p->n_placements; i++) {
        struct allot_mig_state t;
        int score;

        if (!fits(m, s, prof, &p->placements[i]))
            continue;
        t = *s;
        insert_instance(m, &t, prof, &p->placements[i]);
        score = allot_mig_options(m, &t);
        if (score > best_score ||
            (score == best_score && p->placements[i].start > p->placements[best].start)) {
            best = i;
            best_score = score;
        }
    }
    if (best < 0)
        return ALLOT_ENOSPC;
    *out = p->placements[best];
    return 0;
}

/* ---- exhaustive searches --------------------------------------------------- */

/* Places want[k..n) on s; want[] is sorted so equal profiles are adjacent,
 * and an instance of the same profile as its predecessor takes a higher
 * start, so each set of placements is tried once rather than n! times. */
static bool place_rest(const struct allot_gpu_model *m, struct allot_mig_state *s, const int *want,
                       int n, int k, int prev_start)
{
    const struct allot_mig_profile *p;

    if (k == n)
        return true;
    p = &m->profiles[want[k]];
    for (int i = 0; i < p->n_placements; i++) {
        struct allot_mig_state t;

        if (k > 0 && want[k - 1] == want[k] && p->placements[i].start <= prev_start)
            continue;
        if (!fits(m, s, want[k], &p->placements[i]))
            continue;
        t = *s;
        insert_instance(m, &t, want[k], &p->placements[i]);
        if (place_rest(m, &t, want, n, k + 1, p->placements[i].start))
            return true;
    }
    return false;
}

/*
 * IN: m, profs[0..n) local profile indices (any order, repeats allowed).
 * Returns true when all n instances fit together on an empty GPU of m; false
 * for a non-MIG model or an unknown profile. n == 0 is trivially feasible.
 */
bool allot_mig_layout_feasible(const struct allot_gpu_model *m, const int *profs, int n)
{
    int want[ALLOT_MIG_MAX_INSTANCES];
    struct allot_mig_state s = {0};

    if (n == 0)
        return true;
    if (!m || !m->mig || !profs || n < 0 || n > m->max_gpu_instances || n > ALLOT_MIG_MAX_INSTANCES)
        return false;
    for (int i = 0; i < n; i++) {
        if (!valid_profile(m, profs[i]))
            return false;
        want[i] = profs[i];
    }
    /* Largest memory first (fewest placements: fail early), then by index so
     * that equal profiles are adjacent. Insertion sort: n <= 8. */
    for (int i = 1; i < n; i++) {
        int v = want[i], j = i;

        while (j > 0 && (m->profiles[want[j - 1]].memory_slices < m->profiles[v].memory_slices ||
                         (m->profiles[want[j - 1]].memory_slices == m->profiles[v].memory_slices &&
                          want[j - 1] > v))) {
            want[j] = want[j - 1];
            j--;
        }
        want[j] = v;
    }
    return place_rest(m, &s, want, n, 0, -1);
}

/* One (profile, placement) pair of the model. */
struct candidate {
    int prof;
    const struct allot_mig_placement *pl;
};

/* Visits every valid layout reachable from s by adding candidates at index
 * >= next (each set exactly once, in increasing candidate order) and counts
 * those to which no candidate at all can be added. */
static long count_from(const struct allot_gpu_model *m, const struct allot_mig_state *s,
                       const struct candidate *cand, int n_cand, int next)
{
    bool maximal = true;
    long count = 0;

    for (int i = 0; i < n_cand && maximal; i++) {
        if (fits(m, s, cand[i].prof, cand[i].pl))
            maximal = false;
    }
    if (maximal)
        return 1;
    for (int i = next; i < n_cand; i++) {
        struct allot_mig_state t;

        if (!fits(m, s, cand[i].prof, cand[i].pl))
            continue;
        t = *s;
        insert_instance(m, &t, cand[i].prof, cand[i].pl);
        count += count_from(m, &t, cand, n_cand, i + 1);
    }
    return count;
}

/*
 * IN: m. Returns the number of maximal layouts of an empty GPU of m: distinct
 * sets of (profile, start) that obey the rules and to which no further
 * instance can be added. 0 for a non-MIG model. Exhaustive: fine for the
 * catalog's sizes (at most 16 profiles x 8 placements, 8 instances).
 */
long allot_mig_count_maximal_layouts(const struct allot_gpu_model *m)
{
    struct candidate cand[ALLOT_MIG_MAX_PROFILES * ALLOT_MIG_MAX_PLACEMENTS];
    struct allot_mig_state s = {0};
    int n = 0;

    if (!m || !m->mig)
        return 0;
    for (int p = 0; p < m->n_profiles; p++) {
        for (int i = 0; i < m->profiles[p].n_placements; i++) {
            cand[n].prof = p;
            cand[n].pl = &m->profiles[p].placements[i];
            n++;
        }
    }
    return count_from(m, &s, cand, n, 0);
}
