#!/usr/bin/env bash
# pack-deno.sh — prepares .gpu-deno/ so the GPU host can run weft under Deno: a compressed deno from
# node_modules (the pinned devDependency) as .gpu-deno/deno.xz (~30 MiB), and .gpu-deno/enter.sh,
# which unpacks it (once per host), puts it on PATH and runs the command through gpu-pack's
# .gpu/enter.sh (bun, the packed node_modules, the project root):
#     bash .gpu-deno/enter.sh bash bench/gpu-host.sh deno-info deno-demo deno-test test1 runtimes
# Its own folder, not .gpu/: bun.xz (~39 MiB), deno.xz and build/ (~20 MiB) together exceed what one
# device call carries (64 MiB). Carry .gpu and build in one call, then .gpu-deno in the next: a warm
# machine keeps what an earlier call carried. .gpu-deno/ is in .gitignore.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
bin=$(find -L node_modules/@deno node_modules/deno -type f -name deno -size +50M 2>/dev/null | head -n 1 || true)
if [ -z "$bin" ]; then echo "pack-deno: no deno binary under node_modules; run npm install first" >&2; exit 1; fi
mkdir -p .gpu-deno
if [ ! -s .gpu-deno/deno.xz ] || [ "$bin" -nt .gpu-deno/deno.xz ]; then
  xz -T0 -6 -c "$bin" > .gpu-deno/deno.xz.part && mv .gpu-deno/deno.xz.part .gpu-deno/deno.xz
fi
cat > .gpu-deno/enter.sh <<'INNER'
#!/usr/bin/env bash
# Unpacks deno (once per host), puts it on PATH, and runs "$@" through gpu-pack's .gpu/enter.sh.
set -e
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
if [ ! -x /tmp/weft-deno/deno ]; then
  mkdir -p /tmp/weft-deno
  xz -dc "$here/deno.xz" > /tmp/weft-deno/deno.part && chmod +x /tmp/weft-deno/deno.part && mv /tmp/weft-deno/deno.part /tmp/weft-deno/deno
fi
# No network there: no update check; Deno's cache in /tmp.
export PATH=/tmp/weft-deno:$PATH DENO_DIR=/tmp/weft-deno/cache DENO_NO_UPDATE_CHECK=1
if [ -x /tmp/weft-bun/bun ] || [ -f "$root/.gpu/bun.xz" ]; then exec bash "$root/.gpu/enter.sh" "$@"; fi
# No bun here (a call that carried .gpu-deno, .carry and .gpu/node_modules only: bun.xz and deno.xz
# together exceed one call's carry): Deno and Python steps run; Bun steps fail saying bun is missing.
if [ ! -d "$root/.gpu/node_modules" ]; then echo ".gpu-deno: carry .gpu/node_modules (gpu-pack) too" >&2; exit 1; fi
[ -e "$root/node_modules" ] || ln -s "$root/.gpu/node_modules" "$root/node_modules"
cd "$root"
exec "$@"
INNER
chmod +x .gpu-deno/enter.sh
du -h .gpu-deno/deno.xz | awk '{print "pack-deno: .gpu-deno/deno.xz is " $1 "; carry .gpu-deno to the GPU host after .gpu and build"}'
