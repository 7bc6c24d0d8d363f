#!/usr/bin/env python3
"""Mutation test of the command-line tools: malformed clusters, costs, plans, options and output
paths derived from the shipped files. Every case must end in a clear error or a correct result:

  * no signal and no hang (each command runs under a timeout);
  * an error exits with a code in 1..99 and names the file (or the option) it is about; where the
    issue that asked for this test named the message, the message is checked too;
  * outputs that existed before a failing command are byte-identical afterwards (and no temporary
    file is left beside them); special files given as outputs stay what they were.

Usage: mutation_test.py GROUP BIN_DIR SOURCE_DIR   (GROUP: clusters costs plans run options outputs)
Prints one line per failed case and a summary "GROUP: N cases, F failed"; exits 1 if any failed.
"""

import json
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import time

KEEP = b"keep me: an output written before this command\n"


class Runner:
    def __init__(self, group, bin_dir, src):
        self.group = group
        self.bin = bin_dir
        self.src = src
        self.work = tempfile.mkdtemp(prefix=f"octo-mutation-{group}-")
        self.cases = 0
        self.failures = []
        self.env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                        OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_btl_base_warn_component_unused="0")

    # ---- helpers -------------------------------------------------------------------------------
    def path(self, name):
        return os.path.join(self.work, name)

    def write(self, name, text):
        p = self.path(name)
        with open(p, "w" if isinstance(text, str) else "wb") as f:
            f.write(text)
        return p

    def read_src(self, rel):
        with open(os.path.join(self.src, rel)) as f:
            return f.read()

    def octoplan(self, *args):
        return [os.path.join(self.bin, "octoplan"), *args]

    def octorun(self, np, *args):
        return ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(np),
                os.path.join(self.bin, "octorun"), *args]

    def run(self, argv, timeout=60, interrupt_after=None):
        """(returncode or None on timeout, stdout, stderr, seconds)."""
        start = time.time()
        proc = subprocess.Popen(argv, cwd=self.src, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        try:
            if interrupt_after is not None:
                try:
                    out, err = proc.communicate(timeout=interrupt_after)
                except subprocess.TimeoutExpired:
                    proc.send_signal(signal.SIGINT)
                    out, err = proc.communicate(timeout=timeout)
            else:
                out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            return None, out.decode(errors="replace"), err.decode(errors="replace"), time.time() - start
        return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"), time.time() - start

    def fail(self, name, why, argv, rc, err):
        short = err.strip().splitlines()
        shown = " | ".join(short[:3])[:400]
        self.failures.append(f"FAIL {self.group}/{name}: {why} (exit {rc}; stderr: {shown}; cmd: {' '.join(argv)})")

    def case(self, name, argv, expect="error", names=None, message=None, outputs=(), timeout=60,
             check=None, interrupt_after=None):
        """Runs one case. expect: "error" (exit 1..99 naming `names`), "ok" (exit 0), or "either"
        (a generated mutation: a clear error or success). `message`: regex the error must match.
        `outputs`: files that exist before the command (filled with KEEP) and must stay intact when
        it fails. `check(rc, out, err)`: extra assertions, returning an error string or None."""
        self.cases += 1
        for o in outputs:
            with open(o, "wb") as f:
                f.write(KEEP)
        before = set(os.listdir(self.work))
        rc, out, err, secs = self.run(argv, timeout=timeout, interrupt_after=interrupt_after)
        text = out + err
        if rc is None:
            return self.fail(name, f"hung (killed after {timeout} s)", argv, rc, err)
        if rc < 0:
            return self.fail(name, f"killed by signal {-rc}", argv, rc, err)
        if rc >= 100:
            return self.fail(name, "exit code outside 1..99", argv, rc, err)
        if re.search(r"\d{40,}", text):
            return self.fail(name, "prints a number of 40+ digits", argv, rc, err)
        failed = rc != 0
        if expect == "ok" and failed:
            return self.fail(name, "expected success", argv, rc, err)
        if expect == "error" and not failed:
            return self.fail(name, "expected an error, got exit 0", argv, rc, err)
        if failed:
            if names and not re.search(names, err):
                return self.fail(name, f"the error does not name {names!r}", argv, rc, err)
            if message and not re.search(message, err):
                return self.fail(name, f"the error does not say {message!r}", argv, rc, err)
            if "internal error" in err:
                return self.fail(name, "reported as an internal error", argv, rc, err)
            for o in outputs:
                with open(o, "rb") as f:
                    if f.read() != KEEP:
                        return self.fail(name, f"existing output {os.path.basename(o)} was modified", argv, rc, err)
        left = [f for f in set(os.listdir(self.work)) - before if ".tmp" in f]
        if left:
            return self.fail(name, f"temporary files left behind: {left}", argv, rc, err)
        if check:
            problem = check(rc, out, err)
            if problem:
                return self.fail(name, problem, argv, rc, err)
        return None

    def finish(self):
        for f in self.failures:
            print(f)
        print(f"{self.group}: {self.cases} cases, {len(self.failures)} failed")
        return 1 if self.failures else 0


# ---- text mutations -------------------------------------------------------------------------------
NUMBER = re.compile(r"(?<![\w.\-])(\w+): (-?[0-9][0-9.e+\-]*)")


def numeric_mutations(text, values, max_per_key=None, line_filter=None):
    """(description, mutated text) for every `key: number` occurrence, each replaced by each value."""
    out = []
    seen = {}
    for m in NUMBER.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        line = text[line_start:text.find("\n", m.start())]
        if line.lstrip().startswith("#") or (line_filter and not line_filter(line)):
            continue
        key = m.group(1)
        seen[key] = seen.get(key, 0) + 1
        if max_per_key and seen[key] > max_per_key:
            continue
        for v in values:
            mutated = text[:m.start(2)] + v + text[m.end(2):]
            out.append((f"{key}#{seen[key]}={v}", mutated))
    return out


def key_mutations(text):
    """Each `key:` at the start of a line dropped (with its value line) and misspelt."""
    out = []
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)(\w+):", line)
        if not m or line.lstrip().startswith("#"):
            continue
        key = m.group(2)
        out.append((f"drop {key}", "".join(lines[:i] + lines[i + 1:])))
        out.append((f"typo {key}", "".join(lines[:i] + [line.replace(key + ":", key + "x:", 1)] + lines[i + 1:])))
    return out


BAD_VALUES = ["0", "-1", "abc", "1e999", "99999999999999999999"]


# ---- groups ---------------------------------------------------------------------------------------
def clusters(r):
    model = "profiles/models/tiny-hybrid.yaml"
    out = r.path("costs.out.yaml")
    for base in ["profiles/clusters/cpu-local.yaml", "profiles/clusters/h100x8.yaml"]:
        text = r.read_src(base)
        for i, (desc, mutated) in enumerate(numeric_mutations(text, BAD_VALUES) + key_mutations(text)):
            p = r.write(f"cluster{i}.yaml", mutated)
            r.case(f"{os.path.basename(base)} {desc}", r.octoplan("estimate", model, "--cluster", p, "-o", out),
                   expect="either", names=re.escape(p), outputs=[out])
    # Parallel sizes the cluster cannot hold.
    p = r.write("cluster-tp.yaml", r.read_src("profiles/clusters/cpu-local.yaml").replace("tp: 1", "tp: 8"))
    r.case("tp larger than the cluster", r.octoplan("estimate", model, "--cluster", p, "-o", out),
           names=re.escape(p), outputs=[out])


def costs(r):
    model = "profiles/models/tiny-hybrid.yaml"
    cluster = "profiles/clusters/cpu-local.yaml"
    good = r.path("good.costs.yaml")
    rc, _, err, _ = r.run(r.octoplan("estimate", model, "--cluster", cluster, "-o", good))
    if rc != 0:
        r.failures.append(f"FAIL costs/setup: octoplan estimate failed: {err}")
        return
    text = open(good).read()
    plan = r.path("plan.json")

    def baseline(p, expect="error", names=None, message=None):
        return dict(argv=r.octoplan("baseline", model, "--cluster", cluster, "--costs", p, "--schedule", "1f1b",
                                    "--pp", "2", "--microbatches", "4", "-o", plan),
                    expect=expect, names=names or re.escape(p), message=message, outputs=[plan])

    r.case("unchanged costs", **baseline(good, expect="ok"))
    layer_lines = [l for l in text.splitlines() if l.strip().startswith("- {label:")]
    # Labels that do not match the model: the error names the first mismatching layer.
    swapped = text.replace('label: "M"', 'label: "TMP"', 1).replace('label: "*"', 'label: "M"', 1).replace(
        'label: "TMP"', 'label: "*"', 1)
    r.case("two labels swapped", **baseline(r.write("swapped.yaml", swapped), message=r"layer 1\b.*label|label.*layer 1\b"))
    r.case("unknown label", **baseline(r.write("unknown.yaml", text.replace('label: "E"', 'label: "Q"', 1)),
                                       message=r"layer 4\b.*label|label.*layer 4\b"))
    r.case("a layer missing", **baseline(r.write("short.yaml", text.replace(layer_lines[3] + "\n", "", 1)),
                                         message=r"layer"))
    for field, value in [("micro_batch", "3"), ("seq", "32"), ("tp", "2")]:
        mutated = re.sub(rf"{field}: \d+", f"{field}: {value}", text, count=1)
        r.case(f"shape {field} {value}", **baseline(r.write(f"shape-{field}.yaml", mutated), message=field))
    r.case("negative time", **baseline(r.write("negative.yaml", text.replace("f_ms: ", "f_ms: -", 1)),
                                       message=r"f_ms"))
    # Generated: every number of the header and of the first two layers.
    keep = set(layer_lines[:2])
    header_or_first = lambda line: not line.strip().startswith("- {label:") or line in keep
    for i, (desc, mutated) in enumerate(numeric_mutations(text, BAD_VALUES, line_filter=header_or_first)):
        r.case(f"generated {desc}", **baseline(r.write(f"gen{i}.yaml", mutated), expect="either"))
    for i, (desc, mutated) in enumerate(key_mutations(text)):
        r.case(f"generated {desc}", **baseline(r.write(f"key{i}.yaml", mutated), expect="either"))


SHIPPED_PLAN = "plans/tiny-hybrid.1f1b.cpu2.json"


def plan_mutations(r):
    """(name, mutated plan text, message regex or None) — the issue's cases first."""
    base = json.loads(r.read_src(SHIPPED_PLAN))
    out = []

    def mutate(name, fn, message=None):
        p = json.loads(json.dumps(base))
        fn(p)
        out.append((name, json.dumps(p, indent=1), message))

    def embedded(key, old, new):
        def fn(p):
            assert old in p["inputs"][key]["yaml"], (key, old)
            p["inputs"][key]["yaml"] = p["inputs"][key]["yaml"].replace(old, new, 1)
        return fn

    mutate("seq beyond the model's seq_len", lambda p: p.update(seq=128), r"seq")
    mutate("embedded model hidden 64 -> 96", embedded("model", "hidden: 64", "hidden: 96"), r"inputs\.(model|costs)")
    mutate("embedded costs negative time", embedded("costs", "f_ms: 0.", "f_ms: -0."),
           r"inputs\.costs \(embedded YAML\) line \d+: layers\[0\]\.f_ms")
    mutate("embedded costs label swapped", embedded("costs", 'label: "M"', 'label: "E"'), r"label")
    mutate("embedded model YAML syntax", embedded("model", "hidden: 64", "hidden: [64"),
           r"inputs\.model \(embedded YAML\) line \d+")

    def one_send(p):
        ops = p["devices"][0]["ops"]
        i = [k for k, o in enumerate(ops) if o["op"] == "SEND"][2]
        ops[i]["bytes"] = 12345
    mutate("one SEND with a wrong byte count", one_send, r"devices\[0\]\.ops\[\d+\]\.bytes: 12345")
    mutate("predicted iteration time edited",
           lambda p: p["predicted"].update(iteration_time_ms=p["predicted"]["iteration_time_ms"] * 0.5),
           r"predicted\.iteration_time_ms")
    mutate("predicted static bytes edited",
           lambda p: p["predicted"]["devices"][0].update(static_bytes=1), r"predicted\.devices\[0\]\.static_bytes")
    mutate("stage boundary moved",
           lambda p: (p["stages"][0].update(layers=[0, 4]), p["stages"][1].update(layers=[4, 10])), r"predicted|static")
    mutate("tensor parallelism the executor lacks", lambda p: p["parallel"].update(tp=2), r"tp")
    mutate("absurd micro-batch count", lambda p: p.update(microbatches=2000000000), r"microbatches")
    mutate("device 1 without ops", lambda p: p["devices"][1].update(ops=[]), r"devices\[1\]|device 1")
    mutate("schema version 2", lambda p: p.update(schema_version=2), r"schema_version")
    mutate("micro_batch beyond the costs' shape", lambda p: p.update(micro_batch=4), r"micro_batch")
    out.append(("truncated JSON", r.read_src(SHIPPED_PLAN)[:2000], r"invalid JSON"))
    # Generated: every top-level scalar and the first stage's and op's fields.
    for key in ["microbatches", "micro_batch", "seq"]:
        for v in [0, -1, "x", 1e300, 2**63]:
            mutate(f"generated {key}={v}", lambda p, k=key, v=v: p.update({k: v}))
    for key in ["devices", "tp", "dp"]:
        for v in [0, -1, 3, "x"]:
            mutate(f"generated parallel.{key}={v}", lambda p, k=key, v=v: p["parallel"].update({k: v}))
    for v in [[0, 0], [0, 99], [-1, 5], [5, 0], "x"]:
        mutate(f"generated stages[0].layers={v}", lambda p, v=v: p["stages"][0].update(layers=v))
    for key, values in [("stage", [-1, 7, "x"]), ("mb", [-1, 99]), ("op", ["Q", 3])]:
        for v in values:
            mutate(f"generated ops[0].{key}={v}", lambda p, k=key, v=v: p["devices"][0]["ops"][0].update({k: v}))
    for key, values in [("peer", [0, 5, -1]), ("bytes", [-1, 0, 2**62]), ("tensor", ["grad", "x"])]:
        for v in values:
            mutate(f"generated ops[1].{key}={v}", lambda p, k=key, v=v: p["devices"][0]["ops"][1].update({k: v}))
    return out


def plans(r):
    report = r.path("simulate.report.json")
    r.case("shipped plan checks", r.octoplan("check", SHIPPED_PLAN), expect="ok")
    r.case("shipped plan simulates", r.octoplan("simulate", SHIPPED_PLAN), expect="ok")
    for i, (name, text, message) in enumerate(plan_mutations(r)):
        p = r.write(f"plan{i}.json", text)
        expect = "either" if name.startswith("generated") else "error"
        r.case(f"check: {name}", r.octoplan("check", p), expect=expect, names=re.escape(p), message=message)
        r.case(f"simulate: {name}", r.octoplan("simulate", p, "--report", report), expect=expect,
               names=re.escape(p), message=message, outputs=[report])
    # One wrong SEND byte count is one problem, reported first — not a list blaming correct ops.
    name, text, _ = next(m for m in plan_mutations(r) if m[0] == "one SEND with a wrong byte count")
    p = r.write("one-send.json", text)

    def one_problem(rc, out, err):
        problems = [l for l in err.splitlines() if l.startswith("  - ")]
        if len(problems) != 1:
            return f"{len(problems)} problems listed for one wrong byte count"
        return None
    r.case("check: one wrong SEND is one problem", r.octoplan("check", p), names=re.escape(p), check=one_problem)
    # The memory message counts what it says it counts.
    big = json.loads(r.read_src(SHIPPED_PLAN))

    def honest_count(rc, out, err):
        m = re.search(r"of up to (\d+) micro-batches", err)
        if m and int(m.group(1)) > big["microbatches"]:
            return f"claims {m.group(1)} micro-batches of {big['microbatches']}"
        return None
    r.case("check: memory message", r.octoplan("check", SHIPPED_PLAN, "--memory-limit-gib", "0.002"),
           names=re.escape(SHIPPED_PLAN), message=r"memory", check=honest_count)


def run(r):
    """octorun refuses exactly what octoplan check refuses (mpirun, 2 ranks)."""
    report = r.path("run.report.json")
    cases = [("unchanged", r.read_src(SHIPPED_PLAN), None)]
    wanted = {"seq beyond the model's seq_len", "embedded model hidden 64 -> 96", "embedded costs negative time",
              "one SEND with a wrong byte count", "predicted iteration time edited",
              "tensor parallelism the executor lacks", "micro_batch beyond the costs' shape"}
    cases += [m for m in plan_mutations(r) if m[0] in wanted]
    for i, (name, text, message) in enumerate(cases):
        p = r.write(f"run{i}.json", text)
        expect = "ok" if name == "unchanged" else "error"
        r.case(f"check: {name}", r.octoplan("check", p), expect=expect, names=re.escape(p), message=message)
        r.case(f"octorun: {name}", r.octorun(2, p, "--steps", "1", "--timeout", "30", "--report", report),
               expect=expect, names=re.escape(p), message=message, outputs=[report] if expect == "error" else [],
               timeout=120)


def options(r):
    model = "profiles/models/tiny-hybrid.yaml"
    cluster = ["--cluster", "profiles/clusters/cpu-local.yaml"]
    out = r.path("out.json")
    human = r"must be|expected|at least|at most|not a|invalid|unknown|required|missing"

    def baseline(*extra, schedule="1f1b"):
        return r.octoplan("baseline", model, *cluster, "--schedule", schedule, "--pp", "2", "--microbatches", "4",
                          *extra, "-o", out)

    for option, value in [("--pp", "0"), ("--microbatches", "0"), ("--micro-batch", "0"), ("--tp", "0"),
                          ("--dp", "0"), ("--seq", "0"), ("--memory-limit-gib", "0"), ("--memory-limit-gib", "-1"),
                          ("--memory-limit-gib", "nan"), ("--pp", "abc"), ("--pp", "1.5"),
                          ("--microbatches", "99999999999999999999")]:
        r.case(f"baseline {option} {value}", baseline(option, value), names=re.escape(option), message=human,
               outputs=[out])
    r.case("--pp 0 says at least 1", baseline("--pp", "0"), names="--pp", message=r"--pp: must be at least 1",
           outputs=[out])
    r.case("baseline --chunks 0", baseline("--chunks", "0", schedule="interleaved"), names="--chunks",
           message=human, outputs=[out])
    r.case("baseline --schedule nope", baseline(schedule="nope"), names="nope|--schedule", outputs=[out])
    r.case("unknown option", baseline("--frobnicate"), names="--frobnicate", outputs=[out])
    r.case("missing -o", r.octoplan("baseline", model, "--schedule", "1f1b"), names="-o|--output")
    r.case("plan --threads -1", r.octoplan("plan", model, *cluster, "--pp", "2", "--threads", "-1", "-o", out),
           names="--threads", message=human, outputs=[out])
    r.case("plan --time-budget 0", r.octoplan("plan", model, *cluster, "--pp", "2", "--time-budget", "0", "-o", out),
           names="--time-budget", message=human, outputs=[out])
    r.case("plan --time-budget nan",
           r.octoplan("plan", model, *cluster, "--pp", "2", "--time-budget", "nan", "-o", out),
           names="--time-budget", message=human, outputs=[out])
    for bad in ("0", "65", "two"):
        r.case(f"plan --searches {bad}",
               r.octoplan("plan", model, *cluster, "--pp", "2", "--searches", bad, "-o", out),
               names="--searches", message=human, outputs=[out])
    # Options go through the bounds of the YAML files.
    r.case("baseline --seq 2000000000000", baseline("--seq", "2000000000000"), names="--seq", message=human,
           outputs=[out])
    r.case("estimate --seq 2000000000000",
           r.octoplan("estimate", model, *cluster, "--seq", "2000000000000", "-o", out), names="--seq",
           message=human, outputs=[out])
    # Work that needs more memory than the machine has is refused up front, quickly.
    r.case("baseline --microbatches 2000000000",
           r.octoplan("baseline", model, *cluster, "--schedule", "1f1b", "--pp", "2", "--microbatches",
                      "2000000000", "-o", out), names="--microbatches", message=r"memory", outputs=[out], timeout=30)
    r.case("plan --microbatches 2000000000",
           r.octoplan("plan", model, *cluster, "--pp", "2", "--microbatches", "2000000000", "-o", out),
           names="--microbatches", message=r"memory", outputs=[out], timeout=30)
    # Missing files.
    r.case("check missing plan", r.octoplan("check", r.path("missing.json")), names="missing.json")
    r.case("simulate missing plan", r.octoplan("simulate", r.path("missing.json")), names="missing.json")
    r.case("baseline missing model", r.octoplan("baseline", r.path("nomodel.yaml"), "--schedule", "1f1b", "-o", out),
           names="nomodel.yaml", outputs=[out])
    # octorun options (parsed before MPI starts) and a missing plan.
    r.case("octorun --steps 0", r.octorun(1, SHIPPED_PLAN, "--steps", "0"), names="--steps", message=human)
    r.case("octorun --lr -1", r.octorun(1, SHIPPED_PLAN, "--lr", "-1"), names="--lr", message=human)
    r.case("octorun --timeout 0", r.octorun(1, SHIPPED_PLAN, "--timeout", "0"), names="--timeout", message=human)
    r.case("octorun missing plan", r.octorun(1, r.path("missing.json")), names="missing.json")
    r.case("octorun --steps 2000000000", r.octorun(2, SHIPPED_PLAN, "--steps", "2000000000"), names="--steps",
           message=r"memory", timeout=60)
    # A plan that does not fit: refused with the reason and a change that would fit ...
    advice = r"--pp|--tp|recompute|--micro-batch"
    r.case("baseline does not fit", baseline("--memory-limit-gib", "0.001"), names="memory",
           message=advice, outputs=[out])
    r.case("plan does not fit",
           r.octoplan("plan", model, *cluster, "--pp", "2", "--time-budget", "1", "--memory-limit-gib", "0.001",
                      "-o", out), names="memory", message=advice, outputs=[out])

    # ... or written and marked when asked for.
    def marked(rc, stdout, err):
        try:
            plan = json.load(open(out))
        except Exception as e:  # noqa: BLE001
            return f"no plan written: {e}"
        if plan.get("allow_oversubscribed_memory") is not True:
            return "the plan is not marked as oversubscribing memory"
        crc, _, cerr, _ = r.run(r.octoplan("check", out))
        if crc != 0:
            return f"octoplan check refuses the marked plan: {cerr.strip()[:200]}"
        return None
    r.case("baseline --allow-oversubscribed-memory",
           baseline("--memory-limit-gib", "0.001", "--allow-oversubscribed-memory"), expect="ok", check=marked)
    # A large budget is accepted, says how long it may take, and Ctrl-C ends it with the best plan.
    def interrupted(rc, stdout, err):
        if rc != 7:
            return f"exit {rc}, not 7 (interrupted)"
        if not re.search(r"(year|day|hour)", err):
            return "the progress line does not say how long the budget takes"
        if not re.search(r"interrupt", stdout + err, re.I) or not re.search(r"best plan", stdout + err):
            return "does not say it stopped and wrote the best plan so far"
        crc, _, cerr, _ = r.run(r.octoplan("check", out))
        return None if crc == 0 else f"the plan written on SIGINT does not check: {cerr.strip()[:200]}"
    # (A model whose search does not converge within the seconds before the signal.)
    r.case("plan --time-budget 1e9 then SIGINT",
           r.octoplan("plan", "profiles/models/nemotron-h-8b.yaml", "--pp", "8", "--microbatches", "32",
                      "--time-budget", "1e9", "--threads", "1", "-o", out),
           expect="either", check=interrupted, interrupt_after=4, timeout=60)


def outputs(r):
    model = "profiles/models/tiny-hybrid.yaml"
    cluster = ["--cluster", "profiles/clusters/cpu-local.yaml"]

    def estimate(target, option="-o"):
        return r.octoplan("estimate", model, *cluster, option, target)

    folder = r.path("a-folder")
    os.mkdir(folder)
    r.case("-o on a directory", estimate(folder), names=re.escape(folder),
           check=lambda *a: None if os.path.isdir(folder) else "the directory was replaced")
    r.case("--report on a directory", estimate(folder, "--report"), names=re.escape(folder),
           check=lambda *a: None if os.path.isdir(folder) else "the directory was replaced")
    r.case("-o in a missing folder", estimate(r.path("no/such/out.yaml")), names="no/such")
    # A FIFO with a reader: written plainly (the reader gets the file) or refused; never replaced.
    fifo = r.path("a-fifo")
    os.mkfifo(fifo)
    got = r.path("fifo-read.txt")
    reader = subprocess.Popen(["sh", "-c", f"cat '{fifo}' > '{got}'"])

    def fifo_intact(rc, out, err):
        try:
            reader.wait(timeout=10)
        except subprocess.TimeoutExpired:
            reader.kill()
        if not stat.S_ISFIFO(os.lstat(fifo).st_mode):
            return "the FIFO was replaced by a regular file"
        if rc == 0 and "source: estimated" not in open(got).read():
            return "exit 0 but the FIFO's reader did not get the costs"
        return None
    r.case("-o on a FIFO", estimate(fifo), expect="either", names=re.escape(fifo), check=fifo_intact, timeout=30)
    if reader.poll() is None:
        reader.kill()
    # A character device (a private copy of /dev/null, where root may create one).
    null = r.path("a-null")
    try:
        os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except OSError:
        null = None
    if null:
        r.case("-o on a character device", estimate(null), expect="either", names=re.escape(null),
               check=lambda *a: None if stat.S_ISCHR(os.lstat(null).st_mode) else "the device was replaced")
    # A symbolic link to a regular file: the file is updated, the link stays a link.
    target = r.write("link-target.yaml", "old\n")
    link = r.path("a-link.yaml")
    os.symlink(target, link)

    def link_kept(rc, out, err):
        if not os.path.islink(link):
            return "the symbolic link was replaced by a regular file"
        if "source: estimated" not in open(target).read():
            return "the link's target was not updated"
        return None
    r.case("-o through a symbolic link", estimate(link), expect="ok", check=link_kept)


GROUPS = {"clusters": clusters, "costs": costs, "plans": plans, "run": run, "options": options, "outputs": outputs}


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in GROUPS:
        print(__doc__)
        return 2
    r = Runner(sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3]))
    try:
        GROUPS[sys.argv[1]](r)
    finally:
        subprocess.run(["rm", "-rf", r.work])
    return r.finish()


if __name__ == "__main__":
    sys.exit(main())
