#!/usr/bin/env bash
# Build the C++ core with AddressSanitizer + UndefinedBehaviorSanitizer (TORCHNEURON_SANITIZE=1, into
# build/sanitize only) and run tests against that build; fails on any sanitizer report.
#   bash scripts/sanitize.sh                      # the device, op-sweep and training tests
#   bash scripts/sanitize.sh tests/test_x.py -k y # any pytest arguments instead
# Python and torch are not instrumented: libasan is preloaded (it must come first), leak detection is off
# (CPython and torch keep memory until exit by design), every report stops its process and is also written
# to build/sanitize/reports/, which this script checks after the run (a report in a subprocess whose test
# tolerated the crash still fails the run). docs/testing.md.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || bash scripts/setup.sh
TORCHNEURON_SANITIZE=1 bash scripts/build.sh

lib=$PWD/build/sanitize/lib
so=$(ls "$lib"/torch_neuronx/_C*.so)
# The extension must really be instrumented (a normal .so would pass everything silently).
# (nm's output is read whole first: `nm | grep -q` fails under pipefail when grep stops reading early.)
undefined=$(nm -D --undefined-only "$so")
grep -q __asan_report <<< "$undefined" || { echo "sanitize: $so is not built with ASan" >&2; exit 2; }
grep -q __ubsan_handle <<< "$undefined" || { echo "sanitize: $so is not built with UBSan" >&2; exit 2; }

reports=$PWD/build/sanitize/reports
rm -rf "$reports" && mkdir -p "$reports"
libasan=$(${CXX:-c++} -print-file-name=libasan.so)
[ -e "$libasan" ] || { echo "sanitize: the compiler's libasan.so was not found: install it (Debian: apt-get install libgcc-12-dev)" >&2; exit 2; }
# libstdc++ too: python does not link it, and ASan's __cxa_throw interceptor must find it at start-up or the
# first C++ exception (any TORCH_CHECK) aborts with "CHECK failed: real___cxa_throw != 0".
export LD_PRELOAD=$libasan:$(${CXX:-c++} -print-file-name=libstdc++.so.6)${LD_PRELOAD:+:$LD_PRELOAD}
export ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:detect_odr_violation=0:log_path=$reports/asan:log_exe_name=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:log_path=$reports/ubsan:log_exe_name=1
# The sanitized copy of the package first; PYTHONSAFEPATH keeps `python -c` in the checkout (tests do that)
# from putting the checkout, with its normal extension, in front of it.
export PYTHONPATH=$lib${PYTHONPATH:+:$PYTHONPATH} PYTHONSAFEPATH=1
.venv/bin/python -c "import torch, torch_neuronx; f = torch_neuronx._C.__file__; assert f == '$so', f; print('sanitize: torch_neuronx._C from', f)"

[ $# -gt 0 ] || set -- tests/test_device.py tests/test_op_sweep.py tests/test_training.py
status=0
.venv/bin/python -m pytest -q -p no:cacheprovider "$@" || status=$?
if compgen -G "$reports/*" > /dev/null; then
  echo "sanitize: sanitizer reports (also in $reports):" >&2
  cat "$reports"/* >&2
  exit 1
fi
[ $status -eq 0 ] && echo "sanitize: no ASan/UBSan report"
exit $status
