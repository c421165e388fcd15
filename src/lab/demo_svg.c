/* demo_svg.c - the timeline of `tether demo --svg FILE`: three panels
 * over the run's seconds (statements a second; p99 latency in ms on a log
 * scale; retries and errors a second), a dashed line and a label at each
 * fault's start, shaded while it is being done and held; a second in
 * which nothing succeeded has no latency (a gap). Plain SVG 1.1, no script, no
 * fonts beyond the generic families. */
#include "demo.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define W 960
#define PANEL_H 150
#define GAP 34
#define LEFT 64
#define RIGHT 16
#define TOP 96

typedef struct frame {
    FILE *f;
    int nsecs;
    double plot_w;
} frame;

static double x_of(const frame *fr, double sec) {
    return LEFT + fr->plot_w * sec / (fr->nsecs > 1 ? fr->nsecs : 1);
}

static void panel(const frame *fr, int y, const char *title,
                  const char *top_label, const char *bottom_label) {
    fprintf(fr->f,
            "<rect x='%d' y='%d' width='%.0f' height='%d' fill='#fafafa' "
            "stroke='#ccc'/>\n"
            "<text x='%d' y='%d' font-size='13' fill='#333'>%s</text>\n"
            "<text x='%d' y='%d' font-size='11' fill='#666' "
            "text-anchor='end'>%s</text>\n"
            "<text x='%d' y='%d' font-size='11' fill='#666' "
            "text-anchor='end'>%s</text>\n",
            LEFT, y, fr->plot_w, PANEL_H, LEFT, y - 6, title, LEFT - 6, y + 10,
            top_label, LEFT - 6, y + PANEL_H, bottom_label);
}

/* A polyline of v[0..n) (per second, at the second's middle) scaled to
 * [0, vmax] (log10 with logscale) in the panel at y. */
static void series(const frame *fr, int y, const double *v, double vmax,
                   int logscale, const char *color) {
    int open = 0;
    for (int s = 0; s < fr->nsecs; s++) {
        double val = v[s], frac;
        if (val < 0) { /* no value this second: a gap */
            if (open)
                fprintf(fr->f, "'/>\n");
            open = 0;
            continue;
        }
        if (!open)
            fprintf(fr->f,
                    "<polyline fill='none' stroke='%s' stroke-width='1.6' "
                    "points='",
                    color);
        open = 1;
        if (logscale)
            frac = val <= 0.1 ? 0 : log10(val / 0.1) / log10(vmax / 0.1);
        else
            frac = vmax > 0 ? val / vmax : 0;
        frac = frac < 0 ? 0 : frac > 1 ? 1 : frac;
        fprintf(fr->f, "%.1f,%.1f ", x_of(fr, s + 0.5),
                y + PANEL_H - frac * (PANEL_H - 4));
    }
    if (open)
        fprintf(fr->f, "'/>\n");
}

static double max_of(const double *v, int n, double floor) {
    double m = floor;
    for (int i = 0; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

static void markers(const frame *fr, const fault_rec *faults, int nfaults,
                    int y0, int y1) {
    for (int i = 0; i < nfaults; i++) {
        const fault_rec *r = &faults[i];
        if (!r->start_ms)
            continue;
        double x = x_of(fr, (double)r->start_ms / 1000.0);
        int64_t end_ms = r->inforce_ms + r->e.hold_ms;
        if (end_ms > r->start_ms) { /* being done, then held */
            double x2 = x_of(fr, (double)end_ms / 1000.0);
            fprintf(fr->f,
                    "<rect x='%.1f' y='%d' width='%.1f' height='%d' "
                    "fill='#d33' fill-opacity='0.08'/>\n",
                    x, y0, x2 - x, y1 - y0);
        }
        fprintf(fr->f,
                "<line x1='%.1f' y1='%d' x2='%.1f' y2='%d' stroke='#d33' "
                "stroke-dasharray='4 3'/>\n"
                "<text x='%.1f' y='%d' font-size='11' fill='#b00' "
                "transform='rotate(-30 %.1f %d)'>%s%s</text>\n",
                x, y0 - 24, x, y1, x + 2, y0 - 28, x + 2, y0 - 28,
                fault_kind_name(r->e.kind), r->applied ? "" : " (not done)");
    }
}

int demo_svg(const char *path, const sec_stats *secs, int nsecs,
             const fault_rec *faults, int nfaults, char *why, size_t n) {
    if (nsecs < 1) {
        snprintf(why, n, "nothing to draw (the run lasted under a second)");
        return -1;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(why, n, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    double ops[nsecs], p99[nsecs], retries[nsecs], errs[nsecs];
    uint64_t prev = 0;
    for (int s = 0; s < nsecs; s++) {
        ops[s] = (double)secs[s].ops;
        p99[s] = secs[s].lat.n ? (double)lat_hist_pct(&secs[s].lat, 99) / 1e6
                               : -1; /* nothing succeeded: no latency */
        uint64_t r = secs[s].retries >= prev ? secs[s].retries : prev;
        retries[s] = (double)(r - prev);
        prev = r;
        errs[s] = (double)(secs[s].app_errors + secs[s].write_failures);
    }
    frame fr = {f, nsecs, W - LEFT - RIGHT};
    int y[3] = {TOP, TOP + PANEL_H + GAP, TOP + 2 * (PANEL_H + GAP)};
    int h = y[2] + PANEL_H + 40;
    fprintf(f,
            "<?xml version='1.0' encoding='UTF-8'?>\n"
            "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' "
            "viewBox='0 0 %d %d' font-family='sans-serif'>\n"
            "<rect width='100%%' height='100%%' fill='white'/>\n"
            "<text x='%d' y='20' font-size='15' font-weight='bold'>tether "
            "demo: one pool under faults</text>\n",
            W, h, W, h, LEFT);
    char top[32];
    double m = max_of(ops, nsecs, 1);
    snprintf(top, sizeof(top), "%.0f", m);
    panel(&fr, y[0], "statements a second", top, "0");
    series(&fr, y[0], ops, m, 0, "#1f77b4");
    double pm = max_of(p99, nsecs, 1);
    pm = pow(10, ceil(log10(pm)));
    snprintf(top, sizeof(top), "%g ms", pm);
    panel(&fr, y[1], "p99 latency of the statements that succeeded (log)", top,
          "0.1 ms");
    series(&fr, y[1], p99, pm, 1, "#ff7f0e");
    m = max_of(retries, nsecs, 1);
    m = max_of(errs, nsecs, m);
    snprintf(top, sizeof(top), "%.0f", m);
    panel(&fr, y[2],
          "retries (green) and failures the application saw (red) a second",
          top, "0");
    series(&fr, y[2], retries, m, 0, "#2ca02c");
    series(&fr, y[2], errs, m, 0, "#d62728");
    markers(&fr, faults, nfaults, y[0], y[2] + PANEL_H);
    for (int s = 0; s <= nsecs; s += nsecs > 30 ? 10 : 5)
        fprintf(f,
                "<text x='%.1f' y='%d' font-size='11' fill='#666' "
                "text-anchor='middle'>%d s</text>\n",
                x_of(&fr, s), y[2] + PANEL_H + 16, s);
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0) {
        snprintf(why, n, "writing %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}
