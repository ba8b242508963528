#!/usr/bin/env bash
# GPU-side steps of a patchgate session on a GPU machine without network, run from the
# repository root after the offline SGLang bundle is installed in /tmp/site
# (../shared/gpu: build-payload.sh here, recv-part.sh + install-payload.sh there; the
# bundle carries docs/gpu-runs/extra-wheels.txt for lm-eval).
#
#   bash docs/gpu-runs/gpu.sh train                  # training variants, in the background
#   bash docs/gpu-runs/gpu.sh train-continue         # warm-start variants of models/default
#   bash docs/gpu-runs/gpu.sh launch NAME [args]     # one training variant, in the background
#   bash docs/gpu-runs/gpu.sh no-orphans             # no SGLang process left after a run
#   bash docs/gpu-runs/gpu.sh wait-train             # wait, pick the best, copy it out
#   bash docs/gpu-runs/gpu.sh smoke                  # SGLang adapter checks (smoke.py)
#   bash docs/gpu-runs/gpu.sh extra                  # .gpu/extra/*.whl -> /tmp/site (see README)
#   bash docs/gpu-runs/gpu.sh seed                   # committed baselines + CHANGELOG.md -> /tmp/bl
#   bash docs/gpu-runs/gpu.sh pick NAME NNNN...        # those patches -> /tmp/pick/NAME
#   bash docs/gpu-runs/gpu.sh guard PROFILE PATCHES NAME [guard args]   # /tmp/empty: none
#   bash docs/gpu-runs/gpu.sh fidelity PROFILE NAME [one_batch|offline|offline_batch_params]
#   bash docs/gpu-runs/gpu.sh serving-alone PROFILE NAME  # the serving set's reference alone
#   bash docs/gpu-runs/gpu.sh grow [SHAPE]           # grow models/default (minicpm4-8b), timed
#   bash docs/gpu-runs/gpu.sh compare NAME BASE      # latencies and accuracy of two verdicts
#   bash docs/gpu-runs/gpu.sh pack                   # baselines + logs -> $OUT
#   bash docs/gpu-runs/gpu.sh bg STEP [args]         # a step in the background, from a copy
#   bash docs/gpu-runs/gpu.sh wait SECONDS           # follow it that long, then pack
#   bash docs/gpu-runs/gpu.sh issue15                # grow, FP8, int4, mixed (too long for a call)
#   bash docs/gpu-runs/gpu.sh serving-slice          # issue 24: the serving set, one call
#   bash docs/gpu-runs/gpu.sh accuracy-stop NAME PATCH.py...  # issue 25: sequential vs full
#   PATCHES=DIR bash docs/gpu-runs/gpu.sh startup [PROFILE]  # issue 32: where an engine start goes
#   bash docs/gpu-runs/gpu.sh planted NAME FRACTION  # calibrate's planted patch -> /tmp/planted/NAME
#   LIMIT=560 bash docs/gpu-runs/gpu.sh guard ...    # the guard ended (SIGINT) after LIMIT s
#   LIMIT=560 bash docs/gpu-runs/gpu.sh calibrate NAME ARGS...  # the runs that fit LIMIT s
#   SMI=200 ... calibrate NAME ARGS...               # the GPU's clocks beside it, smi-NAME.csv
#   bash docs/gpu-runs/gpu.sh ray NAME ARGS...       # issue 33: `python3 -m patchgate ARGS
#                                                    #   --ray auto` on a one-node Ray head
#
# Verdicts, logs, baselines and the change log of the GPU profiles accumulate in
# /tmp/logs and /tmp/bl across steps (`seed` starts them from the committed
# baselines/ and CHANGELOG.md, once); `pack` puts them into $OUT (the device tool's
# output folder, emptied before each command) or /tmp/out. CL=FILE sends a guard's
# change-log entry elsewhere (planted test patches are not changes of the project);
# BL=DIR uses other baselines (a trial against the reference only).
#
# The device tool re-syncs the working tree on every call and ends a call after 10
# minutes. A job left running in the background (`bg`) did NOT outlive the call that
# started it (2026-12-05, twice): run each step in the foreground of its own call, back
# to back (the machine goes back 30 s after a call returns), and `pack` in the same call.
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH="/tmp/site:$PWD/src:$PWD" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
OUT=${OUT:-/tmp/out}
BL=${BL:-/tmp/bl}
mkdir -p "$OUT" "$BL" /tmp/logs
step=${1:?step}; shift

# One training run in the background: launch_train NAME [train_default args]. Later
# arguments override these defaults (argparse keeps the last value of an option).
launch_train() {
  local name=$1; shift
  mkdir -p /tmp/train
  setsid nohup python3 -m models.train_default --out "/tmp/train/$name" --steps 1000000 \
    --max-minutes "${MINUTES:-12}" --lr 6e-4 --workers 4 "$@" \
    > "/tmp/train/$name.log" 2>&1 < /dev/null &
}

# Each line of stdin with the wall clock in front (bash 5's $EPOCHREALTIME: no process
# started per line beside the timed calls), where $1 is set; else unchanged.
stamp() {
  if [ -z "$1" ]; then cat; return; fi
  while IFS= read -r line; do printf '%s %s\n' "${EPOCHREALTIME:-$(date +%s.%N)}" "$line"; done
}

case $step in
train)
  # Three variants side by side (the GPU is far from busy with one); seed 1234 each.
  # scale_emb 12 with init std 0.02 held retrieval on a plateau (CPU probes, model
  # card), so two variants take scale_emb 1 and one MiniCPM's own init std 0.1.
  launch_train A --workers 5 --layers 4 --ffn 768 --scale-emb 1
  launch_train B --workers 5 --layers 6 --ffn 576 --scale-emb 1
  launch_train C --workers 5 --layers 4 --ffn 768 --scale-emb 12 --init-std 0.1
  sleep 20; tail -n 3 /tmp/train/*.log
  ;;
train-continue)
  # Warm start from the committed model, three variants side by side: the weak
  # retrieval tasks weighted up (A, B at half the learning rate) and the original mix (C).
  W=needle=0.25,common_word=0.1,fact_mc=0.25,addition=0.05,var_track=0.35
  warm=(--max-minutes "${MINUTES:-7}" --workers 5 --init models/default/model.safetensors)
  launch_train A "${warm[@]}" --weights "$W"
  launch_train B "${warm[@]}" --weights "$W" --lr 3e-4
  launch_train C "${warm[@]}"
  sleep 20; tail -n 3 /tmp/train/*.log
  ;;
launch)
  # one training variant in the background: launch NAME [train_default args]
  launch_train "$@"
  sleep 2; echo "launched $*"
  ;;
no-orphans)
  # after a failed run: no SGLang process may be left holding the GPU
  sleep 5
  if pgrep -f "sglang::|multiprocessing.spawn" > /dev/null; then
    pgrep -af "sglang::|multiprocessing.spawn"; echo "ORPHANS"; exit 1
  fi
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
  echo "no orphaned SGLang processes"
  ;;
wait-train)
  for _ in $(seq 1 "${WAIT_S:-540}"); do
    pgrep -f models.train_default > /dev/null || break; sleep 1
  done
  tail -n 9 /tmp/train/*.log
  for d in /tmp/train/*/; do
    n=$(basename "$d"); [ -f "$d/train_log.json" ] && cp "$d/train_log.json" "$OUT/train_$n.json"
  done
  best=$(python3 - <<'EOF'
import json, pathlib
scores = {}
for p in pathlib.Path("/tmp/train").glob("*/train_log.json"):
    log = json.loads(p.read_text())
    scores[p.parent.name] = sum(log[f"quick_eval_fp32_{k}"]["mean"]
                                for k in ("easy", "medium", "hard")) / 3
print(max(scores, key=scores.get) if scores else "")
EOF
)
  echo "best: ${best:-none}"
  [ -n "$best" ] || exit 1
  echo "$best" > /tmp/train/best
  tar -C "/tmp/train/$best" -cf /tmp/train/best.tar .
  split -b 15M -d -a 1 /tmp/train/best.tar "$OUT/model_$best.tar.part"
  ;;
use-best)
  # the trained model replaces models/default here; presets chosen from its log
  best=$(cat /tmp/train/best)
  tar -C models/default -xf /tmp/train/best.tar
  python3 -m models.select_presets --write && python3 -m guards.build_tasks
  ;;
extra)
  # wheels that joined docs/gpu-runs/extra-wheels.txt after the bundle was built, carried
  # in the call as .gpu/extra (see README): unpacked into /tmp/site beside the bundle
  python3 - .gpu/extra/*.whl <<'EOF'
import os, sys, zipfile
for w in sys.argv[1:]:
    if not os.path.exists(w):  # no .gpu/extra carried: nothing to add
        print("no extra wheels")
        continue
    zipfile.ZipFile(w).extractall("/tmp/site")
    print("unpacked", w.rsplit("/", 1)[-1])
EOF
  ;;
seed)
  if [ ! -f "$BL/CHANGELOG.md" ]; then
    cp -r baselines/. "$BL/" && cp CHANGELOG.md "$BL/CHANGELOG.md"
  fi
  ls "$BL"
  ;;
pick)
  # a patch folder of the numbered patches named (model_patches/, docs/rejected_patches/)
  name=$1; shift
  rm -rf "/tmp/pick/$name"; mkdir -p "/tmp/pick/$name"
  for n in "$@"; do
    cp model_patches/"$n"-*.py docs/rejected_patches/"$n"-*.py docs/gpu-runs/staged/"$n"-*.py \
      "/tmp/pick/$name/" 2>/dev/null
    ls "/tmp/pick/$name/$n"-*.py > /dev/null || { echo "no patch $n" >&2; exit 2; }
  done
  ls "/tmp/pick/$name"
  ;;
smoke)
  python3 docs/gpu-runs/smoke.py 2>&1 | tee /tmp/logs/smoke.log | grep -v "^\s*$" | tail -n 40
  ;;
guard)
  profile=$1 patches=$2 name=$3; shift 3
  mkdir -p /tmp/empty
  # LIMIT: end the guard with SIGINT (its Ctrl-C: engines closed, nothing written) after
  # that many seconds, so a call keeps the time to pack what it measured
  timeout --signal=INT --kill-after=30 "${LIMIT:-0}" \
    python3 -m patchgate guard --profile "$profile" --patches "$patches" --baselines "$BL" \
    --changelog "${CL:-$BL/CHANGELOG.md}" --json "/tmp/logs/$name.json" \
    --markdown "/tmp/logs/$name.md" "$@" 2>&1 | tee "/tmp/logs/$name.log" \
    | grep -v "^\s*$" | grep -v "^\[rank\|Capturing\|it/s\]" | tail -n 60
  echo "exit: ${PIPESTATUS[0]}"
  ;;
startup)
  # issue 32: one engine of PROFILE (no patches) started as the gate starts it, with
  # SGLang's own log at info level, every line stamped with the wall clock; the phases
  # (import, start, first and second call per scenario, close) in startup-PROFILE.json
  # (PATCHES=DIR: started with those patches; one with apply() runs the sandbox there)
  profile=${1:-h200-minicpm8b}
  python3 -m patchgate.tools.engine_start --profile "$profile" --log-level info \
    --json "/tmp/logs/startup-$profile.json" ${PATCHES:+--patches "$PATCHES"} 2>&1 \
    | stamp 1 > "/tmp/logs/startup-$profile.log"
  grep -i "load weight\|memory pool\|kv cache\|cuda graph\|capture\|ready\|init torch" \
    "/tmp/logs/startup-$profile.log" | cut -c1-160 | tail -n 30
  cat "/tmp/logs/startup-$profile.json"
  ;;
calibrate)
  # issue 32: `patchgate calibrate ARGS` that starts no run it cannot finish within LIMIT
  # seconds (--time-limit LIMIT-20: the runs that ran go into the file), under a SIGINT
  # backstop at LIMIT (a run cut off stays out; the finished ones are in the journal)
  # (SMI=MS: the GPU's SM clock, power, temperature and clock-event reasons every MS
  # milliseconds during the run, in /tmp/logs/smi-NAME.csv, by nvidia-smi in a process
  # of its own; the log's lines stamped with the wall clock to line them up)
  name=$1; shift
  limit=${LIMIT:-560}
  smi=
  if [ -n "${SMI:-}" ]; then
    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
      --format=csv,nounits -lms "$SMI" > "/tmp/logs/smi-$name.csv" 2>&1 & smi=$!
  fi
  timeout --signal=INT --kill-after=30 "$limit" \
    python3 -m patchgate calibrate --baselines "$BL" --time-limit $(( limit - 20 )) "$@" \
    2>&1 | stamp "$smi" | tee "/tmp/logs/calibrate-$name.log" \
    | grep -v "^\([0-9.]* \)\?\s*$" | grep -v "^\([0-9.]* \)\?\[rank\|Capturing\|it/s\]" \
    | tail -n 40
  echo "exit: ${PIPESTATUS[0]}"
  if [ -n "$smi" ]; then kill "$smi" 2>/dev/null; fi
  ;;
ray)
  # issue 33: a Ray head on this machine (its GPUs, one bench slot), `python3 -m patchgate
  # ARGS --ray auto` against it, the head stopped again: all in one call (a head left
  # running does not outlive the call). Log in /tmp/logs/ray-NAME.log.
  name=$1; shift
  python3 -m ray.scripts.scripts start --head --resources '{"bench_slot": 1}' \
    --disable-usage-stats --include-dashboard=false > "/tmp/logs/ray-$name-head.log" 2>&1 \
    || { tail -n 20 "/tmp/logs/ray-$name-head.log"; exit 2; }
  t0=$(date +%s)
  python3 -m patchgate "$@" --ray auto 2>&1 | tee "/tmp/logs/ray-$name.log" \
    | grep -v "^\s*$" | grep -v "^\[rank\|Capturing\|it/s\]" | tail -n 40
  echo "exit: ${PIPESTATUS[0]}, $(( $(date +%s) - t0 )) s"
  python3 -m ray.scripts.scripts stop --force > /dev/null 2>&1
  ;;
planted)
  # calibrate's planted patch (patchgate.tools.planted) as a folder: FRACTION 0 is the
  # harmless one, else every decoder layer's MLP does FRACTION more work
  name=$1 fraction=$2
  rm -rf "/tmp/planted/$name"
  python3 - "/tmp/planted/$name" "$fraction" <<'EOF'
import sys
from pathlib import Path
from patchgate.tools import planted
folder, fraction = Path(sys.argv[1]), float(sys.argv[2])
planted.neutral(folder) if fraction == 0 else planted.slowdown(folder, fraction, "sglang")
print(*sorted(p.name for p in folder.iterdir()))
EOF
  ;;
fidelity)
  profile=$1 name=$2 bench=${3:-one_batch}
  python3 -m patchgate fidelity --profile "$profile" --verdict "/tmp/logs/$name.json" \
    --bench "$bench" --out "/tmp/logs/fidelity-$profile-$bench.json" 2>&1 \
    | tee "/tmp/logs/fidelity-$profile-$bench.log" | grep -v "^\[rank" | tail -n 30
  ;;
serving-alone)
  # fidelity of the serving set: the reference's server and bench_serving run alone, as
  # the gate runs them (python -m patchgate.tools.serving_alone), each scenario 3 times,
  # then each median duration over the reference's in the verdict NAME (within 2 %)
  profile=$1 name=$2 pname=$(basename "$1" .toml)
  dir=/tmp/logs/alone-$pname
  rm -rf "$dir"; mkdir -p "$dir"
  mapfile -t cmds < <(python3 -m patchgate.tools.serving_alone --profile "$profile" --out "$dir")
  setsid bash -c "exec ${cmds[0]}" > "$dir/server.log" 2>&1 < /dev/null &
  spid=$!
  for _ in $(seq 1 900); do
    curl -sf http://127.0.0.1:30000/health > /dev/null && break; sleep 1
  done
  for i in 1 2 3; do
    for cmd in "${cmds[@]:1}"; do
      curl -sf -X POST http://127.0.0.1:30000/flush_cache > /dev/null
      t0=$(date +%s%N)
      bash -c "$cmd" >> "$dir/bench.log" 2>&1 || echo "bench failed: $cmd"
      # the whole command's wall time, start-up included (the gate's bench client
      # pays the start-up once per phase), beside bench_serving's own duration
      echo "wall_ms $(( ($(date +%s%N) - t0) / 1000000 ))" | tee -a "$dir/wall.txt"
    done
  done
  kill -TERM -- "-$spid"; sleep 10; kill -KILL -- "-$spid" 2>/dev/null
  python3 -m patchgate.tools.serving_alone --compare "/tmp/logs/$name.json" "$dir" \
    | tee "/tmp/logs/fidelity-serving-$pname.txt"
  ;;
grow)
  # the grown checkpoint into the user's cache ($PATCHGATE_CACHE moves it); prints
  # whether it was built or found, the seconds taken, and the folder
  python3 -m patchgate model grow --shape "${1:-minicpm4-8b}" 2>&1 | tee /tmp/logs/grow.log
  du -sh "$(tail -n 1 /tmp/logs/grow.log)"
  ;;
compare)
  # each scenario's median in verdict NAME over that in verdict BASE (same lease), and
  # both reference accuracies
  python3 - "/tmp/logs/$1.json" "/tmp/logs/$2.json" <<'EOF' | tee "/tmp/logs/compare-$1-$2.txt"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
base = {s["name"]: s["median_s"] for s in b["scenarios"]}
worst = 0.0
for s in a["scenarios"]:
    r = s["median_s"] / base[s["name"]]
    worst = max(worst, abs(r - 1))
    print(f"{s['name']:12s} {1000 * s['median_s']:10.2f} ms {1000 * base[s['name']]:10.2f} ms"
          f"  ratio {r:.3f}")
print(f"largest latency difference {100 * worst:.1f} %")
print(f"reference accuracy {a['accuracy']['reference']:.4f} vs {b['accuracy']['reference']:.4f}"
      f" ({a['profile']} vs {b['profile']})")
EOF
  ;;
pack)
  tar -C / -czf "$OUT/gpu-results.tar.gz" --exclude='*.explain' tmp/bl tmp/bl-* tmp/logs \
    2>/dev/null
  ls -la "$OUT"
  ;;
bg)
  # a step (or a sequence such as issue15) in the background, from a copy of the tree
  rm -rf /tmp/pg && mkdir -p /tmp/pg && cp -r docs src models guards model_patches \
    baselines profiles CHANGELOG.md pyproject.toml /tmp/pg/ 2>/dev/null
  cd /tmp/pg && setsid nohup bash docs/gpu-runs/gpu.sh "$@" > /tmp/logs/bg.log 2>&1 < /dev/null &
  echo $! > /tmp/logs/bg.pid
  sleep 5; echo "started: $*"; tail -n 5 /tmp/logs/bg.log
  ;;
wait)
  # follow the background sequence for up to SECONDS (a call's limit is 600), then pack
  end=$((SECONDS + ${1:-500})); seen=0
  running() { kill -0 "$(cat /tmp/logs/bg.pid 2>/dev/null)" 2>/dev/null; }
  while [ $SECONDS -lt $end ] && running; do
    sleep 10
    n=$(wc -l < /tmp/logs/bg.log)
    [ "$n" -gt "$seen" ] && sed -n "$((seen + 1)),${n}p" /tmp/logs/bg.log \
      | grep -v "^\s*$" | grep -v "^\[rank\|Capturing\|it/s\]" | tail -n 25
    seen=$n
  done
  running && echo "STILL RUNNING" || echo "DONE"
  tail -n 5 /tmp/logs/bg.log
  bash "$0" pack > /dev/null; ls "$OUT"
  ;;
serving-slice)
  # issue 24's serving slice, one call (after seed and grow): the SGLang chain of
  # model_patches/ (0001-0003, 0006) against the reference alone (BL=/tmp/bl-alt holds
  # only reference.json; its accuracy stands in, --force-environment), through the
  # serving set shortened to fit a call (docs/gpu-runs/profiles/h200-minicpm8b-serving.toml),
  # then no server left behind. Next call: `serving-alone "$P" h200-minicpm8b-serving-chain`
  # (the reference's server and bench_serving alone: fidelity) and `no-orphans`.
  P=docs/gpu-runs/profiles/h200-minicpm8b-serving.toml
  bash "$0" pick chain 0001 0002 0003 0006
  rm -rf /tmp/bl-alt && mkdir -p /tmp/bl-alt/h200-minicpm8b
  cp /tmp/bl/h200-minicpm8b/reference.json /tmp/bl-alt/h200-minicpm8b/
  BL=/tmp/bl-alt CL=/tmp/logs/alt-CHANGELOG.md bash "$0" guard "$P" /tmp/pick/chain \
    h200-minicpm8b-serving-chain --force-environment
  bash "$0" no-orphans
  bash "$0" pack > /dev/null
  ;;
accuracy-stop)
  # issue 25: the sequential accuracy guard against a full pass on h200-minicpm8b (or
  # PROFILE), each patch alone on one engine, against the stored reference, REPEATS
  # alternations (python -m patchgate.tools.accuracy_stop); rows into
  # /tmp/logs/NAME.json after each patch, so a call that ends early keeps the rows done
  name=$1; shift
  python3 -m patchgate.tools.accuracy_stop --profile "${PROFILE:-h200-minicpm8b}" \
    --baselines "$BL" --repeats "${REPEATS:-3}" --json "/tmp/logs/$name.json" "$@" 2>&1 \
    | tee "/tmp/logs/$name.log" | grep -v "^\[rank\|^\s*$\|Capturing\|it/s\]" | tail -n 30
  echo "exit: ${PIPESTATUS[0]}"
  bash "$0" no-orphans
  bash "$0" pack > /dev/null
  ;;
issue15)
  # issue 14's acceptance and issue 15's trades on h200-minicpm8b, in one lease:
  # the grown checkpoint (timed, then found in the cache); the SGLang chain of
  # model_patches/ (0001-0003 and 0006 FP8 W8A8) against the reference (--accept
  # --record: its baselines become the profile's); mixed int4/bf16 and int4
  # weight-only, each against the reference only (BL=/tmp/bl-alt). On 2026-12-05 the
  # sequence did not outlive the device call that started it: run one guard per call.
  bash "$0" seed
  bash "$0" grow; bash "$0" grow
  bash "$0" pick chain 0001 0002 0003 0006
  bash "$0" guard h200-minicpm8b /tmp/pick/chain h200-minicpm8b-chain --accept --record
  rm -rf /tmp/bl-alt && mkdir -p /tmp/bl-alt/h200-minicpm8b
  cp /tmp/bl/h200-minicpm8b/reference.json /tmp/bl-alt/h200-minicpm8b/ 2>/dev/null
  bash "$0" pick mixed 0008
  BL=/tmp/bl-alt CL=/tmp/logs/alt-CHANGELOG.md \
    bash "$0" guard h200-minicpm8b /tmp/pick/mixed h200-minicpm8b-0008-mixed
  bash "$0" pick int4 0007
  BL=/tmp/bl-alt CL=/tmp/logs/alt-CHANGELOG.md \
    bash "$0" guard h200-minicpm8b /tmp/pick/int4 h200-minicpm8b-0007-int4
  echo "issue15 sequence done"
  ;;
*)
  echo "unknown step $step" >&2; exit 2
  ;;
esac
