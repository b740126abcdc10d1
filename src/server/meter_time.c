/*
 * The metering's time arguments (meter.h): hours, months and dates in UTC,
 * as usage, invoices and the roll-up's hour and month bounds read them.
 * Pure.
 */
#include "meter.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

int64_t meter_floor_hour(int64_t t)
{
    return t - ((t % METER_HOUR) + METER_HOUR) % METER_HOUR;
}

void meter_month_of(int64_t t, int64_t *start, int64_t *end)
{
    time_t tt = (time_t)t;
    struct tm tm;
    int y, m;

    gmtime_r(&tt, &tm);
    y = tm.tm_year + 1900;
    m = tm.tm_mon + 1;
    *start = days_from_civil(y, m, 1) * 86400;
    *end = days_from_civil(m == 12 ? y + 1 : y, m == 12 ? 1 : m + 1, 1) * 86400;
}

/* Whether s is `shape` with a digit at each 'D' and the same byte
 * elsewhere (sscanf's %d would take spaces and signs: "2026-+9-01"). */
static bool shaped(const char *s, const char *shape)
{
    for (; *shape; s++, shape++)
        if (*shape == 'D' ? !isdigit((unsigned char)*s) : *s != *shape)
            return false;
    return !*s;
}

bool meter_parse_month(const char *s, int64_t *start, int64_t *end)
{
    int y, m, n = 0;

    if (!s || !shaped(s, "DDDD-DD") || sscanf(s, "%4d-%2d%n", &y, &m, &n) != 2 || s[n] || n != 7 ||
        m < 1 || m > 12 || y < 1970 || y > 9999)
        return false;
    *start = days_from_civil(y, m, 1) * 86400;
    *end = days_from_civil(m == 12 ? y + 1 : y, m == 12 ? 1 : m + 1, 1) * 86400;
    return true;
}

bool meter_parse_date(const char *s, int64_t *out)
{
    int y, m, d, n = 0;

    if (!s || !shaped(s, "DDDD-DD-DD") || sscanf(s, "%4d-%2d-%2d%n", &y, &m, &d, &n) != 3 || s[n] ||
        n != 10 || m < 1 || m > 12 || d < 1 || y < 1970 || y > 9999)
        return false;
    /* a day the month has: 2027-02-31 is no date (it would read March 3) */
    int64_t days = days_from_civil(y, m, d);
    if (d > 28 && days_from_civil(m == 12 ? y + 1 : y, m == 12 ? 1 : m + 1, 1) <= days)
        return false;
    *out = days * 86400;
    return true;
}

bool meter_parse_time(const char *s, int64_t *out)
{
    int64_t end;

    if (!s || !*s)
        return false;
    if (meter_parse_month(s, out, &end))
        return true;
    if (meter_parse_date(s, out))
        return true;
    char *e;
    long long v = isdigit((unsigned char)*s) ? strtoll(s, &e, 10) : -1;
    if (v < 0 || *e || e == s || v > 253402300799LL)
        return false;
    *out = v;
    return true;
}
