#!/bin/sh
# `foldplan report` rendered in a real browser (Debian's chromium, headless).
#   cli_report_browser.sh FOLDPLAN SOURCE_DIR BUILD_DIR
# Builds a report from the fixture plan tests/data/validate/pp2_cp2_ep4.plan.json
# with the matching foldbench measurements and a `simulate --json` of the
# plan, and one from a plan searched here with `foldplan plan -o` (48 of the
# cluster's 128 GPUs: 80 idle) with its simulation, then for each: injects a harness (first in <head>:
# records window errors and console.error; last in <body>: measures every
# <svg>, counts the rank cells) and checks, from chromium --dump-dom, that
#   every SVG is present with a non-zero rendered size (and the seven or
#     six expected ones are there),
#   every rank 0..world-1 has exactly one cell in the map, every idle GPU one,
#   the page logged no error (harness and chromium's console log);
# and that the page itself loads nothing: no script, no src/href, no url().
# A screenshot of the searched plan's report lands in BUILD_DIR/report_screenshot.png.
# Installs chromium with apt-get when missing and possible (CI runs as
# root on Debian); without it the test is skipped (exit 77).
set -u
foldplan=$1 src=$2 build=$3
work="$build/cli_report_browser"
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

browser=""
for b in chromium chromium-browser; do command -v "$b" >/dev/null 2>&1 && browser=$b && break; done
if [ -z "$browser" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing chromium (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >"$work/apt.log" 2>&1 ||
    { apt-get update >>"$work/apt.log" 2>&1 &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >>"$work/apt.log" 2>&1; }
  command -v chromium >/dev/null 2>&1 && browser=chromium
fi
[ -n "$browser" ] || { echo "SKIP: no chromium (install it: apt-get install chromium)"; exit 77; }

plan="$src/tests/data/validate/pp2_cp2_ep4.plan.json"
"$foldplan" simulate --plan "$plan" --json >"$work/sim.json" || fail "simulate --json failed"
"$foldplan" report --plan "$plan" --measurements "$src/tests/data/inputs/measurements_pp2_cp2_ep4.json" \
  --simulation "$work/sim.json" -o "$work/full.html" || fail "report (fixture plan) failed"
"$foldplan" plan --cluster h100-dgx-16n --model mixtral-8x7b --gpus 48 --top 12 \
  -o "$work/searched.plan.json" >/dev/null || fail "plan -o failed"
"$foldplan" simulate --plan "$work/searched.plan.json" --json >"$work/searched.sim.json" || fail "simulate --json failed"
"$foldplan" report --plan "$work/searched.plan.json" --simulation "$work/searched.sim.json" --color-by dp \
  -o "$work/searched.html" || fail "report (searched plan) failed"

# A script, a source or a link in the page itself would need the network or break "self-contained".
for page in full searched; do
  if grep -Eq '<script|src=|href=|url\(["'"'"']?[a-z]+:|@import' "$work/$page.html"; then
    fail "$page.html loads something: $(grep -Eo '<script|src=[^ ]*|href=[^ ]*|url\([^)]*\)|@import' "$work/$page.html" | head -3)"
  fi
done

HEAD='<script>window.__errors=[];window.addEventListener("error",function(e){window.__errors.push("error: "+e.message)});(function(){var c=console.error;console.error=function(){window.__errors.push("console.error: "+Array.prototype.join.call(arguments," "));c.apply(console,arguments)}})();</script>'
TAIL='<script>(function(){var r={errors:window.__errors,svgs:[],ranks:{},idle:0,zero_cells:0};document.querySelectorAll("svg").forEach(function(s){var b=s.getBoundingClientRect();r.svgs.push({cls:s.getAttribute("class"),w:b.width,h:b.height})});document.querySelectorAll("svg.rankmap [data-rank]").forEach(function(e){var k=e.getAttribute("data-rank");r.ranks[k]=(r.ranks[k]||0)+1;var b=e.getBoundingClientRect();if(!(b.width>0&&b.height>0))r.zero_cells++});r.idle=document.querySelectorAll("svg.rankmap [data-idle]").length;var p=document.createElement("pre");p.id="foldplan-test-result";p.textContent=JSON.stringify(r);document.body.appendChild(p)})();</script>'

run_browser() {  # FILE.html, then chromium's extra flags
  file=$1; shift
  timeout 60 "$browser" --headless=new --no-sandbox --disable-gpu --no-first-run --disable-extensions \
    --user-data-dir="$work/profile" --enable-logging=stderr --v=0 "$@" "file://$file"
}

for page in full searched; do
  probe="$work/$page.probe.html"
  python3 - "$work/$page.html" "$probe" "$HEAD" "$TAIL" <<'PY' || fail "cannot inject the harness into $page.html"
import sys
page, probe, head, tail = sys.argv[1:5]
html = open(page, encoding="utf-8").read()
assert html.count("<head>") == 1 and html.count("</body>") == 1
html = html.replace("<head>", "<head>" + head, 1).replace("</body>", tail + "</body>", 1)
open(probe, "w", encoding="utf-8").write(html)
PY
  start=$(date +%s)
  run_browser "$probe" --dump-dom >"$work/$page.dom.html" 2>"$work/$page.chromium.log" ||
    { cat "$work/$page.chromium.log"; fail "chromium --dump-dom failed on $page"; }
  echo "$page: chromium rendered in $(( $(date +%s) - start )) s"
  if [ "$page" = full ]; then expect_svgs=7 expect_plan=$plan; else expect_svgs=6 expect_plan=$work/searched.plan.json; fi
  python3 - "$work/$page.dom.html" "$expect_plan" "$expect_svgs" "$work/$page.chromium.log" <<'PY' || fail "$page: checks failed"
import html, json, re, sys
dom, plan_path, expect_svgs, log = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
m = re.search(r'<pre id="foldplan-test-result">(.*?)</pre>', open(dom, encoding="utf-8").read(), re.S)
assert m, "no harness result in the rendered DOM"
r = json.loads(html.unescape(m.group(1)))
plan = json.load(open(plan_path))
world = plan["candidates"][0]["layout"]["world"]
cluster = plan["inputs"]["cluster"]["spec"]
gpus = cluster["nodes"] * cluster["gpus_per_node"]
problems = []
if r["errors"]:
    problems.append("page errors: %s" % r["errors"])
console = [l for l in open(log, errors="replace") if "CONSOLE" in l]
if console:
    problems.append("console messages: %s" % console[:3])
if len(r["svgs"]) != expect_svgs:
    problems.append("expected %d svgs, found %d: %s" % (expect_svgs, len(r["svgs"]), r["svgs"]))
for s in r["svgs"]:
    if not (s["w"] > 0 and s["h"] > 0):
        problems.append("svg %s rendered %sx%s" % (s["cls"], s["w"], s["h"]))
if sorted(int(k) for k in r["ranks"]) != list(range(world)):
    problems.append("rank cells: expected ranks 0..%d, found %d distinct" % (world - 1, len(r["ranks"])))
twice = [k for k, n in r["ranks"].items() if n != 1]
if twice:
    problems.append("ranks drawn more than once: %s" % twice[:10])
if r["zero_cells"]:
    problems.append("%d rank cells rendered with zero size" % r["zero_cells"])
if r["idle"] != gpus - world:
    problems.append("idle cells: expected %d (%d GPUs - %d ranks), found %d" % (gpus - world, gpus, world, r["idle"]))
print("%s: %d svgs (%s), %d rank cells, %d idle" % (dom, len(r["svgs"]),
      ", ".join("%s %dx%d" % (s["cls"], s["w"], s["h"]) for s in r["svgs"]), len(r["ranks"]), r["idle"]))
for p in problems:
    print("  " + p)
sys.exit(1 if problems else 0)
PY
done

run_browser "$work/searched.html" --screenshot="$build/report_screenshot.png" --window-size=1400,2400 --hide-scrollbars \
  >"$work/screenshot.log" 2>&1 || { cat "$work/screenshot.log"; fail "chromium --screenshot failed"; }
[ -s "$build/report_screenshot.png" ] || fail "no screenshot written"
echo "screenshot: $build/report_screenshot.png"
echo "PASS"
