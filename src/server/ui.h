/*
 * Static files of the web dashboard under /ui/ (ui.c).
 */
#ifndef ALLOT_SERVER_UI_H
#define ALLOT_SERVER_UI_H

#include <stdbool.h>

struct req;

/* True when the request path belongs to the dashboard (/ui or /ui/...). */
bool ui_path(const char *path);
/* Answers a dashboard request from the ui-dir folder. Returns 0. */
int ui_serve(struct req *r);

#endif
