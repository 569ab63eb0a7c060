#!/usr/bin/env python3
"""Checks the Grafana dashboards in dashboards/ against a live Prometheus.

Standard library only. Run by scripts/check-dashboards.sh, which starts a cuzk
daemon (sim backend) under load and a Prometheus scraping it; it can also be
pointed at any Prometheus that scrapes cuzk:

    scripts/check_dashboards.py --prometheus http://127.0.0.1:9090

Static checks, per dashboard: valid JSON with uid, title, schemaVersion and
panels; dashboard uids unique across files; panel ids unique within a
dashboard (rows' nested panels included); every `datasource` reference is an
object whose uid is the one provisioned in
deploy/grafana/provisioning/datasources (no datasource names, no strings);
every query panel has targets with an expr and unique refIds; every cuzk_*
metric an expression uses is in the catalogue table of docs/metrics.md.

Live checks, per PromQL expression (panel targets and templating queries):
Grafana's variables are substituted ($__rate_interval, $__interval, $__range,
...; dashboard variables by `.*` and again by the first real value their own
query returns), and each expression is evaluated with /api/v1/query_range
over the last --window seconds: it must parse and return at least one series
with at least one non-NaN sample. On failure the expression and Prometheus's
answer are printed.

Last line: `dashboards: N passed, M failed`; exit status 1 when M > 0.
"""

import argparse
import json
import math
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class Checker:
    def __init__(self, args):
        self.args = args
        self.passed = 0
        self.failed = 0
        self.verbose = args.verbose
        # Metric names of the catalogue table in docs/metrics.md.
        catalogue = Path(args.catalogue)
        self.catalogue = (set(re.findall(r"^\| `(cuzk_[a-z0-9_]+)`", catalogue.read_text(), re.M))
                          if catalogue.is_file() else None)

    def ok(self, what, detail=""):
        self.passed += 1
        if self.verbose:
            print(f"PASS {what}{(' ' + detail) if detail else ''}")

    def fail(self, what, detail):
        self.failed += 1
        print(f"FAIL {what}")
        for line in str(detail).rstrip().splitlines():
            print(f"     {line}")

    # ------------------------------------------------------------------ static

    def provisioned_uids(self):
        """uids of datasources in the provisioning files (a tiny YAML reader:
        `uid: value` lines under `datasources:`)."""
        uids = []
        files = sorted(Path(self.args.datasources).glob("*.y*ml"))
        for f in files:
            for line in f.read_text().splitlines():
                m = re.match(r"""^\s*-?\s*uid:\s*["']?([A-Za-z0-9_.-]+)["']?\s*(#.*)?$""", line)
                if m:
                    uids.append(m.group(1))
        return files, uids

    def walk_datasources(self, node, path, out):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "datasource":
                    out.append((f"{path}.{k}", v))
                else:
                    self.walk_datasources(v, f"{path}.{k}", out)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                self.walk_datasources(v, f"{path}[{i}]", out)

    def all_panels(self, panels):
        for p in panels:
            yield p
            yield from self.all_panels(p.get("panels", []))

    def static_checks(self, dashboards, ds_uid):
        uids = {}
        for path, dash in dashboards:
            name = path.name
            problems = []
            for key in ("uid", "title", "schemaVersion", "panels"):
                if key not in dash:
                    problems.append(f"missing top-level key {key!r}")
            uid = dash.get("uid")
            if uid:
                if uid in uids:
                    problems.append(f"uid {uid!r} also used by {uids[uid]}")
                uids[uid] = name
                if not re.fullmatch(r"[A-Za-z0-9_-]{1,40}", uid):
                    problems.append(f"uid {uid!r}: use at most 40 of [A-Za-z0-9_-]")
            if "id" in dash and dash["id"] is not None:
                problems.append("top-level id must be null or absent (import assigns it)")
            ids = {}
            for p in self.all_panels(dash.get("panels", [])):
                pid = p.get("id")
                if pid is None:
                    problems.append(f"panel {p.get('title')!r} has no id")
                elif pid in ids:
                    problems.append(f"panel id {pid} used by {ids[pid]!r} and {p.get('title')!r}")
                else:
                    ids[pid] = p.get("title")
                if p.get("type") in ("row", "text"):
                    continue
                tgts = p.get("targets") or []
                if not tgts:
                    problems.append(f"panel {p.get('title')!r} has no targets")
                refs = [t.get("refId") for t in tgts]
                if len(set(refs)) != len(refs) or None in refs:
                    problems.append(f"panel {p.get('title')!r}: refIds missing or repeated: {refs}")
                for t in tgts:
                    if not (t.get("expr") or "").strip():
                        problems.append(f"panel {p.get('title')!r} target {t.get('refId')}: empty expr")
                if "datasource" not in p:
                    problems.append(f"panel {p.get('title')!r} has no datasource (would use the default)")
            refs = []
            self.walk_datasources(dash, "$", refs)
            for where, ds in refs:
                if not isinstance(ds, dict):
                    problems.append(f"{where}: datasource {ds!r} is not an object with a uid (hard-coded name?)")
                    continue
                if ds.get("uid") != ds_uid:
                    problems.append(f"{where}: datasource uid {ds.get('uid')!r} is not the provisioned {ds_uid!r}")
                if ds.get("type") not in (None, "prometheus"):
                    problems.append(f"{where}: datasource type {ds.get('type')!r}")
                if set(ds) - {"type", "uid"}:
                    problems.append(f"{where}: unexpected datasource keys {sorted(set(ds) - {'type', 'uid'})}")
            if self.catalogue is not None:
                exprs = [t.get("expr") or "" for p in self.all_panels(dash.get("panels", []))
                         for t in p.get("targets") or []]
                exprs += [str(self.variable_query(v)) for v in dash.get("templating", {}).get("list", [])]
                for expr in exprs:
                    for metric in re.findall(r"\bcuzk_[a-z0-9_]+", expr):
                        base = re.sub(r"_(bucket|sum|count)$", "", metric)
                        if metric not in self.catalogue and base not in self.catalogue:
                            problems.append(f"metric {metric} is not in docs/metrics.md")
            text = json.dumps(dash)
            if re.search(r"\$\{?DS_|\"Prometheus\"", text):
                problems.append("refers to a datasource by name or import input (DS_...)")
            if problems:
                self.fail(f"{name}: JSON checks", "\n".join(problems))
            else:
                self.ok(f"{name}: JSON checks", f"({len(ids)} panels, {len(refs)} datasource refs)")

    # -------------------------------------------------------------------- live

    def api(self, endpoint, params):
        url = f"{self.args.prometheus.rstrip('/')}/api/v1/{endpoint}?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=self.args.timeout) as r:
                return json.loads(r.read().decode())
        except urllib.error.HTTPError as e:
            body = e.read().decode(errors="replace")
            try:
                return json.loads(body)
            except ValueError:
                return {"status": "error", "error": f"HTTP {e.code}: {body[:500]}"}
        except Exception as e:  # noqa: BLE001 - reported, not raised
            return {"status": "error", "error": f"{type(e).__name__}: {e}"}

    def query_range(self, expr):
        end = time.time()
        return self.api("query_range", {
            "query": expr,
            "start": f"{end - self.args.window:.3f}",
            "end": f"{end:.3f}",
            "step": self.args.step,
        })

    @staticmethod
    def has_data(answer):
        """(series, non-NaN samples) of a query_range answer."""
        result = answer.get("data", {}).get("result", [])
        if answer.get("data", {}).get("resultType") == "scalar":
            result = [{"values": [result]}]
        samples = 0
        for series in result:
            for _, v in series.get("values", []) or ([series["value"]] if "value" in series else []):
                try:
                    if not math.isnan(float(v)):
                        samples += 1
                except ValueError:
                    pass
        return len(result), samples

    def substitute(self, expr, values):
        builtins = {
            "__rate_interval": self.args.rate_interval,
            "__interval": self.args.interval,
            "__interval_ms": str(int(parse_duration(self.args.interval) * 1000)),
            "__range": f"{int(self.args.window)}s",
            "__range_s": str(int(self.args.window)),
            "__range_ms": str(int(self.args.window * 1000)),
        }
        allv = dict(builtins)
        allv.update(values)

        def repl(m):
            name = m.group("n1") or m.group("n2") or m.group("n3")
            if name in allv:
                return allv[name]
            return m.group(0)

        pattern = r"\$\{(?P<n1>\w+)(?::\w+)?\}|\[\[(?P<n2>\w+)\]\]|\$(?P<n3>\w+)"
        out = re.sub(pattern, repl, expr)
        left = re.findall(pattern, out)
        return out, [a or b or c for a, b, c in left]

    def check_expr(self, what, expr, values):
        q, unknown = self.substitute(expr, values)
        if unknown:
            self.fail(what, f"unknown variables {unknown} in:\n{expr}")
            return
        answer = self.query_range(q)
        if answer.get("status") != "success":
            self.fail(what, f"expr: {q}\nprometheus: {answer.get('errorType', '')} {answer.get('error', answer)}")
            return
        series, samples = self.has_data(answer)
        if series == 0:
            self.fail(what, f"expr: {q}\nprometheus: success, but no series in the last {self.args.window:.0f}s "
                            f"(answer: {json.dumps(answer)[:300]})")
        elif samples == 0:
            self.fail(what, f"expr: {q}\nprometheus: {series} series, every sample NaN in the last {self.args.window:.0f}s")
        else:
            self.ok(what, f"({series} series, {samples} samples)")

    def variable_query(self, var):
        q = var.get("query")
        if isinstance(q, dict):
            q = q.get("query", "")
        return q or var.get("definition", "")

    def label_values_expr(self, query):
        """Translates Grafana's label_values(sel, label) to PromQL."""
        m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", query, re.S)
        if m:
            return f"count by ({m.group(2)}) ({m.group(1)})", m.group(2)
        m = re.fullmatch(r"\s*label_values\(\s*(\w+)\s*\)\s*", query)
        if m:
            return f"count by ({m.group(1)}) ({{{m.group(1)}!=\"\"}})", m.group(1)
        m = re.fullmatch(r"\s*query_result\((.*)\)\s*", query, re.S)
        if m:
            return m.group(1), None
        return None, None

    def live_checks(self, dashboards):
        for path, dash in dashboards:
            name = path.name
            variables = dash.get("templating", {}).get("list", [])
            wild = {}
            first = {}
            # Templating queries, in order (later ones may use earlier ones).
            for var in variables:
                vname = var.get("name")
                vtype = var.get("type")
                if vtype == "query":
                    query = self.variable_query(var)
                    expr, label = self.label_values_expr(query)
                    if expr is None:
                        self.fail(f"{name}: variable ${vname}", f"cannot translate query {query!r}")
                        wild[vname] = first[vname] = ".*"
                        continue
                    self.check_expr(f"{name}: variable ${vname} = {query}", expr, wild)
                    q, _ = self.substitute(expr, first)
                    answer = self.api("query", {"query": q})
                    vals = sorted({s["metric"].get(label, "") for s in answer.get("data", {}).get("result", [])}
                                  if label else [])
                    wild[vname] = var.get("allValue") or ".*"
                    first[vname] = promql_regex_escape(vals[0]) if vals else wild[vname]
                elif vtype in ("custom", "constant", "textbox", "interval"):
                    opts = [o.get("value") for o in var.get("options", []) if o.get("value")]
                    cur = var.get("current", {}).get("value")
                    val = (opts[0] if opts else cur if isinstance(cur, str) else var.get("query", "")) or ".*"
                    wild[vname] = first[vname] = str(val)
                elif vtype == "datasource":
                    self.fail(f"{name}: variable ${vname}", "datasource variables are not allowed (one provisioned uid)")
            # Panel targets.
            for p in self.all_panels(dash.get("panels", [])):
                for t in p.get("targets") or []:
                    expr = t.get("expr")
                    if not expr:
                        continue
                    what = f"{name}: {p.get('title')!r} [{t.get('refId')}]"
                    self.check_expr(what, expr, wild)
                    if first != wild and any(f"${v}" in expr or f"${{{v}" in expr for v in first):
                        self.check_expr(what + " (first value of each variable)", expr, first)


def promql_regex_escape(value):
    """A label value as a regex inside a PromQL string, as Grafana writes a
    multi-value variable: regex metacharacters get a backslash, itself escaped
    for the double-quoted string."""
    return "".join("\\\\" + c if c in r"\.^$*+?()[]{}|" else c for c in value)


def parse_duration(s):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)", s)
    if not m:
        raise SystemExit(f"bad duration {s!r}")
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prometheus", help="Prometheus base URL; without it only the static checks run")
    ap.add_argument("--dashboards", default=str(ROOT / "dashboards"))
    ap.add_argument("--datasources", default=str(ROOT / "deploy/grafana/provisioning/datasources"))
    ap.add_argument("--catalogue", default=str(ROOT / "docs/metrics.md"),
                    help="metric catalogue: every metric a dashboard uses must be listed there")
    ap.add_argument("--rate-interval", default="4s", help="value of $__rate_interval (4 x scrape interval)")
    ap.add_argument("--interval", default="1s", help="value of $__interval")
    ap.add_argument("--window", type=float, default=30, help="seconds of history each expression is evaluated over")
    ap.add_argument("--step", default="1s")
    ap.add_argument("--timeout", type=float, default=10)
    ap.add_argument("--expect", action="append", default=[], metavar="EXPR",
                    help="also require data from EXPR (load coverage: failed jobs, retries, ...); repeatable")
    ap.add_argument("-v", "--verbose", action="store_true", help="print passing checks too")
    args = ap.parse_args()

    c = Checker(args)
    files, uids = c.provisioned_uids()
    if len(set(uids)) != 1:
        c.fail("provisioned datasource", f"expected exactly one datasource uid in {args.datasources}, "
                                         f"found {uids} in {[str(f) for f in files]}")
        ds_uid = None
    else:
        ds_uid = uids[0]
        c.ok("provisioned datasource", f"uid {ds_uid}")

    dashboards = []
    paths = sorted(Path(args.dashboards).glob("*.json"))
    if not paths:
        c.fail("dashboards", f"no *.json in {args.dashboards}")
    for path in paths:
        try:
            dashboards.append((path, json.loads(path.read_text())))
        except ValueError as e:
            c.fail(f"{path.name}: JSON", str(e))

    c.static_checks(dashboards, ds_uid)
    if c.catalogue:
        used = set()
        for _, dash in dashboards:
            for m in re.findall(r"\bcuzk_[a-z0-9_]+", json.dumps(dash)):
                used.add(re.sub(r"_(bucket|sum|count)$", "", m))
        unused = sorted(c.catalogue - used)
        if unused:
            print(f"note: catalogue metrics no dashboard uses: {', '.join(unused)}")
    if args.prometheus:
        c.live_checks(dashboards)
        for expr in args.expect:
            c.check_expr(f"load produced {expr}", expr, {})
    print(f"dashboards: {c.passed} passed, {c.failed} failed")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
