# Sourced by session 24's kernel A/B scripts, after they set P (their output folder):
# the device environment, and one folder per kernel variant holding a sitecustomize
# module that sets launch's switches in every Python process started with it on
# PYTHONPATH, strategies.py's spawned compile workers included.
set -uo pipefail
t0=$(date +%s)
source benchmarks/device_env.sh || exit 1
mkdir -p "$P"
site() {  # name python-statements
    mkdir -p "/tmp/sites/$1"
    printf 'import rltriton_tune.kernels.launch as launch\n%s\n' "$2" \
        > "/tmp/sites/$1/sitecustomize.py"
}
site even 'launch.EVEN_TILES = True'
site prefetch 'launch.PREFETCH_L2 = True'
site both 'launch.EVEN_TILES = True; launch.PREFETCH_L2 = True'
PYTHONPATH=/tmp/sites/both:$PYTHONPATH python3 -c \
    'import rltriton_tune.kernels.launch as l; assert l.EVEN_TILES and l.PREFETCH_L2' || exit 1
sweep() {  # name variant(or shipped) N T strategies
    local site=
    [ "$2" != shipped ] && site=/tmp/sites/$2:
    PYTHONPATH=$site$PYTHONPATH timeout 170 python3 benchmarks/strategies.py \
        --output "$P/strat_$1" --algorithms retrace --n "$3" --t "$4" \
        --strategies "$5" --max-seconds 150 > "$P/strat_$1.log" 2>&1
    echo "strat_$1: rc $? at $(( $(date +%s) - t0 )) s" | tee -a "$P/times.txt"
    tar czf "$OUT/$P.tgz" "$P"
}
